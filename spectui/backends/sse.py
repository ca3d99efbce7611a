"""Server-sent events: turn a server's lines into the data payloads of its events."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator

import httpx
import orjson  # 3-5x faster than json on the per-token hot path (bench/parse_throughput.py)

from spectui.core.errors import StreamBroken, redact

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


def parse_payload(payload: str) -> dict | object | None:
    """The JSON object of one event's data, DONE, or None for an event with empty data."""
    if payload == "[DONE]":
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
    says which; the caller adds how far it got. The arrival time is taken when the line arrives.
    """
    decoder = SSEDecoder()
    # the arrival clock is monotonic (perf_counter_ns): one reading per line serves the stamp and both limits
    started = clock()
    last_event = started
    idle_ns = int(idle_timeout * 1e9)
    deadline_at = started + int(deadline * 1e9) if deadline is not None else None
    url_shown = redact(url)
    try:
        async with client.stream(
            "POST", url, json=body, headers=headers or {}, timeout=httpx.Timeout(30.0, read=idle_timeout)
        ) as r:
            if r.status_code >= 400:
                await r.aread()
                raise StreamBroken(f"{url_shown} answered HTTP {r.status_code}: {error_text(r)}")
            async for line in r.aiter_lines():
                t = clock()
                if deadline_at is not None and t > deadline_at:
                    raise StreamBroken(
                        f"the request ran past its deadline of {deadline:g} s",
                        hint="raise --deadline for very long generations",
                    )
                payload = decoder.feed(line)
                if payload is None:
                    if t - last_event > idle_ns:
                        raise StreamBroken(
                            f"no event for {idle_timeout:g} s (only keep-alives): idle timeout",
                            hint="the server may be stuck; raise --idle-timeout if it is just slow",
                        )
                    continue
                last_event = t
                obj = parse_payload(payload)
                if obj is None:
                    continue
                if obj is DONE:
                    return
                if "error" in obj and not obj.keys() & {"content", "choices", "text"}:
                    err = obj["error"]
                    msg = err.get("message", err) if isinstance(err, dict) else err
                    raise StreamBroken(f"server error: {redact(str(msg))[:200]}")
                yield t, obj
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise StreamBroken(f"cannot connect to {url_shown} ({why(exc)})") from None
    except httpx.ReadTimeout:
        raise StreamBroken(
            f"no answer for {idle_timeout:g} s: idle timeout",
            hint="the server may be stuck; raise --idle-timeout if it is just slow",
        ) from None
    except httpx.HTTPError as exc:
        raise StreamBroken(f"connection to {url_shown} lost ({why(exc)})") from None
