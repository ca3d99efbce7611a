"""`spectui serve` without a browser: what a non-browser client sending its own headers gets, the cap,
a port in use, and a `kill -9` of the server taking its app processes (and their llama-servers) with it.
The browser's side of the same checks is in test_browser.py."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import aiohttp
import psutil
import pytest


class Serve:
    def __init__(self, tmp_path: Path, *options: str, app_args=()) -> None:
        env = dict(os.environ, SPECTUI_DATA_DIR=str(tmp_path / "data"), SPECTUI_CONFIG_DIR=str(tmp_path / "config"))
        argv = [sys.executable, "-m", "spectui", "serve", "--port", "0", *options]
        if app_args:
            argv += ["--", *app_args]
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + 120  # an upper bound: Python and aiohttp start slowly on a loaded machine
        while not any("serving the app at" in ln for ln in self.lines):
            assert self.proc.poll() is None and time.monotonic() < deadline, self.lines
            time.sleep(0.05)
        url = re.search(r"(http://\S+)", next(ln for ln in self.lines if "serving" in ln)).group(1)
        m = re.match(r"http://([^/]+)/\?token=(\S+)$", url)
        self.url, self.host, self.token = url, m.group(1), m.group(2)
        self.port = int(self.host.rsplit(":", 1)[1])

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)

    def get(self, path: str, **headers) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.putrequest("GET", path, skip_host=True)
        conn.putheader("Host", headers.pop("Host", self.host))
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders()
        r = conn.getresponse()
        body = r.read().decode()
        conn.close()
        return r.status, body

    def apps(self) -> list[psutil.Process]:
        try:
            return [c for c in psutil.Process(self.proc.pid).children() if c.status() != psutil.STATUS_ZOMBIE]
        except psutil.NoSuchProcess:
            return []

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@contextlib.contextmanager
def serving(tmp_path, *options, app_args=()):
    s = Serve(tmp_path, *options, app_args=app_args)
    try:
        yield s
    finally:
        s.stop()


async def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.1)


def alive(procs) -> list[psutil.Process]:
    out = []
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
    return out


def test_headers_of_another_site_and_no_token_are_refused(tmp_path):
    with serving(tmp_path) as s:
        assert s.get(f"/?token={s.token}")[0] == 200
        assert s.get("/")[0] == 403  # no token
        status, body = s.get(f"/?token={s.token}", Origin="http://evil.example")
        assert status == 403 and "another origin" in body
        status, body = s.get(f"/?token={s.token}", Host="attacker.example")
        assert status == 403 and "not this server's address" in body
        assert s.get(f"/?token={s.token}", Host=f"127.0.0.1:{s.port + 1}")[0] == 403  # another port's name
        assert s.get(f"/?token={s.token}", Host=f"localhost:{s.port}")[0] == 200  # loopback names are the server's
        assert s.get(f"/download/x?token={s.token}", Origin="http://evil.example")[0] == 403
        assert s.get("/download/x")[0] == 403
        assert s.apps() == []


async def test_the_websocket_needs_the_token_and_the_origin(tmp_path):
    with serving(tmp_path, "--max-apps", "1") as s:
        base = f"ws://{s.host}/ws"
        own = f"http://{s.host}"
        async with aiohttp.ClientSession() as http_:
            for url, origin in (
                (f"{base}/{s.token}", "http://evil.example"),  # token right, origin wrong
                (f"{base}/{'x' * len(s.token)}", own),  # origin right, token wrong
                (base, own),
            ):
                with pytest.raises(aiohttp.WSServerHandshakeError) as exc:
                    await http_.ws_connect(url, origin=origin)
                assert exc.value.status in (403, 404)
            assert s.apps() == []
            ws = await http_.ws_connect(f"{base}/{s.token}?width=80&height=24", origin=own)
            await wait_until(lambda: len(s.apps()) == 1, 120, "the app process")
            # past --max-apps 1: refused before the upgrade, with the message, and no second process
            with pytest.raises(aiohttp.WSServerHandshakeError) as exc:
                await http_.ws_connect(f"{base}/{s.token}", origin=own)
            assert exc.value.status == 503
            status, body = s.get(f"/?token={s.token}")
            assert status == 503 and "1 app is already running" in body and "--max-apps" in body
            assert len(s.apps()) == 1
            await ws.close()
            await wait_until(lambda: not s.apps(), 120, "the app to end with its websocket")


def test_a_port_in_use_is_one_line_and_never_says_serving(tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        r = subprocess.run(
            [sys.executable, "-m", "spectui", "serve", "--port", str(port)], capture_output=True, text=True, timeout=120
        )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "serving" not in r.stderr and f"cannot listen on 127.0.0.1:{port}" in r.stderr
    assert r.stderr.strip().count("\n") == 0


async def _kill_serve_and_check_orphans(s: Serve, wait_for_children) -> None:
    async with aiohttp.ClientSession() as http_:
        ws = await http_.ws_connect(f"ws://{s.host}/ws/{s.token}?width=100&height=30", origin=f"http://{s.host}")
        try:
            descendants = await wait_for_children()
            # the app has drawn and gone idle (an idle app writes nothing, so nothing breaks its pipe)
            drawn = 0
            while True:
                try:
                    msg = await ws.receive(timeout=1.0)
                except TimeoutError:
                    if drawn:
                        break
                    continue
                assert msg.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT), msg
                drawn += len(msg.data)
            os.kill(s.proc.pid, signal.SIGKILL)
            s.proc.wait(10)
            await wait_until(lambda: not alive(descendants), 120, f"{alive(descendants)} to die with spectui serve")
        finally:
            await ws.close()


async def test_kill_9_of_serve_takes_its_app_processes(tmp_path):
    s = Serve(tmp_path)
    try:

        async def children():
            await wait_until(lambda: len(s.apps()) == 1, 120, "the app process")
            return psutil.Process(s.proc.pid).children(recursive=True)

        await _kill_serve_and_check_orphans(s, children)
    finally:
        s.stop()


async def test_kill_9_of_serve_demo_takes_the_demo_servers(tmp_path, assets_found):
    s = Serve(tmp_path, app_args=["demo"])
    try:

        def servers():
            return [
                p
                for p in psutil.Process(s.proc.pid).children(recursive=True)
                if "llama-server" in " ".join(p.cmdline())
            ]

        async def children():
            await wait_until(lambda: len(servers()) == 2, 120, "the demo's two llama-servers")
            return psutil.Process(s.proc.pid).children(recursive=True)

        await _kill_serve_and_check_orphans(s, children)
    finally:
        s.stop()
