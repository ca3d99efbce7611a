"""The HTTP client of every command that times streams (compare, sweep, prefix, sampling, the TUI):
httpx's interface over aiohttp's transport, on sockets whose arrival times the kernel stamps.

httpx's own HTTP/1.1 stack (httpcore, h11, anyio) costs several times the CPU per streamed event that
aiohttp's C-accelerated parser does; at 64–256 concurrent streams on a 2-core machine that made the
client, not the server, the bottleneck (bench/loadgen.py). httpx-aiohttp keeps every backend's httpx
code as it is and swaps the transport underneath.

Arrival times. A batched server emits one token for every running stream at once; a client with one
event loop handles that burst one stream after another, so a clock read in the client stamps the last
stream of the burst late by the others' parsing, and more so the busier the client is (at 64 streams
the p99 inter-token-latency error was 2–4 ms here, the peer clients' as much). On Linux the client's
sockets ask the kernel to stamp every packet as it arrives (SO_TIMESTAMPNS): each read of a socket
carries the time its last packet came in, which no amount of work in the client delays. A chunk of a
response takes the stamp of the newest read it was made of; where there is no stamp (another OS, a loop
that reads sockets itself like uvloop, the first packets after the kernel turns stamping on, a response
wholly read before it was handed over), post_sse reads its own clock as before. Reads that a client too
busy to keep up lets pile into one take that read's newest stamp: an upper bound for the earlier events
in it, and never later than the clock read would have been.

Closing (aiohttp 3.14, reproduced in tests/unit/test_transport_close.py). aiohttp's own close closes each
connection and waits for the loop to report it gone, which asyncio does only once the connection's unsent
bytes are written: never, for a request body that a stalled server stopped reading. And a response still
being read when its connection closes is orphaned (the protocol drops it before the loss is reported):
its reader waits for ever. So the client ends every open response with a read error, aborts every
connection (a closing client has nothing left to send) and waits at most CLOSE_S for the rest.
"""

from __future__ import annotations

import asyncio
import functools
import platform
import socket
import struct
import sys
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator

import httpx

# Linux's SO_TIMESTAMPNS (asm-generic: 35, its control message the same number and a 64-bit timespec);
# Python's socket module does not name it. Elsewhere, or on the few architectures that number it
# differently, the sweep stamps arrivals with its own clock.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", None) or (
    35
    if sys.platform == "linux" and platform.machine() in ("x86_64", "aarch64", "arm64", "riscv64", "ppc64le", "s390x")
    else None
)
ARRIVALS = "spectui.arrivals"  # the response extension: the deque of kernel arrival times (monotonic ns)
# the response extension: the body's chunks straight from aiohttp, past httpx's three generator layers
# (raw, decoded, re-chunked) that an uncompressed body does not need: about 20 µs less CPU per event on
# a slow 2-core machine (64 streams × 64 tokens, whole client process, 6 alternating runs)
BODY_CHUNKS = "spectui.body_chunks"
_STALE_NS = 3_600 * 10**9  # a stamp further than this from now is not a packet's arrival time: ignored
CLOSE_S = 2.0  # the longest a client's close waits once every connection is aborted (it takes one loop turn)


class StampedSocket(socket.socket):
    """A TCP socket that keeps, for every read that returned data, the kernel's arrival time of its
    newest packet, on the monotonic clock that perf_counter_ns reads."""

    __slots__ = ("arrivals",)

    def __init__(self, family: int = -1, type: int = -1, proto: int = -1, fileno: int | None = None) -> None:
        super().__init__(family, type, proto, fileno)  # socket.dup() and accept() pass a fileno
        self.arrivals: deque[int] = deque(maxlen=64)
        if SO_TIMESTAMPNS is not None:
            self.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)

    def recv(self, n: int, flags: int = 0) -> bytes:  # what asyncio's socket transport calls
        data, ancdata, _, _ = self.recvmsg(n, 64, flags)
        if data:
            for level, kind, raw in ancdata:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= 16:
                    sec, nsec = struct.unpack_from("@qq", raw)
                    now = time.perf_counter_ns()  # the kernel's clock is CLOCK_REALTIME: move it onto ours
                    mono = sec * 1_000_000_000 + nsec - (time.time_ns() - now)
                    if abs(now - mono) < _STALE_NS:
                        self.arrivals.append(mono)
        return data


_sockets: weakref.WeakValueDictionary[int, StampedSocket] = weakref.WeakValueDictionary()


def _stamped_socket(addr_info) -> socket.socket:
    family, type_, proto = addr_info[0], addr_info[1], addr_info[2]
    if SO_TIMESTAMPNS is None or family not in (socket.AF_INET, socket.AF_INET6):
        return socket.socket(family, type_, proto)
    sock = StampedSocket(family, type_, proto)
    _sockets[sock.fileno()] = sock
    return sock


def _abort_connections(connector) -> None:
    """Abort every connection the connector holds, idle or in use: the transport drops its unsent bytes
    and reports itself lost on the next turn of the loop, so the connector's close has nothing to wait on.
    (aiohttp keeps them in `_conns` and `_acquired` since 3.0; read defensively, the bounded wait in
    StampedTransport.aclose covers a version that moves them.)"""
    protocols = list(getattr(connector, "_acquired", ()))
    for idle in getattr(connector, "_conns", {}).values():
        protocols.extend(proto for proto, _ in idle)
    for proto in protocols:
        abort = getattr(proto, "abort", None)
        if abort is not None:
            try:
                abort()
            except Exception:  # one connection's transport already gone never keeps the others open
                pass


async def _chunks(content) -> AsyncIterator[bytes]:
    from httpx_aiohttp.transport import map_aiohttp_exceptions  # lazy: aiohttp (~0.8 s) only for the stamped client

    with map_aiohttp_exceptions():  # aiohttp's errors raised as httpx's, as through httpx's own layers
        async for chunk in content.iter_any():
            yield chunk


def _carry_arrivals(response: httpx.Response, aio) -> None:
    """The response carries its socket's arrival times (ARRIVALS) and aiohttp's own chunks (BODY_CHUNKS, where
    the body is not compressed), for backends.sse to stamp each chunk with its packets' arrival."""
    try:  # its connection's socket; gone when the whole response was read before it came here
        sock = _sockets.get(aio.connection.transport.get_extra_info("socket").fileno())
    except AttributeError:
        sock = None
    if sock is not None:
        response.extensions[ARRIVALS] = sock.arrivals
    if response.headers.get("content-encoding", "identity") == "identity":
        response.extensions[BODY_CHUNKS] = lambda: _chunks(aio.content)


def _unsent(exc: Exception, request: httpx.Request) -> bool:
    """Whether a request failed before the server took it, on a connection it had already closed, and can be
    sent again as it was: aiohttp's 'Server disconnected' before any response, or its 'Can not write request
    body' (the connection closing as the request went out), for a request whose body is in memory. A
    server that is down fails again at connect, so its error still reaches the caller."""
    from aiohttp import ClientOSError, ServerDisconnectedError  # lazy: aiohttp, only for the stamped client

    cause = exc.__cause__
    closed = isinstance(cause, ServerDisconnectedError) or (
        isinstance(cause, ClientOSError) and "Can not write request body" in str(cause)
    )
    return closed and isinstance(request.stream, httpx.ByteStream)


async def _sent_once_more_if_unsent(send, request: httpx.Request, session) -> httpx.Response:
    try:
        return await send(request)
    except httpx.TransportError as exc:
        if getattr(session, "closed", True) or not _unsent(exc, request):
            raise  # a client being closed ends its requests, never sends them again
        # the pooled connection was closed by the server before it took the request: once more, on a new
        # connection (llama-server closes a connection after a streamed answer, b11434: half of back-to-back
        # template + stream pairs failed so, tests/real/test_keepalive.py)
        return await send(request)


@functools.cache
def _transport_class():
    from httpx_aiohttp import AiohttpTransport  # lazy: aiohttp (~0.8 s) only for the stamped client

    class StampedTransport(AiohttpTransport):
        """AiohttpTransport on StampedSockets; each response carries its socket's arrival times."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.open_responses: weakref.WeakSet = weakref.WeakSet()  # aiohttp's, for aclose to end

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if request.url.userinfo:  # httpx has made it the Authorization header already; aiohttp
                # refuses a URL's credentials beside that header (ValueError, not a connection error)
                request.url = request.url.copy_with(userinfo=b"")
            response = await _sent_once_more_if_unsent(super().handle_async_request, request, self.client)
            aio = getattr(response.stream, "_aiohttp_response", None)  # httpx-aiohttp's hold on aiohttp's
            if aio is None:
                return response
            self.open_responses.add(aio)
            _carry_arrivals(response, aio)
            return response

        async def aclose(self) -> None:
            """Close at once: abort every connection, then give aiohttp's close at most CLOSE_S. Returns
            promptly whatever the servers do (stalled, half-closed, not reading)."""
            from aiohttp import ClientPayloadError, ClientSession  # lazy: aiohttp, as above

            session = self.client
            if not isinstance(session, ClientSession) or session.closed:  # never opened, or closed already
                return
            for aio in list(self.open_responses):  # their readers fail at once instead of waiting for ever
                if not aio.content.is_eof():
                    aio.content.set_exception(ClientPayloadError("the client was closed while the response was read"))
            if session.connector is not None:
                _abort_connections(session.connector)
            closing = asyncio.ensure_future(session.close())
            closing.add_done_callback(lambda task: task.cancelled() or task.exception())  # retrieved: no warning
            try:  # asyncio.wait, not wait_for: on Python 3.11 wait_for also waits for the cancelled close to end
                await asyncio.wait({closing}, timeout=CLOSE_S)
            finally:
                if not closing.done():
                    closing.cancel()

    return StampedTransport


KEEPALIVE_S = 2.0  # below the servers' own idle keep-alive (5 s in llama-server, vLLM and SGLang)


def stamped_client(max_connections: int = 100) -> httpx.AsyncClient:
    import aiohttp  # lazy: aiohttp, as above

    def session() -> aiohttp.ClientSession:  # made inside the running loop, at the first request
        # an idle connection is reused for 2 s at most: llama-server (cpp-httplib) and uvicorn (vLLM, SGLang)
        # close theirs after 5 s, and aiohttp's default of 15 s reused one the server was closing at that
        # moment ("Can not write request body" on a prompt, seen in a one-at-a-time TUI run)
        connector = aiohttp.TCPConnector(
            limit=max_connections, socket_factory=_stamped_socket, keepalive_timeout=KEEPALIVE_S
        )
        return aiohttp.ClientSession(connector=connector)

    return httpx.AsyncClient(transport=_transport_class()(client=session))
