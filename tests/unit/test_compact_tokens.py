"""Packed token and step logs (core.tokens) read back exactly what was stored, and a recorder fed a whole
recorded stream at once (feed_all) ends up exactly as one fed each event in turn."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from spectui.backends.labeller import LlamaCppLabeller
from spectui.backends.recorded import load_payloads, repeat_stream
from spectui.core.events import StepEvent, StreamFailed, StreamFinished, StreamStarted, TokenEvent
from spectui.core.figures import SideRecorder
from spectui.core.tokens import EventLog, StepLog, TokenLog
from spectui.store.session import load_session, recorders_for
from spectui.store.session_writer import SessionWriter

DATA = Path(__file__).resolve().parent.parent / "data"


def _random_tokens(n: int, seed: int = 1) -> list[TokenEvent]:
    rng = random.Random(seed)
    labels = ["first", "accepted", "target", "unknown", "custom"]
    out = []
    for i in range(n):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 7)))
        out.append(
            TokenEvent(
                i,
                None if rng.random() < 0.2 else rng.randrange(0, 300_000),
                data,
                rng.randrange(-(2**40), 2**62),
                rng.choice(labels),  # type: ignore[arg-type]
                None if rng.random() < 0.3 else rng.randrange(0, 10**6),
                rng.randrange(0, 9),
            )
        )
    return out


def test_token_log_reads_back_every_field():
    events = _random_tokens(2000)
    log = TokenLog(events)
    assert len(log) == len(events) and list(log) == events and log == events
    rng = random.Random(2)
    for i in [0, 1, -1, -2, *(rng.randrange(-2000, 2000) for _ in range(200))]:
        assert log[i] == events[i]
    assert log[5:17] == events[5:17] and log[::-97] == events[::-97]
    assert log.joined() == b"".join(t.data for t in events)
    assert log.datas() == [t.data for t in events]
    for name in ("index", "token_id", "t_ns", "step", "rejected", "label"):
        assert log.column(name) == [getattr(t, name) for t in events]
    with pytest.raises(IndexError):
        log[2000]


def test_token_log_keeps_what_does_not_pack_whole():
    odd = [
        TokenEvent(0, 2**70, b"big id", 1, "target"),  # past 64 bits
        TokenEvent(1, -(2**63), b"the None marker itself", 2, "target"),
        TokenEvent(2, 5, bytearray(b"not bytes"), 3, "target"),  # type: ignore[arg-type]
        TokenEvent(3, 6, b"ok", 4, "accepted", 2**64),
    ]
    events = _random_tokens(50) + odd + _random_tokens(50, seed=3)
    log = TokenLog(events)
    assert list(log) == events and [log[i] for i in range(len(events))] == events
    assert log[50].token_id == 2**70 and log[51].token_id == -(2**63)
    assert log.joined() == b"".join(bytes(t.data) for t in events)


def test_logs_take_assignment_insertion_and_deletion_like_lists():
    events = _random_tokens(30)
    log, ref = TokenLog(events), list(events)
    new = TokenEvent(99, 1, b"\xff\xfe longer than before", 7, "target", 3, 1)
    log[3], ref[3] = new, new
    del log[0]
    del ref[0]
    log.insert(5, new)
    ref.insert(5, new)
    log.append(new)
    ref.append(new)
    assert list(log) == ref and log[-1] == new
    steps = [StepEvent(k, 8, k % 9, 10 * k) for k in range(40)]
    slog = StepLog(steps)
    assert list(slog) == steps and slog[-3] == steps[-3] and slog[2:5] == steps[2:5]
    slog[1] = StepEvent(1, 2**70, 0, 0)  # kept whole
    assert slog[1].drafted == 2**70 and list(slog)[2:] == steps[2:]


def _recorded(n_tokens: int, fail: bool = False):
    payloads = repeat_stream(load_payloads(DATA / "llamacpp-b11434-draft-simple-fizzbuzz.sse"), n_tokens)
    lab = LlamaCppLabeller()
    events = [StreamStarted(10, "x")]
    for k, obj in enumerate(payloads):
        events += lab.feed(obj, 1_000 + 37 * k)
    if fail:
        events = [e for e in events if not isinstance(e, StreamFinished)]
        events.append(StreamFailed(99_999, "cut"))
    return events


@pytest.mark.parametrize("fail", [False, True])
def test_feed_all_of_a_packed_stream_equals_feeding_each_event(fail):
    events = _recorded(3000, fail)
    # tokens after the end and a second start: a damaged record must still come out the same
    events += [TokenEvent(9999, 1, b"late", 5, "target"), StreamStarted(6, ""), StepEvent(9, 3, 1, 7)]
    one, whole = SideRecorder("candidate"), SideRecorder("candidate")
    for ev in events:
        one.feed(ev)
    log = EventLog(events)
    assert list(log) == events and len(log) == len(events)
    whole.feed_all(log)
    assert whole.figures.to_json() == one.figures.to_json()
    assert list(whole.figures.label_counts) == list(one.figures.label_counts)  # same order in reports
    assert list(whole.tokens) == list(one.tokens) and list(whole.steps) == list(one.steps)
    assert whole.output() == one.output() and whole.token_bytes() == one.token_bytes()
    assert (whole.started_ns, whole.finished, whole.failed) == (one.started_ns, one.finished, one.failed)


def test_a_saved_session_loads_back_the_events_it_recorded(tmp_path):
    events = _recorded(500)
    k = next(i for i, e in enumerate(events) if isinstance(e, TokenEvent) and e.index == 5)
    e = events[k]
    events[k] = TokenEvent(e.index, None, b"\xe2\x82", e.t_ns, e.label, e.step, e.rejected)  # saved as hex
    w = SessionWriter(tmp_path / "s.jsonl")
    from spectui.core.types import GenerationParams
    from spectui.store.prompts import single

    w.prompt(single("p"), GenerationParams(), "sequential")
    base = w.base_ns
    for ev in events:
        w.event("candidate", ev)
    w.close()
    s = load_session(tmp_path / "s.jsonl")
    got = list(s.prompts[0].events["candidate"])
    want = [type(e)(*(v - base if f == "t_ns" else v for f, v in _fields(e))) for e in events]
    assert [type(e) for e in got] == [type(e) for e in want]
    assert [e for e in got if isinstance(e, TokenEvent)] == [e for e in want if isinstance(e, TokenEvent)]
    assert [e for e in got if isinstance(e, StepEvent)] == [e for e in want if isinstance(e, StepEvent)]
    _, c = recorders_for(s.prompts[0])
    ref = SideRecorder("candidate")
    for ev in got:
        ref.feed(ev)
    assert c.figures.to_json() == ref.figures.to_json() and c.output() == ref.output()


def _fields(ev):
    from dataclasses import fields

    return [(f.name, getattr(ev, f.name)) for f in fields(ev)]
