"""backends/sse on the raw bytes of recorded streams, cut every way a network can cut them: the payloads
must be the JSON each `data:` line holds (json.loads of the file's own lines), multi-byte UTF-8 split
across chunks included; and every way a stream can fail is one line that says which."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from spectui.backends.sse import (
    DONE,
    ByteSSEDecoder,
    SSEDecoder,
    error_text,
    iter_payloads,
    parse_payload,
    post_sse,
    why,
)
from spectui.core.errors import StreamBroken

DATA = Path(__file__).parent.parent / "data"
EMOJI = DATA / "llamacpp-b11434-draft-simple-emoji-utf8.sse"


def expected(path: Path) -> list[dict]:
    return [json.loads(x[6:]) for x in path.read_text("utf-8").splitlines() if x.startswith("data: ")]


def chunks_of(raw: bytes, size: int) -> list[bytes]:
    return [raw[i : i + size] for i in range(0, len(raw), size)]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64, 10_000])
def test_the_byte_decoder_gives_every_event_whatever_the_chunks(size):
    raw = EMOJI.read_bytes()
    assert any(b >= 0x80 for b in raw)  # multi-byte UTF-8 in the stream: chunks of 1-3 bytes split it
    dec = ByteSSEDecoder()
    got = [json.loads(p) for c in chunks_of(raw, size) for p in dec.feed(c)]
    tail = dec.flush()
    got += [json.loads(tail)] if tail is not None else []
    assert got == expected(EMOJI)


def stream_body(chunks: list[bytes]):
    async def body():
        for c in chunks:  # each chunk as the client reads it
            yield c

    def handler(request):
        return httpx.Response(200, content=body(), headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(handler)


def post(chunks: list[bytes], **kw) -> list[dict]:
    async def go():
        async with httpx.AsyncClient(transport=stream_body(chunks)) as c:
            return [obj async for _t, obj in post_sse(c, "http://x/completion", {}, **kw)]

    return asyncio.run(go())


@pytest.mark.parametrize("size", [1, 3, 4096])
def test_a_live_stream_split_inside_characters_keeps_them_whole(size):
    got = post(chunks_of(EMOJI.read_bytes(), size))
    assert got == expected(EMOJI)
    text = "".join(o.get("content", "") for o in got)
    assert "\ufffd" not in text and text.startswith("🌊🐟🐚\n")


def test_line_ends_keepalives_and_a_last_event_without_its_blank_line():
    body = b': keep-alive\r\ndata: {"a": 1}\r\n\r\ndata: {"b":\rdata: 2}\r\rdata: {"c": 3}'
    for size in (1, 2, 5, len(body)):  # a \r at a chunk's end waits to see whether \n follows
        assert post(chunks_of(body, size)) == [{"a": 1}, {"b": 2}, {"c": 3}], size


def test_done_ends_the_stream_and_what_follows_is_not_read():
    assert post([b'data: {"a": 1}\n\ndata: [DONE]\n\ndata: {"b": 2}\n\n']) == [{"a": 1}]


def test_a_bare_json_line_is_an_event():
    # llama.cpp reports some errors as a bare JSON line; a plain object line is still an event
    assert post([b'{"content": "x"}\n']) == [{"content": "x"}]


def test_an_error_object_from_the_server_is_one_line():
    with pytest.raises(StreamBroken, match=r"^server error: the context is full$"):
        post([b'data: {"error": {"code": 500, "message": "the context is full"}}\n\n'])
    with pytest.raises(StreamBroken, match=r"^server error: plain$"):
        post([b'data: {"error": "plain"}\n\n'])
    # an event that carries content is an event, even with an error key beside it
    assert post([b'data: {"error": "x", "content": "y"}\n\n']) == [{"error": "x", "content": "y"}]


def test_http_errors_name_the_status_and_the_servers_message():
    def handler(request):
        return httpx.Response(400, json={"error": {"message": "n_predict too large"}})

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as c:
            return [o async for o in post_sse(c, "http://h:1/completion", {})]

    with pytest.raises(StreamBroken) as exc:
        asyncio.run(go())
    assert str(exc.value) == "http://h:1/completion answered HTTP 400: n_predict too large"


def test_error_text_reads_json_text_and_html():
    assert error_text(httpx.Response(500, json={"error": {"message": "boom"}})) == "boom"
    assert error_text(httpx.Response(500, json={"detail": "x"})) == "{'detail': 'x'}"
    assert error_text(httpx.Response(500, text="plain   words\nhere")) == "plain words here"
    page = "<html><body>bad gateway</body></html>"
    assert error_text(httpx.Response(502, text=page)) == f"an HTML page ({len(page)} bytes)"
    assert error_text(httpx.Response(500, text="x" * 500)) == "x" * 200


def test_keepalives_alone_past_the_idle_limit_fail_the_stream():
    clock = iter(range(10**9, 10**12, 400_000_000))  # 0.4 s between readings (a monotonic clock is never 0)
    with pytest.raises(StreamBroken, match=r"^no event for 1 s \(only keep-alives\): idle timeout$"):
        post([b": ka\n"] * 10, idle_timeout=1.0, clock=lambda: next(clock))


def test_a_request_past_its_deadline_fails():
    clock = iter(range(10**9, 10**12, 400_000_000))
    chunks = [b'data: {"a": %d}\n\n' % i for i in range(10)]
    with pytest.raises(StreamBroken, match=r"^the request ran past its deadline of 1 s$"):
        post(chunks, deadline=1.0, clock=lambda: next(clock))
    assert len(post(chunks, deadline=None, clock=lambda: next(clock))) == 10  # no deadline: all of them


def test_each_event_carries_the_time_its_chunk_arrived():
    ticks = iter([100, 200, 300, 400, 500, 600])

    async def go():
        async with httpx.AsyncClient(
            transport=stream_body([b'data: {"a": 1}\n\ndata: {"b": 2}\n\n', b'data: {"c": 3}\n\n'])
        ) as c:
            return [t async for t, _ in post_sse(c, "http://x/", {}, clock=lambda: next(ticks))]

    assert asyncio.run(go()) == [200, 200, 300]  # started at 100; one reading per chunk, shared by its events


def test_the_line_decoder_joins_data_lines_and_ignores_other_fields():
    dec = SSEDecoder()
    assert [dec.feed(x) for x in ("event: x", "id: 3", "data: a", "data:b", "data", "")] == [None] * 5 + ["a\nb\n"]
    assert dec.feed("") is None and dec.flush() is None
    assert SSEDecoder().feed('{"bare": 1}') == '{"bare": 1}'


def test_parse_payload_and_iter_payloads():
    assert parse_payload("[DONE]") is DONE and parse_payload(b"[DONE]") is DONE
    assert parse_payload("  ") is None and parse_payload(b'{"a": 1}') == {"a": 1}
    with pytest.raises(StreamBroken, match="unexpected JSON in stream"):
        parse_payload("[1, 2]")
    with pytest.raises(StreamBroken, match="malformed JSON in stream"):
        parse_payload("{nope")
    assert list(iter_payloads(["data: [DONE]", "", 'data: {"a": 1}'])) == [DONE, {"a": 1}]


def test_why_is_the_first_line_of_an_error():
    assert why(ValueError("one\ntwo")) == "one" and why(ValueError()) == "ValueError"
    assert why(ValueError("x" * 300)) == "x" * 120


# -- what each failure says, exactly (the survivors of backends/sse's mutmut run) -------------------------
def test_error_text_of_bodies_that_are_not_objects():
    assert error_text(httpx.Response(500, json=[1, 2])) == "[1, 2]"  # the body as JSON, not the raw text
    assert error_text(httpx.Response(500, json={"error": "plain"})) == "plain"
    assert error_text(httpx.Response(500, json={"error": {"code": 5}})) == "{'code': 5}"
    assert error_text(httpx.Response(500, content=b"")) == "Internal Server Error"  # the status's own phrase
    assert error_text(httpx.Response(599, content=b"")) == ""  # no phrase for 599: nothing, not a placeholder
    page = "  \n<html>bad gateway</html>"
    assert error_text(httpx.Response(502, text=page)) == f"an HTML page ({len(page)} bytes)"


def test_a_recorded_line_may_still_carry_its_line_end():
    assert list(iter_payloads(["data: [DONE]\r\n", "\r\n", 'data: {"a": 1}\n', "\n"])) == [DONE, {"a": 1}]


def test_a_long_payload_is_quoted_to_80_characters():
    long = "[" + "1," * 60 + "1]"
    with pytest.raises(StreamBroken) as exc:
        parse_payload(long)
    assert str(exc.value) == f"unexpected JSON in stream: {long[:80]!r}"
    bad = "{" + "x" * 100
    with pytest.raises(StreamBroken) as exc:
        parse_payload(bad)
    assert str(exc.value).startswith(f"malformed JSON in stream: {bad[:80]!r} (")


def test_an_error_key_beside_choices_or_text_is_an_event():
    for key in ("choices", "text"):
        obj = {"error": None, key: []}
        assert post([f"data: {json.dumps(obj)}\n\n".encode()]) == [obj]


def test_a_long_server_error_is_cut_to_200_characters():
    msg = "m" * 300
    with pytest.raises(StreamBroken) as exc:
        post([f'data: {{"error": {{"message": "{msg}"}}}}\n\n'.encode()])
    assert str(exc.value) == "server error: " + "m" * 200


STOPPED = "the server stopped mid-answer; see its log"  # StreamBroken's own hint


def failing(exc: Exception):
    def handler(request):
        raise exc

    return httpx.MockTransport(handler)


@pytest.mark.parametrize(
    "exc,message,hint",
    [
        (httpx.ConnectError("refused"), "cannot connect to http://***@h:1/completion (refused)", STOPPED),
        (
            httpx.ReadTimeout("slow"),
            "no answer for 7 s: idle timeout",
            "the server may be stuck; raise --idle-timeout if it is just slow",
        ),
        (
            httpx.RemoteProtocolError("peer closed"),
            "connection to http://***@h:1/completion lost (peer closed)",
            STOPPED,
        ),
    ],
)
def test_each_transport_failure_is_one_line_that_says_which(exc, message, hint):
    async def go():
        async with httpx.AsyncClient(transport=failing(exc)) as c:
            return [o async for o in post_sse(c, "http://u:pw@h:1/completion", {}, idle_timeout=7)]

    with pytest.raises(StreamBroken) as got:
        asyncio.run(go())
    assert str(got.value) == message and got.value.hint == hint


def test_the_request_is_a_post_with_the_body_and_the_timeouts():
    seen = []

    def handler(request):
        seen.append(request)
        return httpx.Response(200, content=b'data: {"a": 1}\n\n')

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as c:
            return [o async for _t, o in post_sse(c, "http://x/completion", {"n": 1}, {"X-H": "v"}, idle_timeout=9)]

    assert asyncio.run(go()) == [{"a": 1}]
    [r] = seen
    assert r.method == "POST" and json.loads(r.content) == {"n": 1} and r.headers["x-h"] == "v"
    assert r.extensions["timeout"] == {"connect": 30.0, "read": 9, "write": 30.0, "pool": 30.0}


def ticking(*readings):
    """A clock that reads the given times in turn, then stays at the last."""
    it = iter(readings)
    last = [readings[-1]]

    def read():
        last[0] = next(it, last[0])
        return last[0]

    return read


def test_the_limits_are_exact_to_the_nanosecond():
    start = 5_000_000_000
    chunk = [b'data: {"a": 1}\n\n']
    # one chunk exactly at the deadline: still in time; one nanosecond later: past it
    assert post(chunk, deadline=1.0, clock=ticking(start, start + 1_000_000_000)) == [{"a": 1}]
    with pytest.raises(StreamBroken) as exc:
        post(chunk, deadline=1.0, clock=ticking(start, start + 1_000_000_001))
    assert exc.value.hint == "raise --deadline for very long generations"
    ka = [b": ka\n", b": ka\n"]
    # keep-alives alone for exactly the idle limit: still waiting (the end of the body then ends it)
    assert post(ka, idle_timeout=1.0, clock=ticking(start, start + 500, start + 1_000_000_000)) == []
    with pytest.raises(StreamBroken) as exc:
        post(ka, idle_timeout=1.0, clock=ticking(start, start + 1_000_000_001))
    assert exc.value.hint == "the server may be stuck; raise --idle-timeout if it is just slow"


def test_a_chunk_read_with_the_previous_ones_packets_takes_their_stamp():
    """With kernel stamps (backends/transport.py), a chunk that came with no new packet arrived with the
    last stamped one; and the sweep's READ_LAG gets each stamped chunk's wait between arrival and read."""
    from collections import deque

    from spectui.backends.sse import READ_LAG
    from spectui.backends.transport import ARRIVALS

    start = 9_000_000_000
    stamps: deque = deque()

    async def body():
        stamps.append(start + 100)  # the packet that brought both chunks
        yield b'data: {"a": 1}\n\n'
        yield b'data: {"b": 2}\n\n'

    def handler(request):
        return httpx.Response(200, content=body(), extensions={ARRIVALS: stamps})

    lags: list[int] = []

    async def go():
        token = READ_LAG.set(lags)
        try:
            async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as c:
                clock = ticking(start, start + 400, start + 900, start + 1500, start + 2000)
                return [(t, o) async for t, o in post_sse(c, "http://x/", {}, clock=clock)]
        finally:
            READ_LAG.reset(token)

    assert asyncio.run(go()) == [(start + 100, {"a": 1}), (start + 100, {"b": 2})]
    assert lags == [300]  # read at +400, arrived at +100


def test_data_lines_without_a_space_and_bare_data_lines():
    dec = ByteSSEDecoder()
    assert dec.feed(b'data:{"a":\ndata\ndata: 1}\n\n') == [b'{"a":\n\n1}']  # a bare "data" adds an empty line


def test_crlf_inside_one_event_and_a_cr_split_from_its_lf():
    raw = b'data: {"a":\r\ndata: 1}\r\n\r\n'
    assert ByteSSEDecoder().feed(raw) == [b'{"a":\n1}']
    for cut in range(1, len(raw)):
        dec = ByteSSEDecoder()
        got = dec.feed(raw[:cut]) + dec.feed(raw[cut:])
        assert got == [b'{"a":\n1}'], cut


def test_a_stream_error_without_a_message_shows_the_whole_error():
    with pytest.raises(StreamBroken) as exc:
        post([b'data: {"error": {"code": 5}}\n\n'])
    assert str(exc.value) == "server error: {'code': 5}"


def test_an_event_with_empty_data_is_skipped_not_the_end():
    assert post([b'data:\n\ndata: {"a": 1}\n\n']) == [{"a": 1}]
