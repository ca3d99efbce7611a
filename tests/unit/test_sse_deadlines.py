"""backends/sse, value by value (the survivors of its mutmut run): the request's timeouts from the idle timeout
and the deadline, the deadline on a server that goes silent, a read timeout at or before the deadline, the
transport's own body, and the decoders' edge rules. Each expected message, timeout and payload is written
by hand from the input the test gives."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from spectui.backends import sse
from spectui.backends.sse import ByteSSEDecoder, SSEDecoder, post_sse
from spectui.backends.transport import BODY_CHUNKS
from spectui.core.errors import StreamBroken

DEADLINE_HINT = "raise --deadline for very long generations"
IDLE_HINT = "the server may be stuck; raise --idle-timeout if it is just slow"


def run_post(handler, guard_s: float = 10.0, **kw) -> list[dict]:
    """post_sse's objects against a scripted server; a stream that never ends fails as TimeoutError after
    guard_s, never as StreamBroken, so a read with no deadline on it cannot pass for one that has it."""

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as c:
            return [o async for _t, o in post_sse(c, "http://x/completion", {}, **kw)]

    async def guarded():
        return await asyncio.wait_for(go(), guard_s)

    return asyncio.run(guarded())


def sent_timeouts(**kw) -> dict:
    seen = []

    def handler(request):
        seen.append(request.extensions["timeout"])
        return httpx.Response(200, content=b'data: {"a": 1}\n\n')

    assert run_post(handler, **kw) == [{"a": 1}]
    return seen[0]


def test_the_request_timeouts_follow_the_deadline_and_the_idle_timeout():
    # connect/write/pool: 30 s, or the deadline where it is shorter; read: the idle timeout, or the deadline
    # where that is shorter; no deadline: 30 s and the idle timeout
    assert sent_timeouts(idle_timeout=9, deadline=5) == {"connect": 5, "read": 5, "write": 5, "pool": 5}
    assert sent_timeouts(idle_timeout=2, deadline=5) == {"connect": 5, "read": 2, "write": 5, "pool": 5}
    assert sent_timeouts(idle_timeout=9, deadline=50) == {"connect": 30.0, "read": 9, "write": 30.0, "pool": 30.0}
    assert sent_timeouts(idle_timeout=9, deadline=None) == {"connect": 30.0, "read": 9, "write": 30.0, "pool": 30.0}


def test_a_server_silent_past_the_deadline_fails_at_the_deadline():
    # the scripted transport applies no httpx timeout: only post_sse's own bound on each read can end this
    async def body():
        yield b": ka\n"
        await asyncio.Event().wait()  # never set: the server says nothing more
        yield b""

    def handler(request):
        return httpx.Response(200, content=body())

    with pytest.raises(StreamBroken) as exc:
        run_post(handler, deadline=0.25, idle_timeout=60)
    assert str(exc.value) == "the request ran past its deadline of 0.25 s" and exc.value.hint == DEADLINE_HINT


def test_a_chunk_that_needs_a_wait_is_read_while_the_deadline_is_far():
    async def body():
        for c in (b'data: {"a": 1}\n\n', b'data: {"b": 2}\n\n'):
            await asyncio.sleep(0)  # the chunk is not there at once: the read suspends
            yield c

    def handler(request):
        return httpx.Response(200, content=body())

    assert run_post(handler, deadline=60, idle_timeout=120) == [{"a": 1}, {"b": 2}]


def test_a_read_past_the_wall_deadline_is_not_waited_for():
    async def late():
        await asyncio.sleep(0)  # the chunk needs one turn of the loop
        yield b"x"

    async def read(wall_deadline, idle_timeout=120.0):
        return await sse._read_chunk(late(), wall_deadline, idle_timeout, 7.0)

    with pytest.raises(StreamBroken) as exc:
        asyncio.run(read(time.monotonic() - 5))  # the deadline passed 5 s ago: no wait at all
    assert str(exc.value) == "the request ran past its deadline of 7 s" and exc.value.hint == DEADLINE_HINT
    assert asyncio.run(read(None)) == b"x"  # no deadline: the read waits
    assert asyncio.run(read(time.monotonic() + 1000)) == b"x"  # the deadline further than the idle timeout

    async def nothing():
        return
        yield b""

    async def ended():
        plain = await sse._read_chunk(nothing(), None, 120.0, None)
        near = await sse._read_chunk(nothing(), time.monotonic() + 60, 120.0, 60.0)
        return plain, near

    assert asyncio.run(ended()) == (None, None)  # the end of the body, with and without a near deadline


def read_timeout(request):
    raise httpx.ReadTimeout("slow")


def test_a_read_timeout_at_the_deadline_says_deadline_and_before_it_says_idle():
    # a deadline of 0.5 ms has passed (less 1 ms) by the time the server fails to answer
    with pytest.raises(StreamBroken) as exc:
        run_post(read_timeout, deadline=0.0005, idle_timeout=3)
    assert str(exc.value) == "the request ran past its deadline of 0.0005 s" and exc.value.hint == DEADLINE_HINT
    # no deadline at all: the idle timeout
    with pytest.raises(StreamBroken) as exc:
        run_post(read_timeout, deadline=None, idle_timeout=3)
    assert str(exc.value) == "no answer for 3 s: idle timeout" and exc.value.hint == IDLE_HINT


def test_a_read_timeout_within_a_millisecond_of_the_deadline_counts_as_the_deadline():
    exc = httpx.ReadTimeout("slow")
    at = sse._transport_broken(exc, "http://x/", 3.0, 4.0, time.monotonic() + 0.0009)
    assert str(at) == "the request ran past its deadline of 4 s" and at.hint == DEADLINE_HINT
    before = sse._transport_broken(exc, "http://x/", 3.0, 4.0, time.monotonic() + 0.9)
    assert str(before) == "no answer for 3 s: idle timeout" and before.hint == IDLE_HINT
    timeout = sse._transport_broken(httpx.ConnectTimeout("no route"), "http://x/", 3.0, 4.0, None)
    assert str(timeout) == "cannot connect to http://x/ (no route)"


def test_the_transports_own_body_is_the_one_read():
    # the kernel-stamped transport hands its own chunks (BODY_CHUNKS); httpx's stream is then not read
    async def own():
        yield b'data: {"own": 1}\n\n'

    def handler(request):
        return httpx.Response(200, content=b'data: {"httpx": 1}\n\n', extensions={BODY_CHUNKS: own})

    assert run_post(handler) == [{"own": 1}]


def test_a_lone_colon_is_a_comment_and_only_one_space_after_data_is_dropped():
    dec = SSEDecoder()
    assert dec.feed(":") is None and dec.feed("data:  two") is None and dec.feed("") == " two"
    bdec = ByteSSEDecoder()
    assert bdec.feed(b":\ndata:  two\n\n") == [b" two"]


def test_a_held_carriage_return_ends_the_last_line_at_the_end_of_the_body():
    dec = ByteSSEDecoder()
    assert dec.feed(b"data: 12\r") == []  # held: a \n may follow in the next chunk
    assert dec.flush() == b"12"  # the end of the body: the \r ended the line, and is not data
    # flushed, the decoder holds nothing: a second flush has nothing and new bytes decode on their own
    assert dec.flush() is None and dec.feed(b"data: 3\n\n") == [b"3"]
    bare = ByteSSEDecoder()
    assert bare.feed(b'{"e": 1}') == [] and bare.flush() == b'{"e": 1}'  # a bare JSON last line, no line end


def test_a_recorded_line_of_spaces_is_not_a_blank_line():
    # the SSE spec: only an empty line ends an event; "   " is a field named "   " (ignored)
    assert list(sse.iter_payloads(['data: {"a":', "   ", "data: 1}", ""])) == [{"a": 1}]


def test_text_after_a_recorded_payload_is_malformed_not_dropped():
    with pytest.raises(StreamBroken) as exc:
        list(sse.iter_payloads(['data: {"a": 1}XX', ""]))
    assert str(exc.value).startswith("malformed JSON in stream: '{\"a\": 1}XX' (")


def test_a_deadline_of_zero_is_named_as_zero():
    readings = iter([5_000_000_000, 5_000_000_001])  # the request, then its one chunk a nanosecond later

    def handler(request):
        return httpx.Response(200, content=b'data: {"a": 1}\n\n')

    with pytest.raises(StreamBroken) as exc:
        run_post(handler, deadline=0, clock=lambda: next(readings))
    assert str(exc.value) == "the request ran past its deadline of 0 s" and exc.value.hint == DEADLINE_HINT
