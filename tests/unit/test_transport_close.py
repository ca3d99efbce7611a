"""Closing the stamped client (backends/transport.py) returns whatever the servers do.

aiohttp's own close closes each connection and waits for asyncio to report it lost, which asyncio does only
after the connection's unsent bytes are written: a server that stopped reading the request keeps that
close waiting for ever (reproduced below). The stamped client aborts its connections first. Every server
here is a real socket on 127.0.0.1 that misbehaves in one way: it never answers, it stalls in the middle
of a stream, it never reads. The checks wait for conditions with generous limits; CLOSE_S is raised so
far that only the abort, not the bounded wait, can make a close return in time.
"""

from __future__ import annotations

import asyncio
import socket
import threading

import httpx
import pytest

from spectui.backends import transport
from spectui.backends.transport import stamped_client

LIMIT_S = 60.0  # far above one loop turn on a loaded machine, far below the abort-less close (CLOSE_S below)
BIG_BODY = b"x" * (32 << 20)  # more than loopback's socket buffers hold: the rest stays unsent in the client


@pytest.fixture(autouse=True)
def only_the_abort_can_close_in_time(monkeypatch):
    monkeypatch.setattr(transport, "CLOSE_S", 3600.0)


def deaf_server(rcvbuf: int | None = None) -> socket.socket:
    """A listening socket that never accepts: the kernel completes the handshake and takes the request
    into its buffer (as far as that holds), and nothing ever answers or reads."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:  # set before listen: the accepted connections inherit it, so the window stays small
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock


class StallingSSEServer:
    """Answers a POST with a stream's head and one SSE event, then sends nothing more, keeping the
    connection open until the test ends."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.done = threading.Event()
        self.peer_gone = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += conn.recv(65536)
            event = b'data: {"content": "a"}\n\n'
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                + b"%x\r\n%s\r\n" % (len(event), event)
            )
            conn.settimeout(0.2)
            while not self.done.is_set():  # stalls; notes when the client's end goes away
                try:
                    if conn.recv(65536) == b"":
                        self.peer_gone.set()
                        self.done.wait()
                except TimeoutError:
                    continue
                except OSError:
                    self.peer_gone.set()
                    self.done.wait()

    def close(self) -> None:
        self.done.set()
        self.sock.close()
        self.thread.join(10)


async def wait_done(task: asyncio.Future, what: str) -> None:
    done, _ = await asyncio.wait({task}, timeout=LIMIT_S)
    assert done, f"{what} still waiting after {LIMIT_S:.0f} s"


def connections(client: httpx.AsyncClient) -> list:
    """The client's connections in use (aiohttp's protocols that have a socket)."""
    session = client._transport.client  # type: ignore[attr-defined]  # a factory until the first request
    if callable(session) or session.connector is None:
        return []
    return [proto for proto in session.connector._acquired if getattr(proto, "transport", None) is not None]


async def close_with_one_in_flight(client: httpx.AsyncClient, request, ready) -> BaseException | None:
    """Start `request`, wait until `ready()` (its connection in the state under test), close the client;
    the request's outcome."""
    task = asyncio.ensure_future(request())
    for _ in range(int(LIMIT_S / 0.01)):
        if task.done() or ready():
            break
        await asyncio.sleep(0.01)
    assert not task.done(), f"the request ended before the close: {task.exception()!r}"
    assert ready(), f"the request never reached the state under test in {LIMIT_S:.0f} s"
    await wait_done(asyncio.ensure_future(client.aclose()), "the client's close")
    await wait_done(task, "the request in flight")
    return task.exception()


async def test_close_returns_while_a_request_waits_for_an_answer_that_never_comes():
    server = deaf_server()
    port = server.getsockname()[1]
    try:
        client = stamped_client()

        async def request():
            await client.post(f"http://127.0.0.1:{port}/completion", json={"prompt": "x"}, timeout=None)

        exc = await close_with_one_in_flight(client, request, lambda: bool(connections(client)))
        assert isinstance(exc, httpx.TransportError), f"the request should fail as a transport error: {exc!r}"
    finally:
        server.close()


async def test_close_returns_mid_stream_when_the_server_stalls():
    server = StallingSSEServer()
    try:
        client = stamped_client()
        got: list[bytes] = []

        async def request():
            async with client.stream("POST", f"http://127.0.0.1:{server.port}/completion", json={}, timeout=None) as r:
                async for chunk in r.aiter_bytes():
                    got.append(chunk)

        exc = await close_with_one_in_flight(client, request, lambda: bool(got))
        assert b"".join(got) == b'data: {"content": "a"}\n\n', "the event before the stall arrived"
        assert isinstance(exc, httpx.TransportError), f"the stalled stream should fail as a transport error: {exc!r}"
        await asyncio.to_thread(server.peer_gone.wait, LIMIT_S)
        assert server.peer_gone.is_set(), "the server should see the client's connection end"
    finally:
        server.close()


async def test_close_returns_when_the_server_never_reads_the_request():
    server = deaf_server(rcvbuf=4096)
    port = server.getsockname()[1]
    try:
        client = stamped_client()

        async def request():
            await client.post(f"http://127.0.0.1:{port}/completion", content=BIG_BODY, timeout=None)

        def body_stuck() -> bool:  # bytes of the request wait in the client: the server's window is full
            return any(proto.transport.get_write_buffer_size() > 0 for proto in connections(client))

        exc = await close_with_one_in_flight(client, request, body_stuck)
        assert isinstance(exc, httpx.TransportError), f"the request should fail as a transport error: {exc!r}"
    finally:
        server.close()


async def test_aiohttps_own_close_waits_on_a_server_that_never_reads():
    """The reproduction: why the stamped client aborts before it closes (aiohttp 3.14 on CPython 3.11)."""
    import aiohttp

    server = deaf_server(rcvbuf=4096)
    port = server.getsockname()[1]
    session = aiohttp.ClientSession()
    try:
        posting = asyncio.ensure_future(session.post(f"http://127.0.0.1:{port}/completion", data=BIG_BODY))

        def body_stuck() -> bool:
            acquired = session.connector._acquired  # type: ignore[union-attr]
            return any(p.transport is not None and p.transport.get_write_buffer_size() > 0 for p in acquired)

        for _ in range(int(LIMIT_S / 0.01)):
            if posting.done() or body_stuck():
                break
            await asyncio.sleep(0.01)
        assert body_stuck(), "the request's body should wait in the client"
        sockets = [p.transport for p in session.connector._acquired if p.transport is not None]  # type: ignore[union-attr]
        closing = asyncio.ensure_future(session.close())
        done, _ = await asyncio.wait({closing}, timeout=2.0)
        if done:
            pytest.skip("this aiohttp's close no longer waits for unsent bytes")
        # it waits for bytes that cannot leave, and the connector has let go of the connection already:
        # only aborting the socket's transport, which the stamped client does before it closes, ends it
        for sock in sockets:
            sock.abort()
        await wait_done(closing, "aiohttp's close after the abort")
        await wait_done(posting, "the post")
    finally:
        server.close()


async def test_closing_a_client_never_used_or_twice_returns():
    client = stamped_client()
    await client.aclose()
    await client.aclose()
