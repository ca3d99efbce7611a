"""Server-sent events: turn a server's lines into the data payloads of its events."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator

import httpx
import orjson  # 3-5x faster than json on the per-token hot path (bench/parse_throughput.py)

from spectui.engine.errors import StreamBroken

DONE = object()  # the `data: [DONE]` sentinel some servers send at the end


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
        # event:, id:, retry: and unknown fields carry nothing spectui uses
        if line.startswith(("event:", "id:", "retry:")):
            return None
        # llama.cpp reports some errors as a bare JSON line instead of an SSE event
        if line[:1] == "{":
            self._data.append(line)
            return self.flush()
        raise StreamBroken(f"malformed SSE line: {line[:80]!r}")

    def flush(self) -> str | None:
        if not self._data:
            return None
        payload = "\n".join(self._data)
        self._data.clear()
        return payload


def parse_payload(payload: str) -> dict | object:
    """The JSON object of one event's data, or DONE."""
    if payload == "[DONE]":
        return DONE
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
        if payload is not None:
            yield parse_payload(payload)
    payload = decoder.flush()
    if payload is not None:
        yield parse_payload(payload)


def why(exc: Exception) -> str:
    """The first line of an exception's text, short enough for a one-line message."""
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:120]


def error_text(r: httpx.Response) -> str:
    """A server's own error message from an error response (JSON `error.message` or the body)."""
    try:
        body = r.json()
        err = body.get("error", body)
        if isinstance(err, dict):
            return str(err.get("message", err))[:200]
        return str(err)[:200]
    except Exception:
        return (r.text or r.reason_phrase or "")[:200].strip()


async def post_sse(client: httpx.AsyncClient, url: str, body: dict, headers: dict | None = None,
                   read_timeout: float = 300.0,
                   clock: Callable[[], int] = time.perf_counter_ns) -> AsyncIterator[tuple[int, dict]]:
    """POST a streaming request and yield (arrival time, JSON object) per event, until [DONE] or the end.

    Every way the stream can fail — an HTTP error, no connection, a dropped connection, malformed
    SSE, an error object from the server — raises StreamBroken with a one-line message; the caller
    adds how far it got. The arrival time is taken when the line arrives, before parsing.
    """
    decoder = SSEDecoder()
    try:
        async with client.stream("POST", url, json=body, headers=headers or {},
                                 timeout=httpx.Timeout(30.0, read=read_timeout)) as r:
            if r.status_code >= 400:
                await r.aread()
                raise StreamBroken(f"{url} answered HTTP {r.status_code}: {error_text(r)}")
            async for line in r.aiter_lines():
                t = clock()
                payload = decoder.feed(line)
                if payload is None:
                    continue
                obj = parse_payload(payload)
                if obj is DONE:
                    return
                if "error" in obj and not obj.keys() & {"content", "choices", "text"}:
                    err = obj["error"]
                    raise StreamBroken(f"server error: {err.get('message', err) if isinstance(err, dict) else err}")
                yield t, obj
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise StreamBroken(f"cannot connect to {url} ({why(exc)})") from None
    except httpx.HTTPError as exc:
        raise StreamBroken(f"connection to {url} lost ({why(exc)})") from None
