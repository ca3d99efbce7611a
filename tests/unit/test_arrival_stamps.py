"""Arrival times under load: the sweep's client stamps an event when its packet reached the machine, not
when a busy event loop got round to reading it (backends/transport.py).

A scripted HTTP/1.1 server on loopback sends SSE events at known times; the client blocks its own
event loop after each event, as a client busy with 256 other streams would, so the next event waits
in the kernel. The kernel's stamp must give the send time; a clock read at the read gives the time
the client got free, tens of milliseconds late.
"""

from __future__ import annotations

import gzip
import json
import socket
import sys
import threading
import time
from collections import deque

import httpx
import pytest

from spectui.backends.sse import post_sse
from spectui.backends.transport import ARRIVALS, SO_TIMESTAMPNS, StampedSocket, stamped_client
from spectui.core.errors import StreamBroken

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or SO_TIMESTAMPNS is None, reason="kernel receive stamps: Linux"
)

GAP_S = 0.05  # between two events at the server
BUSY_S = 0.08  # the client's loop blocked after each even-numbered event: the next one waits 30 ms in the
# kernel and is read alone (the one after it is 20 ms off), so each read holds one event


class TimedSSEServer:
    """Answers one POST per connection with `events` SSE events GAP_S apart, recording each send time."""

    def __init__(self, events: int, gzip_body: bool = False, drop: bool = False) -> None:
        self.events = events
        self.gzip_body = gzip_body  # the whole body gzip-compressed (Content-Encoding: gzip), in one chunk
        self.drop = drop  # close the connection after the events, without the body's end
        self.sent: list[int] = []
        self.head = b""
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.sock.close()
        self.thread.join(5)

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += conn.recv(65536)
            head, _, body = buf.partition(b"\r\n\r\n")
            self.head = head
            length = int(next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")))
            while len(body) < length:
                body += conn.recv(65536)
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            if self.gzip_body:
                events = b"".join(
                    b"data: %s\n\n" % json.dumps({"content": f"t{k}"}).encode() for k in range(self.events)
                )
                data = gzip.compress(events)
                conn.sendall(head + b"Content-Encoding: gzip\r\n\r\n" + b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
                return
            conn.sendall(head + b"\r\n")
            for k in range(self.events):
                if k:
                    time.sleep(GAP_S)
                data = b"data: " + json.dumps({"content": f"t{k}"}).encode() + b"\n\n"
                self.sent.append(time.perf_counter_ns())
                conn.sendall(b"%x\r\n%s\r\n" % (len(data), data))
            if not self.drop:
                conn.sendall(b"0\r\n\r\n")


async def read_busily(client: httpx.AsyncClient, url: str) -> list[tuple[int, int]]:
    """(arrival stamp, time read) per event, blocking the loop BUSY_S after each even-numbered one."""
    out = []
    async for t, _obj in post_sse(client, url, {"prompt": "x"}):
        out.append((t, time.perf_counter_ns()))
        if len(out) % 2:
            time.sleep(BUSY_S)  # the loop is busy: the next event waits in the kernel
    return out


async def test_the_sweeps_client_stamps_the_send_time_not_the_busy_read():
    events = 4
    with TimedSSEServer(events) as srv:
        async with stamped_client(4) as client:
            got = await read_busily(client, f"http://127.0.0.1:{srv.port}/completion")
    assert len(got) == events
    for k, ((stamp, read), sent) in enumerate(zip(got, srv.sent)):
        assert stamp >= sent, f"event {k} stamped before it was sent"
        assert stamp - sent < 5e6, f"event {k} stamped {(stamp - sent) / 1e6:.1f} ms after its send"
        if k % 2:  # it waited in the kernel while the loop was busy: read late, stamped on time
            assert read - sent > (BUSY_S - GAP_S) * 1e9 / 2
    gaps = [(b[0] - a[0]) / 1e6 for a, b in zip(got, got[1:])]
    assert all(abs(g - GAP_S * 1000) < 5 for g in gaps), gaps  # the server's gaps, not the client's


async def test_without_kernel_stamps_the_read_time_stands():
    """A plain httpx client (the TUI's) has no stamped sockets: its stamp is the read, late under load."""
    with TimedSSEServer(2) as srv:
        async with httpx.AsyncClient() as client:
            got = await read_busily(client, f"http://127.0.0.1:{srv.port}/completion")
    late = [(t - sent) / 1e6 for (t, _), sent in zip(got, srv.sent)]
    assert late[1] > (BUSY_S - GAP_S) * 1000 / 2, late


async def test_responses_carry_their_sockets_arrivals():
    with TimedSSEServer(2) as srv:  # still streaming when the response is handed over (a whole response
        # already read releases its connection, and its stamps with it: post_sse reads its clock then)
        async with stamped_client(4) as client:
            async with client.stream("POST", f"http://127.0.0.1:{srv.port}/completion", json={}) as r:
                assert isinstance(r.extensions.get(ARRIVALS), deque)
                body = await r.aread()
    assert body.startswith(b"data: ")


def test_a_stamped_socket_records_each_read_on_the_monotonic_clock():
    listener = socket.create_server(("127.0.0.1", 0))
    client = StampedSocket(socket.AF_INET, socket.SOCK_STREAM, 0)
    client.connect(listener.getsockname())
    server, _ = listener.accept()
    try:
        # the kernel turns stamping on for the whole system a moment after the first socket asks: a
        # packet in that moment carries none (post_sse reads its clock then), so warm up first
        server.sendall(b"warm")
        time.sleep(0.05)
        assert client.recv(100) == b"warm"
        client.arrivals.clear()
        before = time.perf_counter_ns()
        server.sendall(b"hello")
        time.sleep(0.05)
        assert client.recv(100) == b"hello"
        after = time.perf_counter_ns()
        assert len(client.arrivals) == 1
        assert before <= client.arrivals[0] < before + 5e6 < after  # at the send, not at the read 50 ms on
    finally:
        for s in (server, client, listener):
            s.close()


async def test_a_compressed_body_is_still_decoded():
    """The direct path past httpx's layers is for uncompressed bodies only; a gzip body goes through httpx."""
    with TimedSSEServer(3, gzip_body=True) as srv:
        async with stamped_client(4) as client:
            got = [obj async for _t, obj in post_sse(client, f"http://127.0.0.1:{srv.port}/completion", {})]
    assert [o["content"] for o in got] == ["t0", "t1", "t2"]


async def test_a_dropped_connection_is_a_one_line_stream_error():
    with TimedSSEServer(2, drop=True) as srv:
        async with stamped_client(4) as client:
            got = []
            with pytest.raises(StreamBroken, match="connection to .* lost"):
                async for _t, obj in post_sse(client, f"http://127.0.0.1:{srv.port}/completion", {}):
                    got.append(obj)
    assert len(got) == 2


async def test_credentials_in_the_url_beside_an_api_key_go_as_httpx_sends_them():
    """aiohttp refuses a URL's user:password beside an Authorization header (a ValueError, which no
    stream error catches); the stamped client sends what plain httpx sends, and no traceback."""
    heads = []
    for make in (httpx.AsyncClient, lambda: stamped_client(4)):
        with TimedSSEServer(1) as srv:
            async with make() as client:
                url = f"http://alice:pw@127.0.0.1:{srv.port}/completion"
                got = [o async for _t, o in post_sse(client, url, {}, headers={"Authorization": "Bearer k"})]
        assert got == [{"content": "t0"}]
        fields = dict(h.split(b":", 1) for h in srv.head.split(b"\r\n")[1:])
        heads.append({k.lower(): v.strip() for k, v in fields.items()}[b"authorization"])
    assert heads[0] == heads[1], heads


async def test_a_stamp_from_before_the_request_is_not_taken():
    """On a kept-alive connection the socket's last stamp can be an earlier response's (its closing
    read); a chunk stamped with it would put the first token before the request was sent."""

    def handler(request):
        body = b'data: {"content": "t0"}\n\n'
        return httpx.Response(200, content=body, extensions={ARRIVALS: deque([1_000])})  # long past

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        before = time.perf_counter_ns()
        got = [t async for t, _obj in post_sse(client, "http://x/completion", {})]
    assert got and all(t >= before for t in got), got
