"""The llama.cpp labeller on streams recorded from real servers (tests/data/README.md)."""

from pathlib import Path

import pytest

from spectui.backends.labeller import LlamaCppLabeller
from spectui.backends.sse import SSEDecoder, iter_payloads, parse_payload
from spectui.core.errors import StreamBroken
from spectui.core.events import StepEvent, StreamFinished, TokenEvent

DATA = Path(__file__).parent.parent / "data"


def label(name):
    lab = LlamaCppLabeller()
    events = []
    for i, obj in enumerate(iter_payloads((DATA / name).read_text().splitlines())):
        events += lab.feed(obj, i)
    return lab, events


def tokens(events):
    return [e for e in events if isinstance(e, TokenEvent)]


def test_draft_stream_labels_match_the_servers_counters():
    lab, events = label("llamacpp-b11434-draft-simple-fizzbuzz.sse")
    toks = tokens(events)
    counts = {k: sum(1 for t in toks if t.label == k) for k in ("first", "accepted", "target")}
    assert len(toks) == 61
    assert counts == {"first": 1, "accepted": 45, "target": 15}
    assert sum(counts.values()) == len(toks)
    # the server's own /metrics delta for this request: drafted 119, accepted 45, steps 15
    assert (lab.drafted, lab.accepted, lab.step) == (119, 45, 15)
    assert sum(t.rejected for t in toks) == 119 - 45
    # first step: 8 drafted, 8 accepted → 8 accepted tokens then the bonus token
    assert [t.label for t in toks[:10]] == ["first"] + ["accepted"] * 8 + ["target"]
    assert toks[9].rejected == 0 and toks[9].step == 1
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert (steps[1].drafted, steps[1].accepted, steps[1].rejected) == (8, 2, 6)
    assert [t.label for t in toks[10:13]] == ["accepted", "accepted", "target"] and toks[12].rejected == 6
    assert isinstance(events[-1], StreamFinished) and events[-1].stop_type == "eos"


def test_baseline_stream_is_all_target_and_no_steps():
    lab, events = label("llamacpp-b11434-baseline-fizzbuzz.sse")
    toks = tokens(events)
    assert toks[0].label == "first"
    assert all(t.label == "target" and t.step is None for t in toks[1:])
    assert lab.step == 0 and not any(isinstance(e, StepEvent) for e in events)


def test_withheld_utf8_tokens_are_counted_and_bytes_kept():
    lab, events = label("llamacpp-b11434-draft-simple-emoji-utf8.sse")
    toks = tokens(events)
    assert len(toks) == 40  # tokens_predicted, though only 16 events carried an id
    assert sum(1 for t in toks if t.token_id is None) == 24
    text = b"".join(t.data for t in toks).decode("utf-8")  # whole characters only
    assert text.startswith("🌊🐟🐚\n")
    # drafted and accepted are exact (the server's delta: 83 and 28); steps can merge when a step's
    # bytes are withheld past the next step's counter update, so they are cross-checked against /metrics
    assert (lab.drafted, lab.accepted) == (83, 28)
    counts = {k: sum(1 for t in toks if t.label == k) for k in ("first", "accepted", "target")}
    assert counts["accepted"] == 28 and sum(counts.values()) == 40


def test_stop_word_held_back_text_and_short_step():
    lab, events = label("llamacpp-b11434-draft-simple-stop-word.sse")
    fin = events[-1]
    assert isinstance(fin, StreamFinished) and fin.stop_type == "word"
    toks = tokens(events)
    text = (b"".join(t.data for t in toks) + fin.tail).decode()
    assert "return" not in text and text.startswith("```python\ndef fizzbuzz(n):")
    assert len(toks) == 13


def test_keepalives_and_multiline_data():
    dec = SSEDecoder()
    assert dec.feed(": keep-alive") is None
    assert dec.feed('data: {"a":') is None
    assert dec.feed("data: 1}") is None
    assert parse_payload(dec.feed("")) == {"a": 1}


def test_malformed_stream_raises_stream_broken():
    with pytest.raises(StreamBroken):
        list(iter_payloads(['data: {"content": "x", "tok', ""]))
    # the SSE spec: a line without a colon is a field name with an empty value; unknown fields are ignored
    assert SSEDecoder().feed("garbage line") is None


def test_next_steps_counters_before_the_last_steps_tokens():
    lab = LlamaCppLabeller()
    ev = []
    ev += lab.feed({"content": "a", "tokens": [1], "tokens_predicted": 1, "timings": {}}, 0)
    ev += lab.feed(
        {"content": "b", "tokens": [2], "tokens_predicted": 2, "timings": {"draft_n": 4, "draft_n_accepted": 2}}, 1
    )
    # step 2's counters arrive while step 1 still owes an accepted token and its target token
    ev += lab.feed(
        {"content": "cde", "tokens": [5], "tokens_predicted": 5, "timings": {"draft_n": 8, "draft_n_accepted": 3}}, 2
    )
    ev += lab.feed(
        {"content": "f", "tokens": [6], "tokens_predicted": 6, "timings": {"draft_n": 8, "draft_n_accepted": 3}}, 3
    )
    toks = tokens(ev)
    assert [(t.label, t.step) for t in toks] == [
        ("first", None),
        ("accepted", 1),
        ("accepted", 1),
        ("target", 1),
        ("accepted", 2),
        ("target", 2),
    ]
    assert toks[3].rejected == 2 and toks[5].rejected == 3
    assert b"".join(t.data for t in toks) == b"abcdef"


def test_last_step_cut_short_by_stop():
    lab = LlamaCppLabeller()
    ev = []
    ev += lab.feed({"content": "a", "tokens": [1], "tokens_predicted": 1, "timings": {}}, 0)
    ev += lab.feed(
        {"content": "b", "tokens": [2], "tokens_predicted": 2, "timings": {"draft_n": 4, "draft_n_accepted": 3}}, 1
    )
    ev += lab.feed(
        {
            "content": "",
            "tokens": [],
            "stop": True,
            "stop_type": "limit",
            "tokens_predicted": 2,
            "timings": {"draft_n": 4, "draft_n_accepted": 3},
        },
        2,
    )
    toks = tokens(ev)
    assert [t.label for t in toks] == ["first", "accepted"]
    assert isinstance(ev[-1], StreamFinished) and ev[-1].stop_type == "limit"
