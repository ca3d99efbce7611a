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
HELD_S = 0.03  # after each even-numbered event the client's loop stays blocked until the server has sent the
# next one, and this long after: that event waits at least 30 ms in the kernel, and is read alone
TOL_NS = 2_000_000  # the kernel stamps on CLOCK_REALTIME; moving one onto the monotonic clock reads both clocks


class TimedSSEServer:
    """Answers one POST per connection with `events` SSE events GAP_S apart, recording each send time."""

    def __init__(self, events: int, gzip_body: bool = False, drop: bool = False) -> None:
        self.events = events
        self.gzip_body = gzip_body  # the whole body gzip-compressed (Content-Encoding: gzip), in one chunk
        self.drop = drop  # close the connection after the events, without the body's end
        self.sent: list[tuple[int, int]] = []  # each event's send: the clock just before and just after it
        self.out = [threading.Event() for _ in range(events)]  # set once event k is on the wire
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
                before = time.perf_counter_ns()
                conn.sendall(b"%x\r\n%s\r\n" % (len(data), data))
                self.sent.append((before, time.perf_counter_ns()))
                self.out[k].set()
            if not self.drop:
                conn.sendall(b"0\r\n\r\n")


async def read_busily(client: httpx.AsyncClient, url: str, srv: TimedSSEServer) -> list[tuple[int, int]]:
    """(arrival stamp, time read) per event. After each even-numbered event the loop is blocked, as a
    client busy with 256 other streams would be, until the next event is on the wire and HELD_S more:
    that event waits in the kernel however the two threads are scheduled."""
    out = []
    async for t, _obj in post_sse(client, url, {"prompt": "x"}):
        out.append((t, time.perf_counter_ns()))
        k = len(out)
        if k % 2 and k < srv.events:
            assert srv.out[k].wait(10), "the server never sent the next event"
            time.sleep(HELD_S)  # blocks the loop on purpose: the event sits in the kernel meanwhile
    return out


async def test_the_sweeps_client_stamps_the_send_time_not_the_busy_read():
    events = 4
    with TimedSSEServer(events) as srv:
        async with stamped_client(4) as client:
            got = await read_busily(client, f"http://127.0.0.1:{srv.port}/completion", srv)
    assert len(got) == events
    for k, ((stamp, read), (sent, on_wire)) in enumerate(zip(got, srv.sent)):
        # against the recorded send of that very event, not a nominal gap
        assert sent - TOL_NS <= stamp <= on_wire + TOL_NS, f"event {k}: stamped {(stamp - sent) / 1e6:.2f} ms off"
        if k % 2:  # it waited in the kernel while the loop was blocked: read late, stamped on time
            assert read - on_wire >= HELD_S * 1e9


async def test_without_kernel_stamps_the_read_time_stands():
    """A plain httpx client (the TUI's) has no stamped sockets: its stamp is the read, late under load."""
    with TimedSSEServer(2) as srv:
        async with httpx.AsyncClient() as client:
            got = await read_busily(client, f"http://127.0.0.1:{srv.port}/completion", srv)
    stamp, _ = got[1]
    assert stamp - srv.sent[1][1] >= HELD_S * 1e9  # stamped when read, at least HELD_S after it was sent


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
        # packet in that moment carries none (post_sse reads its clock then): warm up until one is stamped
        for _ in range(1000):
            server.sendall(b"w")
            assert client.recv(100) == b"w"
            if client.arrivals:
                break
        assert client.arrivals, "the kernel never stamped a packet"
        client.arrivals.clear()
        before = time.perf_counter_ns()
        server.sendall(b"hello")
        on_wire = time.perf_counter_ns()
        time.sleep(0.05)  # the read comes 50 ms after the packet, on purpose
        read_at = time.perf_counter_ns()
        assert client.recv(100) == b"hello"
        assert len(client.arrivals) == 1
        assert before - TOL_NS <= client.arrivals[0] <= on_wire + TOL_NS < read_at  # the send, not the read
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
