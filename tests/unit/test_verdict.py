"""core/verdict: the one verdict, on hand-made recorders, with each expected status, reason and place
written out from the README's rules (bytes; ids where both sides give every id and share a model;
tokens generated but never sent; a failed or unfinished side gives none)."""

from __future__ import annotations

import pytest

from spectui.core.compare import Divergence
from spectui.core.events import StreamFailed, StreamFinished, TokenEvent
from spectui.core.figures import SideRecorder
from spectui.core.verdict import Verdict, judge, reason_for


def side(name: str, pieces: list[tuple[int | None, bytes]], end="finish", predicted=None, tail=b"") -> SideRecorder:
    rec = SideRecorder(name)
    for i, (tid, data) in enumerate(pieces):
        rec.feed(TokenEvent(i, tid, data, i + 1, "first" if i == 0 else "target"))
    if end == "finish":
        rec.feed(StreamFinished(99, "limit", tail=tail, tokens_predicted=predicted))
    elif end == "failed":
        rec.feed(StreamFailed(99, "connection lost after 2 tokens"))
    return rec


AB = [(1, b"a"), (2, b"b")]


def test_identical_text_and_ids():
    v = judge(side("baseline", AB), side("candidate", AB), True)
    assert (v.status, v.compared, v.divergence, v.identical, v.reason) == ("identical", "text+ids", None, True, "")
    assert v.line() == "IDENTICAL (compared text+ids)" and v.word == "IDENTICAL" and v.kind is None


def test_ids_are_compared_only_where_both_sides_give_every_one_and_share_a_model():
    other = [(1, b"a"), (9, b"b")]
    v = judge(side("baseline", AB), side("candidate", other), True)
    assert (v.status, v.compared, v.kind, v.identical) == ("differs", "text+ids", "ids", False)
    assert v.divergence.byte == 1 and (v.divergence.baseline_token, v.divergence.candidate_token) == (1, 1)
    assert v.reason == "same text, different token ids from token 1" and v.line() == f"DIFFERS: {v.reason}"
    assert judge(side("baseline", AB), side("candidate", other), False).status == "identical"  # two models
    missing = [(1, b"a"), (None, b"b")]
    v = judge(side("baseline", AB), side("candidate", missing), True)
    assert (v.status, v.compared) == ("identical", "text")  # an id missing: text only
    assert judge(side("baseline", []), side("candidate", []), True).compared == "text"  # no ids at all


def test_tokens_generated_but_never_sent_are_a_difference():
    v = judge(side("baseline", AB, predicted=2), side("candidate", AB, predicted=3), True)
    assert (v.status, v.kind) == ("differs", "count")
    assert v.reason == "same text, but 2 vs 3 tokens generated (tokens at the end were never sent as text)"
    assert v.divergence.byte == 2 and (v.divergence.baseline_token, v.divergence.candidate_token) == (None, None)
    assert judge(side("baseline", AB, predicted=2), side("candidate", AB), True).status == "identical"  # one unknown


def test_bytes_that_differ_say_where():
    v = judge(side("baseline", [(1, b"ab"), (2, b"cd")]), side("candidate", [(1, b"ab"), (3, b"cx")]), True)
    assert (v.status, v.kind, v.divergence.byte) == ("differs", "bytes", 3)
    assert v.reason == "bytes differ from byte 3 (token 1 | 1)"
    v = judge(side("baseline", AB), side("candidate", AB, tail=b"!"), True)  # only the tail differs
    assert v.divergence.byte == 2 and v.reason == "the baseline output ends at byte 2; the other goes on"


def test_a_failed_or_unfinished_side_gives_no_verdict():
    v = judge(side("baseline", AB), side("candidate", AB, end="failed"), True)
    assert (v.status, v.identical, v.word) == ("failed", None, "FAILED")
    assert v.reason == "candidate failed: connection lost after 2 tokens — not compared"
    both = judge(side("baseline", AB, end="failed"), side("candidate", AB, end="failed"), True)
    assert both.reason == (
        "baseline failed: connection lost after 2 tokens; candidate failed: connection lost after 2 tokens — not compared"
    )
    v = judge(side("baseline", AB), side("candidate", AB, end=None), True)
    assert (v.status, v.identical) == ("incomplete", None)
    assert v.reason == "the record stops inside this prompt (a side never finished)"
    assert judge(side("baseline", AB), side("candidate", AB), True, damaged=True).status == "incomplete"


def test_the_verdict_reads_back_as_it_was_written():
    for v in (
        judge(side("baseline", AB), side("candidate", AB), True),
        judge(side("baseline", AB), side("candidate", [(1, b"a"), (9, b"b")]), True),
        judge(side("baseline", AB), side("candidate", AB, end="failed"), True),
    ):
        j = v.to_json()
        assert j["status"] == v.status and j["identical"] is v.identical and j["reason"] == v.reason
        back = Verdict.from_json(j)
        assert back == v and back.agrees(v)


@pytest.mark.parametrize(
    "bad,error,message",
    [
        ("x", TypeError, "verdict is str, not an object"),
        ({"status": "maybe"}, ValueError, "verdict status 'maybe'"),
        ({"status": "differs"}, ValueError, "verdict differs without a divergence"),
        ({"status": "identical", "divergence": {"byte": 1}}, ValueError, "verdict identical with a divergence"),
        ({"status": "identical", "compared": 3}, TypeError, "verdict compared/reason are not text"),
        ({"status": "identical", "reason": None}, TypeError, "verdict compared/reason are not text"),
    ],
)
def test_a_damaged_verdict_is_refused_saying_why(bad, error, message):
    with pytest.raises(error) as exc:
        Verdict.from_json(bad)
    assert str(exc.value) == message


def test_a_verdict_record_without_compared_or_reason_reads_their_defaults():
    v = Verdict.from_json({"status": "failed"})
    assert (v.compared, v.reason, v.line()) == ("text", "", "FAILED")


def test_a_legacy_result_record_gives_its_verdict():
    assert Verdict.legacy({"identical": True}) == Verdict("identical", "text")
    assert Verdict.legacy({"identical": True, "compared": "text+ids"}).compared == "text+ids"
    div = {"byte": 4, "baseline_token": 1, "candidate_token": 2}
    v = Verdict.legacy({"identical": False, "first_divergence": div})
    assert (v.status, v.divergence.byte, v.reason) == ("differs", 4, "bytes differ from byte 4 (token 1 | 2)")
    assert (
        v.compared == "text"
        and Verdict.legacy({"identical": False, "first_divergence": div, "compared": "text+ids"}).compared == "text+ids"
    )
    assert Verdict.legacy({"identical": False}) is None and Verdict.legacy({}) is None


def test_agreement_is_the_same_status_kind_and_place():
    d = Divergence(3, 1, 1, b"", b"", 0)
    base = Verdict("differs", "text", d, "r")
    assert base.agrees(Verdict("differs", "text+ids", d, "other words"))
    assert not base.agrees(Verdict("differs", "text", Divergence(4, 1, 1, b"", b"", 0)))
    assert not base.agrees(Verdict("differs", "text", Divergence(3, 2, 1, b"", b"", 0)))
    assert not base.agrees(Verdict("differs", "text", Divergence(3, 1, 0, b"", b"", 0)))
    assert not base.agrees(Verdict("differs", "text", Divergence(3, 1, 1, b"", b"", 0, "ids")))
    assert not base.agrees(Verdict("identical")) and Verdict("identical").agrees(Verdict("identical"))
    assert not Verdict("identical").agrees(Verdict("failed"))
    assert not base.agrees(Verdict("differs", "text", None, "r")) and not Verdict("differs", "text", None).agrees(base)


def test_reason_for_each_kind():
    assert reason_for(Divergence(5, None, 2, b"", b"", 0)) == "the baseline output ends at byte 5; the other goes on"
    assert reason_for(Divergence(5, 2, None, b"", b"", 0)) == "the candidate output ends at byte 5; the other goes on"
    assert reason_for(Divergence(5, 2, 2, b"", b"", 0, "ids", "")) == "bytes differ from byte 5 (token 2 | 2)"
