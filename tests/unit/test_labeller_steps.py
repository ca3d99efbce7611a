"""The llama.cpp labeller on hand-made events, each expectation worked out from the rule in its docstring:
when draft_n_accepted rose by a and draft_n by d, the next a + 1 tokens are a accepted drafts and the
target's own token, with d − a drafts rejected there; withheld tokens, the final event, bad counters."""

from __future__ import annotations

import pytest

from spectui.backends.labeller import LlamaCppLabeller
from spectui.core.errors import BadEvent
from spectui.core.events import StepEvent, StreamFinished, TokenEvent


def ev(content="", tokens=(), predicted=None, draft=None, **extra) -> dict:
    obj = {"content": content, "tokens": list(tokens), **extra}
    if predicted is not None:
        obj["tokens_predicted"] = predicted
    if draft is not None:
        obj["timings"] = {"draft_n": draft[0], "draft_n_accepted": draft[1]}
    return obj


def run(*objs) -> tuple[LlamaCppLabeller, list]:
    lab, out = LlamaCppLabeller(), []
    for t, obj in enumerate(objs, 1):
        out += lab.feed(obj, t * 10)
    return lab, out


def toks(events):
    return [(e.index, e.token_id, e.data, e.label, e.step, e.rejected) for e in events if isinstance(e, TokenEvent)]


def test_a_step_is_its_accepted_drafts_then_the_targets_token():
    lab, out = run(
        ev("a", [1], 1),
        ev("b", [2], 2, draft=(5, 2)),  # step 1: 5 drafted, 2 accepted → 2 accepted + target, 3 rejected
        ev("c", [3], 3, draft=(5, 2)),
        ev("d", [4], 4, draft=(5, 2)),
        ev("e", [5], 5, draft=(5, 2)),  # no step pending: the target's own token
    )
    assert toks(out) == [
        (0, 1, b"a", "first", None, 0),
        (1, 2, b"b", "accepted", 1, 0),
        (2, 3, b"c", "accepted", 1, 0),
        (3, 4, b"d", "target", 1, 3),
        (4, 5, b"e", "target", None, 0),
    ]
    [step] = [e for e in out if isinstance(e, StepEvent)]
    assert (step.step, step.drafted, step.accepted, step.t_ns) == (1, 5, 2, 20)
    assert (lab.step, lab.drafted, lab.accepted, lab.index) == (1, 5, 2, 5) and lab.inconsistent is None


def test_counters_that_do_not_move_make_no_step():
    lab, out = run(ev("a", [1], 1, draft=(0, 0)), ev("b", [2], 2, draft=(0, 0)))
    assert not [e for e in out if isinstance(e, StepEvent)] and lab.step == 0
    assert [t[3] for t in toks(out)] == ["first", "target"]


@pytest.mark.parametrize("bad", [(3, 1), (8, 9), (10, 6)])
def test_counters_that_go_back_or_do_not_add_up_stop_being_trusted(bad):
    # after (8 drafted, 5 accepted): (3, 1) goes back; (8, 9) accepts 4 more with nothing drafted;
    # (10, 6) is a fine step of 2 drafted, 1 accepted
    lab, out = run(ev("a", [1], 1), ev("b", [2], 2, draft=(8, 5)), ev("c", [3], 3, draft=bad), ev("d", [4], 4))
    d, a = bad[0] - 8, bad[1] - 5
    broken = d < 0 or a < 0 or a > d
    labels = [t[3] for t in toks(out)]
    if broken:
        assert lab.inconsistent == (
            f"draft counters went backwards or do not add up (drafted 8 → {bad[0]}, accepted 5 → {bad[1]})"
        )
        # the step already queued keeps its labels; once it is used up, tokens are unknown, never guessed
        assert labels == ["first", "accepted", "accepted", "accepted"] and lab.step == 1
    else:
        assert lab.inconsistent is None and lab.step == 2


def test_after_inconsistent_counters_a_new_token_is_unknown():
    lab, out = run(ev("a", [1], 1), ev("b", [2], 2, draft=(2, 0)), ev("c", [3], 3), ev("d", [4], 4, draft=(1, 0)))
    assert [t[3] for t in toks(out)] == ["first", "target", "target", "unknown"]
    assert toks(out)[1][5] == 2  # the step's two rejected drafts, on its target token


def test_a_withheld_token_has_no_event_of_its_own():
    # tokens_predicted jumps by 2 with one id: the first of the two was withheld (incomplete UTF-8) and
    # its bytes came with this event, which carries only the second token's id
    lab, out = run(ev("A", [1], 1), ev("\u00e9", [7], 3))
    assert toks(out) == [
        (0, 1, b"A", "first", None, 0),
        (1, None, b"", "target", None, 0),
        (2, 7, "é".encode(), "target", None, 0),
    ]
    assert lab.index == 3


def test_the_final_event_carries_the_held_back_text_as_the_tail():
    lab, out = run(
        ev("x", [1], 1),
        ev("ret", [], 1, stop=True, stop_type="word", tokens_evaluated=9, timings={"predicted_n": 1}),
    )
    fin = out[-1]
    assert isinstance(fin, StreamFinished) and lab.finished is fin
    assert (fin.stop_type, fin.tail, fin.tokens_evaluated, fin.tokens_predicted, fin.t_ns) == ("word", b"ret", 9, 1, 20)
    assert fin.timings == {"predicted_n": 1} and fin.settings == {}


def test_a_final_event_with_tokens_emits_them_and_has_no_tail():
    lab, out = run(
        ev("x", [1], 1),
        ev(
            "yz",
            [2],
            2,
            stop=True,
            generation_settings={"speculative.n_max": 8, "speculative.type": "draft", "temperature": 0},
        ),
    )
    assert toks(out)[-1] == (1, 2, b"yz", "target", None, 0)
    fin = out[-1]
    assert fin.tail == b"" and fin.stop_type == "none"  # none given: "none"
    assert fin.settings == {"speculative.n_max": 8, "speculative.type": "draft"}  # only speculation's settings


def test_a_final_event_can_count_a_token_never_sent():
    _, out = run(ev("x", [1], 1), ev("", [], 2, stop=True, stop_type="limit"))
    assert toks(out)[-1] == (1, None, b"", "target", None, 0) and out[-1].tail == b""


def test_the_step_belongs_to_the_tokens_that_follow_even_across_events():
    # the next step's counters arrive while the previous step still owes tokens: steps are queued
    lab, out = run(ev("a", [1], 1), ev("b", [2], 2, draft=(3, 1)), ev("c", [3], 3, draft=(6, 3)), ev("de", [4, 5], 5))
    assert [(t[3], t[4], t[5]) for t in toks(out)] == [
        ("first", None, 0),
        ("accepted", 1, 0),
        ("target", 1, 2),
        ("accepted", 2, 0),
        ("accepted", 2, 0),
    ]
    assert (lab.drafted, lab.accepted) == (6, 3)


@pytest.mark.parametrize(
    "obj,field",
    [
        ({"content": 5}, "content"),
        ({"tokens": "12"}, "tokens"),
        ({"tokens": [1, "2"]}, "tokens[]"),
        ({"timings": []}, "timings"),
        ({"timings": {"draft_n": "3", "draft_n_accepted": 1}}, "draft_n"),
        ({"timings": {"draft_n": 3, "draft_n_accepted": "1"}}, "draft_n_accepted"),
        ({"tokens_predicted": 2.0}, "tokens_predicted"),
        ({"stop": "yes"}, "stop"),
        ({"stop": True, "tokens_evaluated": "9"}, "tokens_evaluated"),
        ({"stop": True, "generation_settings": [1]}, "generation_settings"),
    ],
)
def test_a_wrong_typed_field_is_named(obj, field):
    with pytest.raises(BadEvent) as exc:
        LlamaCppLabeller().feed(obj, 0)
    assert field in str(exc.value)


def test_numbers_that_are_floats_still_count():
    lab, out = run(
        ev("a", [1], 1), {"content": "b", "tokens": [2], "timings": {"draft_n": 4.0, "draft_n_accepted": 4.0}}
    )
    assert (lab.drafted, lab.accepted) == (4, 4) and [t[3] for t in toks(out)] == ["first", "accepted"]


# -- the survivors of backends/labeller's mutmut run ------------------------------------------------------
def test_an_event_without_content_or_with_null_fields_carries_no_bytes_and_does_not_stop():
    lab, out = run(
        {"tokens": [1], "tokens_predicted": 1}, {"content": None, "tokens": [2], "stop": None, "timings": None}
    )
    assert toks(out) == [(0, 1, b"", "first", None, 0), (1, 2, b"", "target", None, 0)]
    assert lab.finished is None  # a null stop is no stop


def test_a_wrong_typed_token_id_is_named_with_its_type():
    with pytest.raises(BadEvent) as exc:
        LlamaCppLabeller().feed({"tokens": [1, "2"]}, 0)
    assert str(exc.value) == "the server sent an event spectui cannot read: tokens[] is str"


def test_tokens_that_come_with_the_final_event_carry_its_time():
    _, out = run(ev("x", [1], 1), ev("yz", [2, 3], 3, stop=True))
    assert [(e.index, e.t_ns) for e in out if isinstance(e, TokenEvent)] == [(0, 10), (1, 20), (2, 20)]


def test_accepted_falling_alone_is_inconsistent_and_a_one_draft_step_is_a_step():
    lab, out = run(ev("a", [1], 1), ev("b", [2], 2, draft=(8, 5)), ev("c", [3], 3, draft=(10, 4)))
    assert lab.inconsistent is not None and lab.step == 1  # drafted rose by 2, accepted fell by 1
    lab, out = run(ev("a", [1], 1), ev("b", [2], 2, draft=(1, 0)), ev("c", [3], 3))
    [step] = [e for e in out if isinstance(e, StepEvent)]
    assert (step.drafted, step.accepted) == (1, 0) and [t[3:] for t in toks(out)] == [
        ("first", None, 0),
        ("target", 1, 1),  # its one draft rejected
        ("target", None, 0),
    ]


def test_unknown_tokens_carry_no_rejected_count():
    _, out = run(
        ev("a", [1], 1),
        ev("b", [2], 2, draft=(4, 2)),
        ev("c", [3], 3, draft=(1, 0)),
        ev("d", [4], 4),
        ev("e", [5], 5),
        ev("f", [6], 6),
    )
    assert [t[3:] for t in toks(out)][-1] == ("unknown", None, 0)


def test_once_inconsistent_the_counters_are_not_trusted_again_and_half_a_pair_is_ignored():
    lab, out = run(
        ev("a", [1], 1),
        ev("b", [2], 2, draft=(8, 5)),
        ev("c", [3], 3, draft=(3, 1)),  # backwards: stop trusting them
        ev("d", [4], 4, draft=(12, 7)),  # would be a fine step from (8, 5), but no longer counts
        ev("e", [5], 5),
        ev("f", [6], 6),
        ev("g", [7], 7),
        ev("h", [8], 8),
    )
    assert lab.step == 1 and (lab.drafted, lab.accepted) == (8, 5)
    # the trusted step's 5 accepted drafts and its target, then nothing more is known
    assert [t[3] for t in toks(out)] == ["first"] + ["accepted"] * 5 + ["target", "unknown"]
    lab, out = run(ev("a", [1], 1), {"content": "b", "tokens": [2], "timings": {"draft_n": 4}})
    assert lab.step == 0 and [t[3] for t in toks(out)] == ["first", "target"]  # drafted alone: no step


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_a_counter_that_is_not_a_finite_number_is_a_bad_event(value):
    """Found by hypothesis (test_fuzz): int(inf) raised OverflowError, which no stream error catches."""
    with pytest.raises(BadEvent, match="draft_n_accepted"):
        LlamaCppLabeller().feed({"timings": {"draft_n": 0, "draft_n_accepted": value}}, 0)
    with pytest.raises(BadEvent, match="draft_n"):
        LlamaCppLabeller().feed({"timings": {"draft_n": value, "draft_n_accepted": 0}}, 0)
