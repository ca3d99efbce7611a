"""The certificate's derivation (run/prove/derive.py), part by part, on results built here: each expected
value is written by hand from the inputs of its test (the mutation table's survivors in derive's
difference record, draft counters, cache totals, one-server-at-a-time checks and the sampled words)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from spectui.core.compare import Divergence
from spectui.core.events import StreamFinished
from spectui.core.figures import SideRecorder
from spectui.core.findings import Triage
from spectui.core.runner import PromptResult
from spectui.core.types import Prompt, ServerInfo
from spectui.core.verdict import Verdict
from spectui.run.prove.derive import (
    GreedyRun,
    PromptRuns,
    _by_category,
    _cache,
    _differences,
    _per_position,
    acceptance_summary,
    counts_of,
    difference_json,
    load_sessions,
    one_at_a_time,
    sampled_words,
    schedule,
    servers_of,
    speed_words,
    verdict_of,
)
from tests.recordings import DATA

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
    three = result(b=side("baseline", prompt_cached=1), c=side("candidate"))  # no prompt_tokens on either
    assert _cache({"params": {"cache_prompt": True}}, [one, two, three]) == {
        "requested": True,
        "baseline": {"prompt_tokens": 13, "prompt_cached": 5},
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


# -- PromptRuns.to_json: one prompt's runs -------------------------------------------------------------
def finished(name: str, **figures) -> SideRecorder:
    rec = side(name, **figures)
    rec.finished = StreamFinished(0, "eos")
    return rec


def measured(verdict: Verdict, b_tps: float, c_tps: float, b_cached=None, c_cached=None, **cand) -> PromptResult:
    b = finished("baseline", decode_tps=b_tps, prompt_cached=b_cached)
    return result(verdict, b=b, c=finished("candidate", decode_tps=c_tps, prompt_cached=c_cached, **cand))


def test_a_prompts_record_holds_its_runs_ratios_cache_and_first_difference():
    g = PromptRuns(3, "p", "code")
    g.runs.append(GreedyRun(measured(Verdict("identical", "text+ids"), 10.0, 15.0, b_cached=4), 1))
    g.runs.append(GreedyRun(measured(differs(), 10.0, 12.0, c_cached=3), 2))
    out = g.to_json()
    assert (out["id"], out["category"], out["runs"], out["status"]) == ("p", "code", 2, "differs")
    assert out["verdicts"] == ["identical", "differs"]
    assert out["reasons"] == ["output differs at byte 7"]  # the identical run's empty reason is not one
    assert out["speedups"] == [1.5, 1.2]  # 15/10, 12/10
    assert out["speedup"]["value"] == pytest.approx((1.5 * 1.2) ** 0.5)  # their geometric mean
    assert out["decode_tps"] == {"baseline": [10.0, 10.0], "candidate": [15.0, 12.0]}
    assert out["prompt_cached"] == {"baseline": 4, "candidate": 3}  # a missing figure counts 0
    assert (out["difference"]["run"], out["difference"]["byte"]) == (2, 7)  # the differing run, not run 1


def test_a_prompt_with_no_finished_run_has_no_cache_figure_and_no_difference():
    g = PromptRuns(0, "q", "", [GreedyRun(result(None), 1), GreedyRun(result(Verdict("identical", "text+ids")), 2)])
    out = g.to_json()
    assert out["verdicts"] == [None, "identical"] and out["status"] == "incomplete"
    assert out["prompt_cached"] == {"baseline": None, "candidate": None}
    assert (out["speedups"], out["speedup"], out["difference"], out["reasons"]) == ([], None, None, [])


# -- acceptance_summary and _per_position ------------------------------------------------------------
T_975 = {1: 12.706, 2: 4.303}  # Student's t, 97.5 % quantile, by degrees of freedom (any t table)


def drafting_runs(accepted: list[int], steps: int, metrics: bool = True) -> PromptRuns:
    """One prompt run once per entry: each run drafts one token a step (γ = 1) and accepts `accepted`."""
    g = PromptRuns(0, "p", "")
    for k, a in enumerate(accepted, start=1):
        figs = {"drafted": steps, "accepted": a, "steps": steps}
        if metrics:
            figs |= {"metrics_drafted": float(steps), "metrics_accepted": float(a), "metrics_steps": float(steps)}
        r = measured(Verdict("identical", "text+ids"), 10.0, 12.0, **figs)
        r.candidate.figures.accepted_per_position = [float(a)]
        g.runs.append(GreedyRun(r, k))
    return g


def test_acceptance_over_three_runs_with_its_interval_capped_at_one_plus_gamma():
    # γ = 1; the runs accept 4, 8, 12 of 16: per run 0.25, 0.5, 0.75, mean 0.5, sd 0.25
    acc = acceptance_summary([drafting_runs([4, 8, 12], 16)])
    assert (acc["drafted"], acc["accepted"], acc["steps"], acc["acceptance_rate"]) == (48, 24, 48, 0.5)
    half = T_975[2] * 0.25 / 3**0.5  # 0.621: the interval runs past 1 + γ = 2, and stops there
    mal = acc["mean_accepted_length"]
    assert (mal["value"], mal["high"], mal["n"]) == (1.5, 2.0, 3)
    assert mal["low"] == pytest.approx(1.0 + max(0.0, 0.5 - half)) and 0.5 + half > 1.0
    # at γ = 1, Σ_{i=1..γ} α^i = α: α is accepted/steps, 0 at the low end and 1 at the capped high end
    assert acc["alpha"] == {"value": pytest.approx(0.5), "low": 0.0, "high": 1.0, "gamma": 1.0}
    [pos] = acc["per_position"]
    assert (pos["position"], pos["accepted"], pos["value"], pos["high"]) == (0, 24, 0.5, 1.0)
    assert (acc["per_position_note"], acc["source"]) == (None, "server /metrics")


def test_acceptance_without_per_position_counters_or_metrics_says_so():
    g = drafting_runs([4, 8], 16, metrics=False)
    g.runs[1].result.candidate.figures.accepted_per_position = None
    acc = acceptance_summary([g])
    assert acc["per_position"] is None and acc["source"] == "stream"
    assert acc["per_position_note"] == (
        "the server gave no per-position counters (llama.cpp: --metrics; vLLM: spec_decode per-position metrics)"
    )
    idle = acceptance_summary([drafting_runs([0], 0)])
    assert idle == {"drafted": 0, "accepted": 0, "steps": 0, "note": "the candidate drafted nothing"}
    assert acceptance_summary([PromptRuns(0, "q", "")]) is None


def test_alpha_at_a_gamma_above_one_solves_the_geometric_sum():
    # γ = 64/16 = 4 and accepted/steps = 15/16 = α + α² + α³ + α⁴ at α = 1/2
    g = PromptRuns(0, "p", "")
    for k, a in enumerate((15, 15), start=1):
        r = measured(Verdict("identical", "text+ids"), 10.0, 12.0, drafted=64, accepted=a, steps=16)
        g.runs.append(GreedyRun(r, k))
    acc = acceptance_summary([g])
    assert acc["alpha"]["gamma"] == 4.0 and acc["alpha"]["value"] == pytest.approx(0.5, abs=1e-9)
    assert acc["mean_accepted_length"]["value"] == pytest.approx(1 + 15 / 16)


def test_each_positions_acceptance_with_its_interval_over_the_passes():
    # one prompt: 3 of 4 steps accepted the first draft, 1 the second; pass 1 gave 2 and 1 of 2, pass 2 1 and 0
    per = [
        {"drafted": 8, "accepted": 4, "steps": 4, "accepted_per_position": [3, 1]},
        {"drafted": 0, "accepted": 0, "steps": 2, "accepted_per_position": None},  # drafted nothing: fine
    ]
    per_pass = [
        {"drafted": 4, "accepted": 3, "steps": 2, "accepted_per_position": [2, 1]},
        {"drafted": 4, "accepted": 1, "steps": 2, "accepted_per_position": [1, 0]},
    ]
    out = _per_position(per, per_pass)
    half = T_975[1] * 0.5 / 2**0.5 / 2**0.5  # t · sd(pass values) / √2; each position's sd is 0.5/√2
    assert [(p["position"], p["accepted"]) for p in out] == [(0, 3), (1, 1)]
    assert [p["value"] for p in out] == [0.5, 1 / 6]  # 3/6 and 1/6 over all 6 steps
    assert [p["high"] for p in out] == [1.0, 1.0]  # capped: a position accepts at most every step
    assert [p["low"] for p in out] == [0.0, 0.0] and half > 1.0
    assert _per_position([{**per[0], "accepted_per_position": None}], per_pass) is None


# -- speed_words: the verdict line's speed part --------------------------------------------------------
H200 = {"hardware": {"gpus": [{"name": "NVIDIA H200"}]}}


def speed(word: str | None, sp: dict | None, acc: dict | None = None, **more) -> dict:
    return {"speedup": {"overall": sp, "speed": word, **more}, "acceptance": acc}


def test_speed_words_say_the_word_the_interval_the_acceptance_and_where():
    sp = {"value": 0.8, "low": 0.7, "high": 0.9}
    acc = {"drafted": 10, "alpha": {"value": 0.5}, "mean_accepted_length": {"value": 1.75}}
    assert speed_words(speed("slower", sp, acc), H200) == (
        " · SLOWER 0.80× [0.70–0.90] at α 0.50 (mean accepted length 1.75) on NVIDIA H200"
    )
    nothing = " (the candidate drafted nothing)"
    up = {"value": 1.2, "low": 1.1, "high": 1.3}  # a word as SLOWER has: FASTER where the interval lies above 1
    assert speed_words(speed("faster", up, None), {}) == f" · FASTER 1.20× [1.10–1.30]{nothing} on this CPU"
    assert speed_words(speed("no interval", up, None), {}) == f" · 1.20× [1.10–1.30]{nothing} on this CPU"
    assert speed_words(speed("no measurable difference", sp, {"drafted": 0}), {}) == (
        f" · NO MEASURABLE DIFFERENCE 0.80× [0.70–0.90]{nothing} on this CPU"
    )
    for alpha, mal in ((None, 1.5), (0.5, None)):
        unknown = {"drafted": 3, "alpha": {"value": alpha}, "mean_accepted_length": {"value": mal}}
        assert speed_words(speed("too few runs to judge", sp, unknown), {}) == (
            " · TOO FEW RUNS TO JUDGE 0.80× [0.70–0.90] on this CPU"
        )
    assert speed_words(speed(None, None), {}) == " · no speed-up measured (no run where both sides finished)"


def test_speed_words_per_machine_for_shards_on_two_machines():
    on_two = {
        "shards": [
            {"hardware": {"gpus": [{"name": "NVIDIA H200"}]}, "shard": {"index": 0, "of": 2}},
            {"hardware": {"cpu": "Xeon"}, "shard": {"index": 1, "of": 2}},
        ]
    }
    per = [
        {"machine": "NVIDIA H200", "speedup": {"value": 1.5, "low": 1.2, "high": 1.8}},
        {"machine": "CPU Xeon", "speedup": {"value": 1.1, "low": None, "reason": "1 run"}},
    ]
    sp = {"value": 1.3, "low": 1.0, "high": 1.6}
    assert speed_words(speed("faster", sp, None, by_machine=per), on_two) == (
        " · speed-up per machine: NVIDIA H200 1.50× [1.20–1.80]; CPU Xeon 1.10× (1 run)"
        " (the candidate drafted nothing) (on 2 machines: NVIDIA H200; CPU Xeon)"
    )


# -- schedule: the share is the denominator -----------------------------------------------------------
IDS = ["e", "d", "c", "b", "a"]  # the set's order is not the ids' order, nor their categories' (z … v)
ORDER_OF = {pid: (i, "zyxwv"[i]) for i, pid in enumerate(IDS)}


def ran(pid: str, *runs: int) -> PromptRuns:
    return PromptRuns(ORDER_OF[pid][0], pid, ORDER_OF[pid][1], [GreedyRun(result(), k) for k in runs])


def inputs_for(share: list[str] | None = None, runs: int = 2) -> dict:
    return {"prompt_set": {"prompts": [{"id": i} for i in IDS]}, "runs": runs, **({"share": share} if share else {})}


def test_prompts_of_the_share_never_run_are_named_in_the_sets_order():
    assert schedule([], inputs_for(), ORDER_OF) == (
        IDS,
        [f"prompt {i}: in the share, but the sessions hold no run of it" for i in IDS],
    )
    # an id of the share that is not in the set comes last
    assert schedule([], inputs_for(["a", "zz", "e"]), ORDER_OF)[0] == ["e", "a", "zz"]


def test_runs_recorded_twice_or_too_few_leave_the_prompt_not_compared():
    twice, few, fine = ran("d", 1, 1, 2, 2), ran("c", 1), ran("b", 1, 2)
    not_run, problems = schedule([twice, few, fine], inputs_for(["e", "d", "c", "b"]), ORDER_OF)
    assert not_run == ["e", "d", "c"]
    assert problems == [
        "prompt e: in the share, but the sessions hold no run of it",
        "prompt d: run 1, 2 recorded twice",
        "prompt c: runs [1] recorded; inputs.runs says 2",
    ]
    assert (twice.off_schedule, few.off_schedule, fine.off_schedule) == (True, True, False)


def test_a_prompt_run_outside_the_share_is_a_problem_and_not_compared():
    inside, outside = ran("e", 1, 2), ran("d", 1, 2)
    outside.runs[0].result.verdict = outside.runs[1].result.verdict = Verdict("identical", "text+ids")
    assert schedule([inside, outside], inputs_for(["e"]), ORDER_OF) == (
        [],
        ["prompt d: run, but not in the certificate's share"],
    )
    assert outside.off_schedule is True and outside.status == "incomplete"


# -- verdict_of: the one verdict line ------------------------------------------------------------------
NO_SPEED = " · no speed-up measured (no run where both sides finished)"


def derived(identical: int, differs: int, ids: list[str], not_run=(), causes=(), s=None, alone=False, **more) -> dict:
    """A derivation as verdict_of reads it, with no speed-up measured."""
    greedy = {"prompts": len(ids), "identical": identical, "differs": differs, "per_prompt": [{"id": i} for i in ids]}
    return {
        "greedy": {**greedy, **({"not_run": list(not_run)} if not_run else {})},
        "differences": [{"cause": c} for c in causes],
        "sampled": s,
        "speedup": {"overall": None, "speed": None},
        "acceptance": None,
        **({"one_at_a_time": {"servers": "one at a time"}} if alone else {}),
        **more,
    }


def line(d: dict) -> str:
    return verdict_of(d, {})["line"]


def test_greedy_differences_are_counted_by_cause_most_first():
    # found in the order cache, nondeterminism, nondeterminism, untriaged: most first, ties as found
    d = derived(1, 4, list("abcde"), causes=("cache", "nondeterminism", "nondeterminism", None), alone=True)
    d["sampled"] = sampled(1, identical=1)
    assert verdict_of(d, {}) == {
        "status": "different",
        "line": "DIFFERENT on 4/5 (greedy; causes: nondeterminism 2, cache 1, not triaged, one server at a time 1)"
        " · sampled seeded bytes identical",
    }
    two = derived(0, 2, ["a", "b"], causes=("cache", None))
    assert line(two) == "DIFFERENT on 2/2 (greedy; causes: cache 1, not triaged 1)"
    assert line(derived(0, 1, ["a"], causes=(None,))) == "DIFFERENT on 1/1 (greedy; cause: not triaged)"


def test_a_difference_found_only_by_the_sampled_pass():
    s = {**sampled(2, identical=1, different=1), "passed": 1}
    assert verdict_of(derived(3, 0, list("abc"), s=s), {}) == {
        "status": "different",
        "line": "DIFFERENT on 1/2 (sampled: seeded bytes identical on 1, 1 different) · greedy identical on 3/3",
    }


def test_identical_needs_every_prompt_compared_and_at_least_one():
    assert verdict_of(derived(1, 0, ["a"]), {}) == {
        "status": "identical",
        "line": "IDENTICAL on 1/1 (greedy)" + NO_SPEED,
    }
    assert verdict_of(derived(0, 0, []), {}) == {
        "status": "incomplete",
        "line": "INCOMPLETE: identical on 0/0 (greedy)" + NO_SPEED,
    }
    assert line(derived(2, 0, list("abc"))) == (
        "INCOMPLETE: identical on 2/3 (greedy; 1 not compared: a side failed or was cut off)" + NO_SPEED
    )


def test_prompts_not_run_are_named_three_at_most():
    assert (
        line(derived(1, 0, ["x"], not_run="abcd"))
        == "INCOMPLETE: identical on 1/5 (greedy; 4 not run: a, b, c …)" + NO_SPEED
    )
    assert (
        line(derived(1, 0, ["x"], not_run="abc"))
        == "INCOMPLETE: identical on 1/4 (greedy; 3 not run: a, b, c)" + NO_SPEED
    )


def test_a_sampled_part_only_consistent_without_a_detectable_tvd_says_so():
    s = {**sampled(1, consistent=1), "passed": 1}
    assert line(derived(2, 0, ["a", "b"], s=s)) == (
        "IDENTICAL (greedy) on 2/2 · CONSISTENT (sampled, detectable TVD not computed) on 1/1"
        " (distribution consistent, detectable TVD not computed)" + NO_SPEED
    )


# -- _by_category: each category in the set's order -----------------------------------------------------
def test_categories_in_the_sets_order_with_their_own_prompts_and_speed():
    def prompt(index: int, category: str, identical: bool, ratios=()) -> PromptRuns:
        v = Verdict("identical", "text+ids") if identical else differs()
        runs = [GreedyRun(measured(v, 10.0, 10.0 * r), k) for k, r in enumerate(ratios or (1.0,), start=1)]
        return PromptRuns(index, f"p{index}", category, runs)

    groups = [
        prompt(0, "zeta", True, (2.0, 2.1, 1.9)),  # three runs, all about twice as fast: faster
        prompt(1, "", True),
        prompt(2, "alpha", False),
        prompt(3, "zeta", True, (2.0, 2.2, 1.8)),
    ]
    out = _by_category(groups)
    assert list(out) == ["zeta", "(none)", "alpha"]  # first prompt of each, in the set's order
    assert [(c["prompts"], c["identical"]) for c in out.values()] == [(2, 2), (1, 1), (1, 0)]
    assert out["zeta"]["speedup"]["value"] == pytest.approx((2.0 * 2.1 * 1.9 * 2.0 * 2.2 * 1.8) ** (1 / 6))
    assert out["zeta"]["speed"] == "faster"


# -- load_sessions and servers_of ----------------------------------------------------------------------
def test_sessions_are_loaded_by_phase_and_their_servers_compared():
    assert load_sessions([], DATA) == {"greedy": [], "sampled": []}
    name = "session-kvq4-mixed.jsonl"
    loaded = load_sessions([{"phase": "warm-up", "path": name}, {"phase": "greedy", "path": name}], DATA)
    assert [(k, [s.path.name for s in v]) for k, v in loaded.items()] == [
        ("greedy", [name]),
        ("sampled", []),
        ("warm-up", [name]),
    ]


def test_servers_are_named_once_and_a_session_that_disagrees_is_a_problem():
    def session(name: str, url: str, model: str, n_ctx: int):
        infos = {
            "baseline": ServerInfo("http://b", model="base"),
            "candidate": ServerInfo(url, model=model, n_ctx=n_ctx),
        }
        return SimpleNamespace(path=Path(name), infos=infos)

    found, problems = servers_of(
        [session("one.jsonl", "http://a:1", "m", 4096), session("two.jsonl", "http://b:2", "m", 4096)]
    )
    assert problems == [] and "url" not in found["candidate"] and found["candidate"]["model"] == "m"
    assert found["baseline"]["model"] == "base"
    _, problems = servers_of(
        [session("one.jsonl", "http://a:1", "m", 4096), session("two.jsonl", "http://a:1", "n", 2048)]
    )
    assert problems == ["two.jsonl: the candidate differs from the other sessions' in model, n_ctx"]


def test_drafts_without_a_step_count_give_no_gamma_alpha_or_mean_accepted_length():
    # a server that reports drafted and accepted tokens but no verification steps
    g = PromptRuns(
        0, "p", "", [GreedyRun(measured(Verdict("identical", "text+ids"), 10.0, 12.0, drafted=4, accepted=2), 1)]
    )
    acc = acceptance_summary([g])
    assert (acc["drafted"], acc["accepted"], acc["steps"], acc["acceptance_rate"]) == (4, 2, 0, 0.5)
    assert acc["alpha"] == {"value": None, "low": None, "high": None, "gamma": None}
    assert acc["mean_accepted_length"]["value"] is None
