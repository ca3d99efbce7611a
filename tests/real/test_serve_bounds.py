"""`spectui serve` bounded once connected: the terminal size a page asks for is clamped at
start and on resize, half-sent requests are closed after the header timeout, connections past the cap are
closed on arrival, and the page asks no other site for anything (textual-serve's template loads a font
from Google Fonts; an offline machine waited for it)."""

from __future__ import annotations

import asyncio
import http.client
import re
import socket
import time

import aiohttp
import psutil

from spectui.cli.serve_guard import HEADER_TIMEOUT_S, MAX_CONNECTIONS, MAX_HEIGHT, MAX_WIDTH
from tests.real.test_serve import serving, wait_until


def test_the_page_loads_nothing_from_another_site(tmp_path):
    with serving(tmp_path) as s:
        status, page = s.get(f"/?token={s.token}")
        assert status == 200
        remote = [
            u for u in re.findall(r"""(?:href|src)=["']([^"']+)""", page) if not u.startswith(f"http://{s.host}/")
        ]
        assert remote == [], remote
        font = re.search(r'url\("([^"]+\.ttf)"\)', page)
        assert font is not None, "no @font-face for the bundled font"
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        conn.request("GET", font.group(1).split(s.host, 1)[1], headers={"Host": s.host})
        r = conn.getresponse()
        assert r.status == 200 and r.read()[:4] == b"\x00\x01\x00\x00"  # the bundled TrueType font is served
        conn.close()


async def test_a_huge_terminal_asked_at_start_is_clamped(tmp_path):
    with serving(tmp_path, "--max-apps", "1") as s:
        async with aiohttp.ClientSession() as http_:
            url = f"ws://{s.host}/ws/{s.token}?width=20000&height=20000"
            ws = await http_.ws_connect(url, origin=f"http://{s.host}")
            # the child is listed from its fork on, and holds the parent's environment until its exec: wait
            # for the environment serve gave it (a read between fork and exec found no ROWS under load)
            await wait_until(lambda: len(s.apps()) == 1 and "ROWS" in _environ(s.apps()), 120, "the app process")
            env = s.apps()[0].environ()
            assert (int(env["COLUMNS"]), int(env["ROWS"])) == (MAX_WIDTH, MAX_HEIGHT)
            await ws.close()
            await wait_until(lambda: not s.apps(), 120, "the app to end with its websocket")


def _environ(apps) -> dict:
    try:
        return apps[0].environ() if apps else {}
    except psutil.Error:  # it ended or is still being set up
        return {}


def _closed_by_peer(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_half_sent_requests_are_closed_and_connections_are_capped(tmp_path):
    with serving(tmp_path) as s:
        opened = time.monotonic()
        half = []
        for _ in range(MAX_CONNECTIONS):
            c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
            c.sendall(b"GET / HTTP/1.1\r\nHost: ")  # and never the rest
            half.append(c)
        extra = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        assert _closed_by_peer(extra, 5), "a connection past the cap was kept"
        assert all(_closed_by_peer(c, HEADER_TIMEOUT_S + 20) for c in half)
        assert time.monotonic() - opened < HEADER_TIMEOUT_S + 20
        for c in (*half, extra):
            c.close()
        assert s.get(f"/?token={s.token}")[0] == 200  # the server still answers whole requests


async def test_a_resize_to_a_huge_terminal_is_clamped():
    from spectui.cli.serve_web import ExecAppService

    sent: list[dict] = []

    async def nothing(*a, **k):
        return None

    service = ExecAppService("true", write_bytes=nothing, write_str=nothing, close=nothing, download_manager=None)

    async def capture(meta: dict) -> bool:
        sent.append(meta)
        return True

    service.send_meta = capture
    await service.set_terminal_size(100_000, 100_000)
    await service.set_terminal_size("x", float("inf"))
    assert [(m["width"], m["height"]) for m in sent] == [(MAX_WIDTH, MAX_HEIGHT), (80, 24)]
    await asyncio.sleep(0)
