"""Server-sent events: turn a server's lines into the data payloads of its events."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass

import httpx
import orjson  # 3-5x faster than json on the per-token hot path (bench/parse_throughput.py)

from spectui.backends.transport import ARRIVALS, BODY_CHUNKS
from spectui.core.errors import StreamBroken, redact

DONE = object()  # the `data: [DONE]` sentinel some servers send at the end

# Where set (the sweep sets it per side and level), post_sse appends how long each kernel-stamped chunk
# waited between its arrival and spectui reading it: the client's own lag under load, in ns
READ_LAG: ContextVar[list[int] | None] = ContextVar("spectui_read_lag", default=None)


class SSEDecoder:
    """Incremental SSE decoder: feed it lines (without their newline), get complete data payloads.

    Lines starting with ':' are keep-alives (llama.cpp sends them while it works); an event's data
    may span several `data:` lines, joined with '\n' as the SSE spec says.
    """

    __slots__ = ("_data",)

    def __init__(self) -> None:
        self._data: list[str] = []

    def feed(self, line: str) -> str | None:
        if not line:
            return self.flush()
        if line[0] == ":":
            return None
        if line.startswith("data:"):
            value = line[5:]
            if value[:1] == " ":
                value = value[1:]
            self._data.append(value)
            return None
        # llama.cpp reports some errors as a bare JSON line instead of an SSE event
        if line[:1] == "{":
            self._data.append(line)
            return self.flush()
        # the SSE spec: a line without a colon is a field with an empty value ("data" alone adds an empty
        # data line); event:, id:, retry: and unknown fields carry nothing spectui uses and are ignored
        if line == "data":
            self._data.append("")
        return None

    def flush(self) -> str | None:
        if not self._data:
            return None
        payload = "\n".join(self._data)
        self._data.clear()
        return payload


class ByteSSEDecoder:
    """SSEDecoder's rules on raw bytes, for the live streams: split into lines here and hand orjson the
    payload's bytes, instead of decoding every chunk to text and splitting it again (httpx's
    aiter_lines), which was most of the client's CPU per event at high concurrency (bench/loadgen.py).

    Lines end in \n, \r\n or \r (the SSE spec allows all three); a \r at the end of a chunk waits for the
    next one, which may start with its \n.
    """

    __slots__ = ("_buf", "_data")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """The payloads that this chunk completed, in order."""
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf:
            hold = buf.endswith(b"\r")
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if hold:  # the \r became a \n: take it back until the next chunk says whether \n follows
                buf = buf[:-1] + b"\r"
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        out = []
        for line in lines:
            payload = self._line(line)
            if payload is not None:
                out.append(payload)
        return out

    def _line(self, line: bytes) -> bytes | None:
        if not line:
            return self._dispatch()
        first = line[:1]
        if first == b":":
            return None
        if line.startswith(b"data:"):
            value = line[5:]
            if value[:1] == b" ":
                value = value[1:]
            self._data.append(value)
            return None
        if first == b"{":  # llama.cpp reports some errors as a bare JSON line
            self._data.append(line)
            return self._dispatch()
        if line == b"data":
            self._data.append(b"")
        return None

    def ending(self) -> list[bytes]:
        """At the end of the body, the payloads still held: a last event without its blank line still counts."""
        return [p for p in (self.flush(),) if p is not None]

    def flush(self) -> bytes | None:
        """At the end of the body: the last line (its held \r ends it) and any event left open."""
        if self._buf:
            line, self._buf = self._buf.removesuffix(b"\r"), b""
            payload = self._line(line)
            if payload is not None:
                return payload
        return self._dispatch()

    def _dispatch(self) -> bytes | None:
        if not self._data:
            return None
        payload = b"\n".join(self._data)
        self._data.clear()
        return payload


def parse_payload(payload: str | bytes) -> dict | object | None:
    """The JSON object of one event's data, DONE, or None for an event with empty data."""
    if payload == "[DONE]" or payload == b"[DONE]":
        return DONE
    if not payload.strip():
        return None
    try:
        obj = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise StreamBroken(f"malformed JSON in stream: {payload[:80]!r} ({exc})") from None
    if not isinstance(obj, dict):
        raise StreamBroken(f"unexpected JSON in stream: {payload[:80]!r}")
    return obj


def iter_payloads(lines: Iterable[str]) -> Iterator[dict | object]:
    """Parse a whole recorded stream (for tests, replay and benchmarks)."""
    decoder = SSEDecoder()
    for line in lines:
        payload = decoder.feed(line.rstrip("\r\n"))
        if payload is not None and (obj := parse_payload(payload)) is not None:
            yield obj
    payload = decoder.flush()
    if payload is not None and (obj := parse_payload(payload)) is not None:
        yield obj


def why(exc: Exception) -> str:
    """The first line of an exception's text, short enough for a one-line message."""
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:120]


def error_text(r: httpx.Response) -> str:
    """A server's own error message from an error response (JSON `error.message` or the body)."""
    try:
        body = r.json()
        err = body.get("error", body) if isinstance(body, dict) else body
        text = str(err.get("message", err)) if isinstance(err, dict) else str(err)
    except Exception:
        text = r.text or r.reason_phrase or ""
    if text.lstrip()[:1] == "<":  # an HTML error page: its text is markup, not a message
        text = f"an HTML page ({len(r.text)} bytes)"
    # a server's error body can echo the request's headers: never pass a credential on
    return redact(" ".join(text.split())[:200])


IDLE_TIMEOUT_S = 120.0  # the longest wait between two events (llama.cpp: a long prompt's prefill)
DEADLINE_S = 3600.0  # the longest a whole request may take


def _past_deadline(deadline: float | None) -> StreamBroken:
    return StreamBroken(
        f"the request ran past its deadline of {deadline or 0:g} s", hint="raise --deadline for very long generations"
    )


async def post_sse(
    client: httpx.AsyncClient,
    url: str,
    body: dict,
    headers: dict | None = None,
    idle_timeout: float = IDLE_TIMEOUT_S,
    deadline: float | None = DEADLINE_S,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> AsyncIterator[tuple[int, dict]]:
    """POST a streaming request and yield (arrival time, JSON object) per event, until [DONE] or the end.

    Every way the stream can fail — an HTTP error, no connection, a dropped connection, malformed
    SSE, an error object from the server, no event for `idle_timeout` seconds (keep-alive comments do
    not count), the whole request past `deadline` — raises StreamBroken with a one-line message that
    says which; the caller adds how far it got. The arrival time of a chunk of bytes is the kernel's
    stamp of its newest packet where the client's sockets carry one (the sweep's client, see
    backends/transport.py), else a clock read when the chunk reaches spectui, before it parses it; the
    events a chunk completes share it (they arrived together).
    """
    decoder = ByteSSEDecoder()
    limits = _Limits.starting(clock(), idle_timeout, deadline)
    url_shown = redact(url)
    try:
        async with client.stream("POST", url, json=body, headers=headers or {}, timeout=limits.http_timeout()) as r:
            chunks, stamps = await _body_of(r, url_shown, limits.started, clock)
            last_event = limits.started
            while True:
                chunk = await _read_chunk(chunks, limits.wall_deadline, idle_timeout, deadline)
                t = stamps.stamp()
                payloads = decoder.feed(chunk) if chunk is not None else decoder.ending()
                keep_alive_only = not payloads and chunk is not None
                limits.check(t, last_event, keep_alive_only)
                if keep_alive_only:
                    continue
                for payload in payloads:
                    last_event = t
                    obj = parse_payload(payload)
                    if obj is None:
                        continue
                    if obj is DONE:
                        return
                    assert isinstance(obj, dict)  # parse_payload gives an object, DONE or None
                    _raise_server_error(obj)
                    yield t, obj
                if chunk is None:
                    return
    except httpx.HTTPError as exc:
        raise _transport_broken(exc, url_shown, idle_timeout, deadline, limits.wall_deadline) from None


async def _body_of(r: httpx.Response, url_shown: str, started: int, clock: Callable[[], int]):
    """The answer's body chunks (aiohttp's own where the stamped client gives them) and their arrival stamps;
    an HTTP error status is StreamBroken with the server's own error text."""
    if r.status_code >= 400:
        await r.aread()
        raise StreamBroken(f"{url_shown} answered HTTP {r.status_code}: {error_text(r)}")
    body_chunks = r.extensions.get(BODY_CHUNKS)
    chunks = body_chunks() if body_chunks is not None else r.aiter_bytes()
    return chunks, _ArrivalStamps(r.extensions.get(ARRIVALS), READ_LAG.get(), started, clock)


@dataclass(frozen=True)
class _Limits:
    """A streaming request's two limits: no event for `idle_timeout` seconds, the whole request past `deadline`.
    They are read on the arrival clock (monotonic, perf_counter_ns: one reading per chunk serves the stamp and
    both limits); the waits are bounded on the process's own monotonic clock (the arrival clock may be a test's)."""

    idle_timeout: float
    deadline: float | None
    started: int  # the arrival clock's reading when the request went out
    wall_deadline: float | None  # time.monotonic() at the deadline

    @classmethod
    def starting(cls, started: int, idle_timeout: float, deadline: float | None) -> _Limits:
        return cls(idle_timeout, deadline, started, time.monotonic() + deadline if deadline is not None else None)

    def http_timeout(self) -> httpx.Timeout:
        """A server silent for good meets the deadline, not only the idle timeout: no wait (headers, a read) may
        outlast what is left of the deadline (the reads near it are bounded by asyncio.timeout in _read_chunk)."""
        deadline = self.deadline
        read_limit = min(self.idle_timeout, deadline) if deadline is not None else self.idle_timeout
        return httpx.Timeout(min(30.0, deadline or 30.0), read=read_limit)

    def check(self, t: int, last_event: int, keep_alive_only: bool) -> None:
        """StreamBroken when the chunk that arrived at `t` is past the deadline, or when it held only
        keep-alives and no event came for the idle timeout."""
        if self.deadline is not None and t > self.started + int(self.deadline * 1e9):
            raise _past_deadline(self.deadline)
        if keep_alive_only and t - last_event > int(self.idle_timeout * 1e9):
            raise StreamBroken(
                f"no event for {self.idle_timeout:g} s (only keep-alives): idle timeout",
                hint="the server may be stuck; raise --idle-timeout if it is just slow",
            )


async def _read_chunk(
    chunks: AsyncIterator[bytes], wall_deadline: float | None, idle_timeout: float, deadline: float | None
) -> bytes | None:
    """The body's next chunk, None at its end; where the deadline is nearer than the idle timeout, no read
    may outlast it (asyncio.timeout, not 3.11's wait_for, which can drop a cancel that lands as the read
    completes)."""
    if wall_deadline is not None and (left := wall_deadline - time.monotonic()) < idle_timeout:
        try:
            async with asyncio.timeout(max(left, 0.0)):
                return await anext(chunks, None)
        except TimeoutError:
            raise _past_deadline(deadline) from None
    return await anext(chunks, None)


class _ArrivalStamps:
    """The arrival time of each chunk read: the kernel's stamp of its newest packet where the socket carries
    one (backends/transport.py), else the clock as the bytes reach us, before any of our own work on them."""

    def __init__(self, arrivals: deque[int] | None, lags: list[int] | None, started: int, clock: Callable[[], int]):
        self.arrivals = arrivals
        self.lags = lags
        self.started = started
        self.clock = clock
        self.t_kernel: int | None = None  # a chunk already buffered when the last one was read arrived with it

    def stamp(self) -> int:
        """The arrival time of the chunk just read."""
        newest = 0
        if self.arrivals:  # the kernel's time for the newest packet of this chunk (backends/transport.py)
            newest = self.arrivals[-1]
            self.arrivals.clear()
        if newest >= self.started:  # older: an earlier response's last read on this kept-alive connection
            t = self.t_kernel = newest
            if self.lags is not None:
                self.lags.append(self.clock() - t)
            return t
        # stamped as the bytes reach us, before any of our own work on them
        return self.t_kernel if self.t_kernel is not None else self.clock()


def _raise_server_error(obj: dict) -> None:
    """An event that is only an error object (no content beside it) ends the stream with the server's message."""
    if "error" in obj and not obj.keys() & {"content", "choices", "text"}:
        err = obj["error"]
        msg = err.get("message", err) if isinstance(err, dict) else err
        raise StreamBroken(f"server error: {redact(str(msg))[:200]}")


def _transport_broken(
    exc: httpx.HTTPError, url_shown: str, idle_timeout: float, deadline: float | None, wall_deadline: float | None
) -> StreamBroken:
    """The one-line StreamBroken for a transport failure: no connection, no answer in time, a lost connection."""
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
        return StreamBroken(f"cannot connect to {url_shown} ({why(exc)})")
    if isinstance(exc, httpx.ReadTimeout):
        if wall_deadline is not None and time.monotonic() >= wall_deadline - 0.001:
            return _past_deadline(deadline)
        return StreamBroken(
            f"no answer for {idle_timeout:g} s: idle timeout",
            hint="the server may be stuck; raise --idle-timeout if it is just slow",
        )
    return StreamBroken(f"connection to {url_shown} lost ({why(exc)})")
