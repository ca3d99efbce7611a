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
