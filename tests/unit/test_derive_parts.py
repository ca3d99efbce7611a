"""The certificate's derivation (run/prove/derive.py), part by part, on results built here: each expected
value is written by hand from the inputs of its test (issue 41: the mutation table's survivors in derive's
difference record, draft counters, cache totals, one-server-at-a-time checks and the sampled words)."""

from __future__ import annotations

from types import SimpleNamespace

from spectui.core.compare import Divergence
from spectui.core.figures import SideRecorder
from spectui.core.findings import Triage
from spectui.core.runner import PromptResult
from spectui.core.types import Prompt
from spectui.core.verdict import Verdict
from spectui.run.prove.derive import (
    GreedyRun,
    PromptRuns,
    _cache,
    _differences,
    counts_of,
    difference_json,
    one_at_a_time,
    sampled_words,
)

ALONE = "one-at-a-time"  # run.phased.ORDER, as sessions record it (store/session.py's allowed orders)


def side(name: str, **figures) -> SideRecorder:
    rec = SideRecorder(name)
    for k, v in figures.items():
        setattr(rec.figures, k, v)
    return rec


def result(verdict: Verdict | None = None, triage: Triage | None = None, b=None, c=None) -> PromptResult:
    return PromptResult(Prompt("p"), b or side("baseline"), c or side("candidate"), verdict, triage=triage)


def differs(byte: int = 7, reason: str = "output differs at byte 7") -> Verdict:
    div = Divergence(byte, 2, 3, b"ab\nc", b"ab\xc2", 5, kind="bytes", detail="")
    return Verdict("differs", "text+ids", div, reason)


# -- difference_json: the record of one differing run -------------------------------------------------
def test_a_difference_record_holds_the_divergence_the_reason_the_triage_and_the_cache():
    r = result(
        differs(),
        Triage("near-tie", "the two top tokens were 0.01 apart"),
        side("baseline", prompt_cached=5),
        side("candidate", prompt_cached=9),
    )
    assert difference_json(GreedyRun(r, 2)) == {
        "run": 2,
        "kind": "bytes",
        "byte": 7,
        "baseline_token": 2,
        "candidate_token": 3,
        "reason": "output differs at byte 7",
        "baseline_excerpt": "ab\\nc",  # the newline escaped
        "candidate_excerpt": "ab\\xc2",  # a lone UTF-8 lead byte escaped
        "cause": "near-tie",
        "cause_summary": "the two top tokens were 0.01 apart",
        "prompt_cached": [5, 9],
    }


def test_an_untriaged_difference_has_no_cause():
    d = difference_json(GreedyRun(result(differs(0, "")), 1))
    assert (d["cause"], d["cause_summary"], d["reason"], d["byte"]) == (None, None, "", 0)
    assert d["prompt_cached"] == [None, None]


# -- _differences: one at a time, an untriaged difference says triage was skipped ----------------------
def groups_with_differences() -> list[PromptRuns]:
    same = PromptRuns(0, "a", "code", [GreedyRun(result(Verdict("identical", "text+ids")), 1)])
    untriaged = PromptRuns(1, "b", "chat", [GreedyRun(result(Verdict("identical", "text+ids")), 1)])
    untriaged.runs.append(GreedyRun(result(differs()), 2))
    triaged = PromptRuns(2, "c", "chat", [GreedyRun(result(differs(), Triage("cache", "the cache")), 1)])
    return [same, untriaged, triaged]


def test_one_at_a_time_an_untriaged_difference_says_triage_was_skipped():
    inputs = {"one_at_a_time": {"triage": "skipped: one server at a time"}}
    out = _differences(groups_with_differences(), True, inputs)
    assert [(x["id"], x["category"], x["run"]) for x in out] == [("b", "chat", 2), ("c", "chat", 1)]
    assert [(x["cause"], x["cause_summary"]) for x in out] == [
        (None, "triage skipped: one server at a time"),
        ("cache", "the cache"),
    ]


def test_with_both_servers_up_or_nothing_skipped_an_untriaged_difference_stays_untriaged():
    skipped = {"one_at_a_time": {"triage": "skipped"}}
    for alone, inputs in ((False, skipped), (True, {}), (True, {"one_at_a_time": None})):
        out = _differences(groups_with_differences(), alone, inputs)
        assert [x["cause_summary"] for x in out] == [None, "the cache"], (alone, inputs)


# -- counts_of: the candidate's draft counters over finished runs --------------------------------------
def test_counts_are_the_servers_metrics_summed_and_per_position_counts_padded():
    # the stream's own counts (99, 98, 97) are not what the server's /metrics said: /metrics wins
    one = result(c=side("candidate", drafted=99, accepted=98, steps=97, metrics_drafted=10.0, metrics_accepted=5.0))
    one.candidate.figures.metrics_steps, one.candidate.figures.accepted_per_position = 4.0, [4.0, 1.0]
    two = result(c=side("candidate", metrics_drafted=12.0, metrics_accepted=7.0, metrics_steps=6.0))
    two.candidate.figures.accepted_per_position = [3.0, 2.0, 2.0]
    assert counts_of([one, two]) == {
        "drafted": 22,
        "accepted": 12,
        "steps": 10,
        "accepted_per_position": [7, 3, 2],  # [4, 1, 0] + [3, 2, 2]
        "source": "server /metrics",
    }


def test_counts_from_the_stream_where_the_server_gave_no_metrics():
    one = result(c=side("candidate", drafted=8, accepted=3, steps=4))
    two = result(c=side("candidate", drafted=0, accepted=0, steps=2, metrics_drafted=0.0))
    assert counts_of([one, two]) == {
        "drafted": 8,
        "accepted": 3,
        "steps": 6,
        "accepted_per_position": None,  # run one drafted and has no per-position counters
        "source": "stream",  # run one has no /metrics
    }


def test_a_run_that_drafted_nothing_needs_no_per_position_counters_and_none_drafted_gives_none():
    drafted = result(c=side("candidate", drafted=6, accepted=2, steps=3))
    drafted.candidate.figures.accepted_per_position = [1.0, 1.0]
    idle = result(c=side("candidate", drafted=0, accepted=0, steps=5))
    assert counts_of([drafted, idle])["accepted_per_position"] == [1, 1]
    nothing = counts_of([result(c=side("candidate", steps=5))])
    assert nothing == {"drafted": 0, "accepted": 0, "steps": 5, "accepted_per_position": None, "source": "stream"}
    assert counts_of([]) is None


# -- _cache: the prompt tokens each side computed and took from its cache ------------------------------
def test_cache_totals_count_a_missing_figure_as_zero():
    one = result(b=side("baseline", prompt_tokens=10, prompt_cached=4), c=side("candidate", prompt_tokens=7))
    two = result(b=side("baseline", prompt_tokens=3), c=side("candidate", prompt_tokens=2, prompt_cached=11))
    assert _cache({"params": {"cache_prompt": True}}, [one, two]) == {
        "requested": True,
        "baseline": {"prompt_tokens": 13, "prompt_cached": 4},
        "candidate": {"prompt_tokens": 9, "prompt_cached": 11},
    }
    assert _cache({"params": {}}, [])["requested"] is None


# -- one_at_a_time: what the sessions recorded against what the inputs say ----------------------------
def sessions(*orders: str) -> list:
    """Sessions as one_at_a_time reads them: each prompt's recorded order."""
    return [SimpleNamespace(prompts=[SimpleNamespace(order=o)]) for o in orders]


def test_one_at_a_time_agrees_with_its_inputs():
    assert one_at_a_time(sessions(ALONE, ALONE), {"params": {"order": ALONE}}) == (True, [])
    assert one_at_a_time(sessions("sequential"), {"params": {"order": "sequential"}}) == (False, [])
    assert one_at_a_time(sessions("sequential"), {}) == (False, [])  # inputs without params: both up
    assert one_at_a_time([], {"params": {"order": ALONE}}) == (False, [])  # nothing recorded: nothing to check


def test_one_at_a_time_mixed_or_against_the_inputs_is_a_problem():
    alone, problems = one_at_a_time(sessions("sequential", ALONE), {"params": {"order": "sequential"}})
    assert (alone, problems) == (
        False,
        ["some runs were measured one server at a time and some with both up (one-at-a-time, sequential)"],
    )
    assert one_at_a_time(sessions("sequential", "concurrent"), {"params": {"order": ALONE}}) == (
        False,
        ["the inputs say one server at a time; the sessions recorded concurrent, sequential"],
    )
    assert one_at_a_time(sessions(ALONE), {"params": {}}) == (
        True,
        ["the inputs say both servers up; the sessions recorded one-at-a-time"],
    )


# -- sampled_words: the sampled part in words ----------------------------------------------------------
def sampled(total: int, tvd: float | None = None, **counts: int) -> dict:
    c = {"identical": 0, "consistent": 0, "different": 0, "undecided": 0, "failed": 0, **counts}
    return {"counts": c, "total": total, "detectable_tvd": tvd}


def test_sampled_words_name_each_outcome_with_its_count_where_not_all():
    assert sampled_words(sampled(2, identical=2)) == "seeded bytes identical"
    assert sampled_words(sampled(3, identical=1, consistent=2)) == (
        "seeded bytes identical on 1, distribution consistent on 2, detectable TVD not computed"
    )
    assert sampled_words(sampled(2, 0.314, consistent=2)) == "distribution consistent, could detect TVD ≥ 0.31"
    assert sampled_words(sampled(6, different=1, undecided=2, failed=3)) == (
        "1 different, 2 not enough samples to decide, 3 failed"
    )
    assert sampled_words(sampled(0)) == "none run"
    assert sampled_words({"counts": sampled(2, consistent=2)["counts"], "total": 2}) == (
        "distribution consistent, detectable TVD not computed"  # no detectable_tvd recorded at all
    )
