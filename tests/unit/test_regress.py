"""regress (run/prove/regress.py), part by part, on certificate documents written here: every expected row,
reason and exit code is written by hand from the inputs of its test (the mutation table's survivors in
acceptance_rows, _greedy_rows, regress, _sampled_row, incomparable, _recorded_model, _stated_sha256, _lower and
draft_length). `regress` itself reads its two documents through a stand-in for `load` and `verify` (the
files and their verification are certificate.py's, tested in test_certificate.py)."""

from __future__ import annotations

import copy

import pytest

import spectui.run.prove.regress as rg
from spectui.run.prove.certificate import Verification
from spectui.run.prove.regress import (
    EXIT_INCOMPARABLE,
    EXIT_NO_REGRESSION,
    EXIT_REGRESSION,
    Regression,
    RegressRow,
    _greedy_rows,
    _lower,
    _recorded_model,
    _same_draft,
    _sampled_row,
    _short_id,
    _stated_sha256,
    acceptance_rows,
    compared,
    draft_length,
    identity_rows,
    incomparable,
    unverified,
)

SHA_A = "0123456789ab" + "c" * 52  # 64 hex digits: shown as its first 12 and an ellipsis
SHA_B = "fedcba987654" + "d" * 52


def test_the_exit_codes():
    assert (EXIT_NO_REGRESSION, EXIT_REGRESSION, EXIT_INCOMPARABLE) == (0, 4, 2)


# -- the table and its JSON ------------------------------------------------------------------------------
def test_the_text_is_the_head_alone_without_rows():
    assert Regression(0, "fine").text() == "NO REGRESSION: fine"
    assert Regression(4, "worse").text() == "REGRESSION: worse"
    assert Regression(2, "apples and pears").text() == "INCOMPARABLE: apples and pears"


def test_the_text_pads_each_column_to_its_widest_cell_and_marks_the_regressions():
    rows = [RegressRow("ab", "1", "22", "x"), RegressRow("abcd", "333", "4", "y", True)]
    assert Regression(4, "r", rows).text() == (
        "REGRESSION: r\n"
        "\n"
        "      old  new  change\n"  # what: 4 wide, old: 3, new: 2 (the header 'new' overflows it)
        "ab    1    22  x\n"
        "abcd  333  4   y  ◀ REGRESSION"
    )


def test_the_json_holds_code_reason_and_every_row_field():
    r = Regression(4, "why", [RegressRow("w", "o", "n", "c", True), RegressRow("w2", "o2", "n2", "c2")])
    assert r.to_json() == {
        "code": 4,
        "reason": "why",
        "rows": [
            {"what": "w", "old": "o", "new": "n", "change": "c", "regression": True},
            {"what": "w2", "old": "o2", "new": "n2", "change": "c2", "regression": False},
        ],
    }
    assert Regression(0, "fine").to_json() == {"code": 0, "reason": "fine", "rows": []}


# -- which model each side ran ---------------------------------------------------------------------------
def test_the_model_is_the_one_the_sessions_recorded_and_the_sha256_only_stated():
    assert _recorded_model({"derived": {}}, "baseline") is None  # no servers recorded
    assert _recorded_model({"derived": {"servers": {}}}, "baseline") is None  # not this side
    doc = {
        "derived": {"servers": {"baseline": {"model": "target.gguf"}, "candidate": {"model": None}}},
        "measured_on": {"servers": {"baseline": {"model": "stated.gguf", "model_file": {"sha256": SHA_A}}}},
    }
    assert _recorded_model(doc, "baseline") == "target.gguf"  # the sessions', never the stated name
    assert _recorded_model(doc, "candidate") is None
    assert _stated_sha256(doc, "baseline") == SHA_A
    assert _stated_sha256(doc, "candidate") is None
    assert _stated_sha256({"measured_on": {}}, "baseline") is None
    none_file = {"measured_on": {"servers": {"baseline": {"model": "m", "model_file": None}}}}
    assert _stated_sha256(none_file, "baseline") is None


def test_a_short_id_cuts_only_a_64_character_hash():
    assert _short_id(SHA_A) == "0123456789ab…"
    assert _short_id("x" * 63) == "x" * 63
    assert _short_id("x" * 65) == "x" * 65
    assert _short_id("draft.gguf") == "draft.gguf"


# -- incomparable ----------------------------------------------------------------------------------------
def doc_inputs(sha=SHA_A, name="set-a", share=None, max_tokens=64, cache_prompt=True, servers=None) -> dict:
    """`servers`: each side's stated model_file and its recorded model (derived.servers)."""
    inputs = {"prompt_set": {"name": name, "sha256": sha}, "params": {"max_tokens": max_tokens}}
    if cache_prompt is not None:
        inputs["params"]["cache_prompt"] = cache_prompt
    if share is not None:
        inputs["share"] = share
    measured = {} if servers is None else {"servers": servers}
    recorded = {side: {"model": s.get("model")} for side, s in (servers or {}).items()}
    return {"inputs": inputs, "measured_on": measured, "derived": {"servers": recorded}}


def test_the_same_inputs_are_comparable():
    assert incomparable(doc_inputs(), doc_inputs()) is None
    # the shares compared as sets of ids, in any order; none on both sides is the same
    assert incomparable(doc_inputs(share=["b", "a"]), doc_inputs(share=["a", "b"])) is None
    assert incomparable(doc_inputs(share=None), doc_inputs(share=[])) is None


def test_different_prompt_sets_name_both_and_their_hashes_first_12_digits():
    why = incomparable(doc_inputs(SHA_A, "set-a"), doc_inputs(SHA_B, "set-b", max_tokens=8))
    assert why == "different prompt sets (set-a 0123456789ab vs set-b fedcba987654)"
    old = doc_inputs(SHA_A)
    del old["inputs"]["prompt_set"]["name"]
    assert incomparable(old, doc_inputs(SHA_B)) == "different prompt sets (None 0123456789ab vs set-a fedcba987654)"


def test_different_shares_are_incomparable():
    why = "different shares of the prompt set (merge the shards first, or compare the same shard)"
    assert incomparable(doc_inputs(share=["a"]), doc_inputs(share=["a", "b"])) == why
    assert incomparable(doc_inputs(share=["a"]), doc_inputs()) == why
    assert incomparable(doc_inputs(), doc_inputs(share=["b"])) == why


def test_different_max_tokens_or_cache_prompt_are_incomparable_each_named():
    assert incomparable(doc_inputs(max_tokens=64), doc_inputs(max_tokens=128)) == "different max_tokens (64 vs 128)"
    assert incomparable(doc_inputs(cache_prompt=True), doc_inputs(cache_prompt=False)) == (
        "different cache_prompt (True vs False)"
    )
    assert incomparable(doc_inputs(cache_prompt=None), doc_inputs(cache_prompt=False)) == (
        "different cache_prompt (None vs False)"
    )
    # max_tokens is looked at before cache_prompt
    assert incomparable(doc_inputs(max_tokens=1, cache_prompt=False), doc_inputs(max_tokens=2)) == (
        "different max_tokens (1 vs 2)"
    )


def test_different_models_on_a_side_are_incomparable_only_when_both_are_known():
    a = {"baseline": {"model_file": {"sha256": SHA_A}}, "candidate": {"model": "d1.gguf"}}
    b = {"baseline": {"model_file": {"sha256": SHA_B}}, "candidate": {"model": "d1.gguf"}}
    assert incomparable(doc_inputs(servers=a), doc_inputs(servers=b)) == (
        "different baseline model files (stated sha256 0123456789ab… vs fedcba987654…)"
    )
    c = {"baseline": {"model_file": {"sha256": SHA_A}}, "candidate": {"model": "d2.gguf"}}
    assert incomparable(doc_inputs(servers=a), doc_inputs(servers=c)) == (
        "different candidate models as the servers reported them (d1.gguf vs d2.gguf)"
    )
    # one side unknown on either certificate: not judged
    assert incomparable(doc_inputs(servers=a), doc_inputs(servers={})) is None
    assert incomparable(doc_inputs(servers={}), doc_inputs(servers=c)) is None
    assert incomparable(doc_inputs(servers=a), doc_inputs(servers=copy.deepcopy(a))) is None


# -- greedy ----------------------------------------------------------------------------------------------
def greedy(statuses: dict, identical: int, differs: int, prompts: int | None = None, not_run="absent") -> dict:
    g = {
        "per_prompt": [{"id": i, "status": s} for i, s in statuses.items()],
        "prompts": len(statuses) if prompts is None else prompts,
        "identical": identical,
        "differs": differs,
    }
    if not_run != "absent":
        g["not_run"] = not_run
    return g


def test_compared_counts_identical_and_differing_prompts():
    assert compared({"identical": 2, "differs": 3}) == 5
    assert compared({"identical": "4", "differs": "1"}) == 5


def test_a_new_divergence_is_a_regression_and_a_fixed_one_is_said():
    og = greedy({"a": "identical", "b": "differs", "c": "identical", "d": "failed"}, 2, 1, not_run=["d", "e"])
    ng = greedy(
        {"a": "differs", "b": "identical", "c": "identical", "d": "identical", "x": "differs"},
        3,
        2,
        prompts=4,
        not_run=["e", "f"],
    )
    # old: 4 prompts + e (d already has a status) = 5; new: 4 + e + f = 6
    assert _greedy_rows(og, ng) == [
        RegressRow("greedy identical", "2/5", "3/6", "new divergence on a, x; identical again on b", True)
    ]


def test_fewer_identical_without_a_new_divergence_is_a_regression():
    og = greedy({"a": "identical", "b": "identical"}, 2, 0)
    ng = greedy({"a": "identical", "b": "identical"}, 1, 1, not_run=None)
    assert _greedy_rows(og, ng) == [RegressRow("greedy identical", "2/2", "1/2", "fewer identical (2 → 1)", True)]


def test_the_same_greedy_results_are_no_regression():
    og = greedy({"a": "identical", "b": "differs"}, 1, 1, not_run=[])
    ng = greedy({"a": "identical", "b": "differs"}, 1, 1)
    assert _greedy_rows(og, ng) == [RegressRow("greedy identical", "1/2", "1/2", "no new divergence", False)]
    # more identical than before, nothing new differing: still no regression, the fixed one said
    ng = greedy({"a": "identical", "b": "identical"}, 2, 0)
    assert _greedy_rows(og, ng) == [
        RegressRow("greedy identical", "1/2", "2/2", "no new divergence; identical again on b", False)
    ]


def test_fewer_prompts_compared_is_a_regression_naming_the_first_five_lost():
    old = {f"p{i}": "identical" for i in range(1, 7)} | {
        "q": "differs",
        "r": "failed",
        "s": "differs",
        "t": "identical",
    }
    new = {f"p{i}": "failed" for i in range(1, 6)} | {"q": "differs", "r": "failed", "s": "identical", "t": "differs"}
    # p6 not run at all now; r failed before and after (never compared); s, t still compared
    og = greedy(old, 7, 2)
    ng = greedy(new, 1, 2, prompts=9, not_run=["p6"])
    assert _greedy_rows(og, ng) == [
        RegressRow("greedy identical", "7/10", "1/10", "new divergence on t; identical again on s", True),
        RegressRow(
            "greedy compared",
            "9/10",
            "3/10",
            "no longer compared: p1, p2, p3, p4, p5 (a side failed, was cut off or not run)",
            True,
        ),
    ]


def test_fewer_compared_with_no_prompt_to_name_says_fewer_prompts():
    og = greedy({"a": "identical"}, 1, 1, prompts=2)
    ng = greedy({"a": "identical"}, 1, 0, prompts=2)
    assert _greedy_rows(og, ng)[1] == RegressRow(
        "greedy compared",
        "2/2",
        "1/2",
        "no longer compared: fewer prompts (a side failed, was cut off or not run)",
        True,
    )


def test_a_prompt_lost_from_either_verdict_is_named_and_one_still_compared_is_not():
    # a differed and now failed, b was identical and is not run now (both lost); c was identical and now
    # differs (a new divergence, still compared)
    og = greedy({"a": "differs", "b": "identical", "c": "identical"}, 2, 1)
    ng = greedy({"a": "failed", "c": "differs"}, 0, 1, not_run=["b"])
    assert _greedy_rows(og, ng) == [
        RegressRow("greedy identical", "2/3", "0/3", "new divergence on c", True),
        RegressRow(
            "greedy compared", "3/3", "1/3", "no longer compared: a, b (a side failed, was cut off or not run)", True
        ),
    ]


def test_every_prompt_identical_again_is_named():
    og = greedy({"a": "differs", "b": "differs"}, 0, 2)
    ng = greedy({"a": "identical", "b": "identical"}, 2, 0)
    assert _greedy_rows(og, ng) == [
        RegressRow("greedy identical", "0/2", "2/2", "no new divergence; identical again on a, b", False)
    ]


def test_as_many_compared_adds_no_row():
    og = greedy({"a": "identical", "b": "failed"}, 1, 0)
    ng = greedy({"a": "failed", "b": "differs"}, 0, 1)
    assert _greedy_rows(og, ng) == [RegressRow("greedy identical", "1/2", "0/2", "new divergence on b", True)]


# -- sampled ---------------------------------------------------------------------------------------------
def sampled(statuses: dict, passed: int, total: int) -> dict:
    return {"prompts": [{"id": i, "status": s} for i, s in statuses.items()], "passed": passed, "total": total}


def test_a_sampled_prompt_that_passed_and_now_does_not_is_named_in_id_order():
    os_ = sampled({"e": "identical", "d": "consistent", "c": "different", "b": "identical", "a": "consistent"}, 4, 5)
    ns = sampled({"a": "undecided", "b": "identical", "c": "consistent", "e": "consistent"}, 3, 4)
    assert _sampled_row(os_, ns) == RegressRow(
        "sampled", "4/5", "3/4", "passed before, not now: a (undecided), d (not run)", True
    )


def test_sampled_prompts_that_still_pass_are_no_regression():
    os_ = sampled({"a": "identical", "b": "consistent", "c": "failed"}, 2, 3)
    ns = sampled({"a": "consistent", "b": "identical", "c": "different"}, 2, 3)
    assert _sampled_row(os_, ns) == RegressRow("sampled", "2/3", "2/3", "no new difference", False)


def test_sampled_measured_before_and_not_now():
    os_ = sampled({"a": "identical", "b": "different"}, 1, 2)
    row = RegressRow("sampled", "1/2", "—", "measured before and not now", True)
    assert _sampled_row(os_, None) == row
    assert _sampled_row(os_, {}) == row
    assert _sampled_row(sampled({"a": "different"}, 0, 1), None) is None  # nothing passed before: nothing lost
    assert _sampled_row(None, sampled({"a": "identical"}, 1, 1)) is None
    assert _sampled_row(None, None) is None


def test_identity_rows_are_the_greedy_rows_then_the_sampled_row():
    g = greedy({"a": "identical"}, 1, 0)
    old = {"derived": {"greedy": g, "sampled": sampled({"a": "identical"}, 1, 1)}}
    new = {"derived": {"greedy": g, "sampled": sampled({"a": "different"}, 0, 1)}}
    assert identity_rows(old, new) == [
        RegressRow("greedy identical", "1/1", "1/1", "no new divergence", False),
        RegressRow("sampled", "1/1", "0/1", "passed before, not now: a (different)", True),
    ]
    assert identity_rows({"derived": {"greedy": g}}, {"derived": {"greedy": g}}) == [
        RegressRow("greedy identical", "1/1", "1/1", "no new divergence", False)
    ]


# -- _lower: lower beyond the intervals -------------------------------------------------------------------
def test_lower_needs_a_value_on_both_sides():
    m = {"value": 1.0, "low": 0.5, "high": 1.5}
    for old, new in ((None, m), (m, None), ({}, m), (m, {}), ({"value": None}, m), (m, {"value": None})):
        assert _lower(old, new) == (False, "not measured on both")


def test_lower_without_an_interval_shows_the_change_and_does_not_judge():
    assert _lower({"value": 0.0}, {"value": 0.5}) == (False, "+0.500 (no interval: 1 run; not judged)")
    # the old one has no low end, or the new one no high end
    assert _lower({"value": 2.0, "high": 2.5}, {"value": 1.0, "low": 0.5, "high": 1.5}) == (
        False,
        "-1.000 (no interval: 1 run; not judged)",
    )
    assert _lower({"value": 2.0, "low": 1.5, "high": 2.5}, {"value": 1.0, "low": 0.5}) == (
        False,
        "-1.000 (no interval: 1 run; not judged)",
    )


def test_lower_beyond_the_intervals_only_when_the_new_high_is_below_the_old_low():
    old = {"value": 2.0, "low": 1.75, "high": 2.25}
    assert _lower(old, {"value": 1.5, "low": 1.25, "high": 1.625}) == (True, "-0.500, lower beyond the intervals")
    # touching is overlapping
    assert _lower(old, {"value": 1.5, "low": 1.25, "high": 1.75}) == (False, "-0.500, intervals overlap")
    assert _lower(old, {"value": 2.125, "low": 2.0, "high": 2.5}) == (False, "+0.125, intervals overlap")
    assert _lower(old, {"value": 2.5, "low": 2.25, "high": 2.75}) == (False, "+0.500, intervals overlap")
    assert _lower(old, {"value": 2.5, "low": 2.375, "high": 2.75}) == (False, "+0.500, intervals apart (higher)")


# -- draft length ------------------------------------------------------------------------------------------
def drafted(n_max=None, per_position=None, speculative="absent", servers=True) -> dict:
    derived: dict = {}
    if servers:
        cand: dict = {}
        if speculative != "absent":
            cand["speculative"] = speculative
        elif n_max is not None:
            cand["speculative"] = {"n_max": n_max}
        derived["servers"] = {"candidate": cand}
    if per_position is not None:
        derived["acceptance"] = {"per_position": per_position}
    return {"derived": derived}


def test_the_draft_length_is_the_servers_n_max():
    assert draft_length(drafted(n_max=4, per_position=[{}, {}])) == 4  # n_max first
    assert draft_length(drafted(n_max=1)) == 1


@pytest.mark.parametrize("n_max", [0, -1, True, "4", 2.0])
def test_an_n_max_that_is_not_a_positive_integer_falls_back_to_the_positions_counted(n_max):
    assert draft_length(drafted(n_max=n_max, per_position=[{}, {}, {}])) == 3
    assert draft_length(drafted(n_max=n_max)) is None


def test_the_draft_length_without_n_max():
    assert draft_length(drafted(servers=False, per_position=[{}, {}])) == 2
    assert draft_length(drafted(servers=False)) is None
    assert draft_length(drafted(per_position=[])) is None
    assert draft_length(drafted(speculative=None, per_position=[{}])) == 1
    assert draft_length(drafted(speculative="ngram", per_position=[{}])) == 1  # not a dict
    assert draft_length({"derived": {"servers": {"candidate": None}, "acceptance": None}}) is None
    assert draft_length({"derived": {"servers": {"baseline": {"speculative": {"n_max": 5}}}}}) is None


def test_same_draft_says_the_length_or_why_not_judged():
    assert _same_draft(drafted(n_max=3), drafted(n_max=3)) == (True, "draft length 3 on both")
    assert _same_draft(drafted(n_max=3), drafted(n_max=2)) == (False, "draft length changed (3 → 2)")
    why = "draft length not recorded (no n_max, no per-position counters)"
    assert _same_draft(drafted(), drafted(n_max=3)) == (False, why)
    assert _same_draft(drafted(n_max=3), drafted()) == (False, why)


# -- acceptance ------------------------------------------------------------------------------------------
def accepting(acceptance, n_max=None) -> dict:
    doc = drafted(n_max=n_max)
    if acceptance != "absent":
        doc["derived"]["acceptance"] = acceptance
    return doc


MAL_OLD = {"value": 2.5, "low": 2.25, "high": 2.75}  # 2.50 [2.25–2.75]
MAL_NEW = {"value": 2.0, "low": 1.75, "high": 2.125}  # 2.00 [1.75–2.12]: below, apart
P1_OLD = {"value": 0.75, "low": 0.625, "high": 0.875}  # 75.0% [62.5%–87.5%]
P1_NEW = {"value": 0.5, "low": 0.375, "high": 0.5625}  # 50.0% [37.5%–56.2%]
P2_OLD = {"value": 0.5, "low": 0.375, "high": 0.625}
P2_NEW = {"value": 0.5, "low": 0.25, "high": 0.75}
P3_OLD = {"value": 0.25, "low": 0.125, "high": 0.375}


def test_acceptance_measured_before_and_not_now():
    old = accepting({"drafted": 10, "mean_accepted_length": MAL_OLD})
    row = [RegressRow("acceptance", "measured", "not measured", "measured before and not now", True)]
    assert acceptance_rows(old, accepting({"drafted": 0})) == row
    assert acceptance_rows(old, accepting("absent")) == row
    assert acceptance_rows(old, accepting(None)) == row


def test_no_acceptance_on_either_side_has_no_rows():
    assert acceptance_rows(accepting("absent"), accepting(None)) == []
    assert acceptance_rows(accepting({"drafted": 0}), accepting({"drafted": 0})) == []


def test_acceptance_on_the_same_draft_judges_the_mean_and_each_position_both_drafted():
    old = accepting(
        {
            "drafted": 40,
            "mean_accepted_length": MAL_OLD,
            "acceptance_rate": 0.625,
            "per_position": [P1_OLD, P2_OLD, P3_OLD],
        },
        n_max=3,
    )
    new = accepting(
        {"drafted": 30, "mean_accepted_length": MAL_NEW, "acceptance_rate": None, "per_position": [P1_NEW, P2_NEW]},
        n_max=3,
    )
    assert acceptance_rows(old, new) == [
        RegressRow(
            "mean accepted length", "2.50 [2.25–2.75]", "2.00 [1.75–2.12]", "-0.500, lower beyond the intervals", True
        ),
        RegressRow(
            "acceptance per drafted token",
            "62.5%",
            "—",
            "shown, not judged (it falls with a longer draft by design)",
        ),
        RegressRow(
            "acceptance at position 1",
            "75.0% [62.5%–87.5%]",
            "50.0% [37.5%–56.2%]",
            "-0.250, lower beyond the intervals",
            True,
        ),
        RegressRow(
            "acceptance at position 2", "50.0% [37.5%–62.5%]", "50.0% [25.0%–75.0%]", "+0.000, intervals overlap"
        ),
        RegressRow("positions drafted", "3", "2", "the draft length changed"),
    ]


def test_the_mean_accepted_length_is_not_judged_when_the_draft_length_changed():
    old = accepting({"drafted": 40, "mean_accepted_length": MAL_OLD, "acceptance_rate": 0.5}, n_max=4)
    new = accepting({"drafted": 30, "mean_accepted_length": MAL_NEW, "acceptance_rate": 0.875}, n_max=2)
    assert acceptance_rows(old, new) == [
        RegressRow(
            "mean accepted length", "2.50 [2.25–2.75]", "2.00 [1.75–2.12]", "draft length changed (4 → 2): not judged"
        ),
        RegressRow(
            "acceptance per drafted token",
            "50.0%",
            "87.5%",
            "shown, not judged (it falls with a longer draft by design)",
        ),
    ]
    # no n_max and no per-position counters: not judged either
    old["derived"].pop("servers")
    assert acceptance_rows(old, new)[0] == RegressRow(
        "mean accepted length",
        "2.50 [2.25–2.75]",
        "2.00 [1.75–2.12]",
        "draft length not recorded (no n_max, no per-position counters): not judged",
    )


def test_acceptance_measured_now_and_not_before_is_shown_not_judged():
    new = accepting(
        {"drafted": 8, "mean_accepted_length": {"value": 1.5}, "acceptance_rate": 0.25, "per_position": [P1_NEW]}
    )
    assert acceptance_rows(accepting("absent"), new) == [
        RegressRow(
            "mean accepted length",
            "—",
            "1.50",
            "draft length not recorded (no n_max, no per-position counters): not judged",
        ),
        RegressRow(
            "acceptance per drafted token", "—", "25.0%", "shown, not judged (it falls with a longer draft by design)"
        ),
        RegressRow("positions drafted", "0", "1", "the draft length changed"),
    ]


def test_the_same_positions_drafted_add_no_draft_length_row():
    old = accepting({"drafted": 4, "mean_accepted_length": {"value": 1.5}, "per_position": [P2_OLD]}, n_max=1)
    new = accepting({"drafted": 4, "mean_accepted_length": {"value": 1.75}, "per_position": [P2_NEW]}, n_max=1)
    assert acceptance_rows(old, new) == [
        # greedy acceptance counts are exact: without an interval the change is judged as it is (higher: fine)
        RegressRow(
            "mean accepted length", "1.50", "1.75", "+0.250, not lower (exact counts at temperature 0; no interval)"
        ),
        RegressRow(
            "acceptance per drafted token", "—", "—", "shown, not judged (it falls with a longer draft by design)"
        ),
        RegressRow(
            "acceptance at position 1", "50.0% [37.5%–62.5%]", "50.0% [25.0%–75.0%]", "+0.000, intervals overlap"
        ),
    ]


# -- verification ------------------------------------------------------------------------------------------
def stub_verify(monkeypatch, problems_by_path: dict):
    called = []

    def verify(path):
        called.append(path)
        problems = problems_by_path[path]
        return Verification(not problems, list(problems), [])

    monkeypatch.setattr(rg, "verify", verify)
    return called


def test_unverified_names_the_first_problem_and_how_many_more(monkeypatch):
    stub_verify(monkeypatch, {"a.json": [], "b.json": ["P1"], "c.json": ["P1", "P2"], "d.json": ["P1", "P2", "P3"]})
    tail = "`spectui verify {}` names every problem, --no-verify compares it as it is"
    assert unverified("a.json", "old") is None
    assert unverified("b.json", "old") == "the old certificate does not verify: P1; " + tail.format("b.json")
    assert unverified("c.json", "new") == "the new certificate does not verify: P1 (and 1 more); " + tail.format(
        "c.json"
    )
    assert unverified("d.json", "new") == "the new certificate does not verify: P1 (and 2 more); " + tail.format(
        "d.json"
    )


# -- regress: the whole gate ---------------------------------------------------------------------------------
def cert(path: str, **over) -> dict:
    """A certificate document as `load` returns it: 2 prompts identical, 1 sampled prompt passed, a speed-up
    1.50× [1.25–1.75] both servers up, on one machine."""
    doc = {
        "_path": path,
        "inputs": {"prompt_set": {"name": "s", "sha256": SHA_A}, "share": [], "params": {"max_tokens": 32}},
        "measured_on": {"hardware": {"cpu": "Xeon", "gpus": [{"name": "H100", "memory": 80}]}},
        "derived": {
            "greedy": greedy({"a": "identical", "b": "identical"}, 2, 0),
            "sampled": sampled({"a": "consistent"}, 1, 1),
            "speedup": {"overall": {"value": 1.5, "low": 1.25, "high": 1.75}},
            "one_at_a_time": False,
        },
    }
    for k, v in over.items():
        if k in ("speedup", "one_at_a_time", "sampled", "greedy", "acceptance"):
            doc["derived"][k] = {"overall": v} if k == "speedup" else v
        else:
            doc[k] = v
    return doc


def stub_load(monkeypatch, *docs):
    by_path = {d["_path"]: d for d in docs}
    monkeypatch.setattr(rg, "load", lambda p: copy.deepcopy(by_path[p]))


GREEDY_SAME = RegressRow("greedy identical", "2/2", "2/2", "no new divergence", False)
SAMPLED_SAME = RegressRow("sampled", "1/1", "1/1", "no new difference", False)
NO_VERIFY = " (certificates not verified: --no-verify)"


def speed(old: str, new: str, how: str, regression: bool = False) -> RegressRow:
    return RegressRow("speed-up", old, new, how, regression)


def test_the_same_certificate_twice_is_no_regression(monkeypatch):
    stub_load(monkeypatch, cert("o.json"), cert("n.json"))
    stub_verify(monkeypatch, {"o.json": [], "n.json": []})
    rows = [GREEDY_SAME, SAMPLED_SAME, speed("1.50× [1.25–1.75]", "1.50× [1.25–1.75]", "+0.0%, intervals overlap")]
    assert rg.regress("o.json", "n.json") == Regression(0, "nothing worse beyond its interval", rows)
    assert rg.regress("o.json", "n.json", check=False) == Regression(
        0, "nothing worse beyond its interval" + NO_VERIFY, rows
    )


def test_a_certificate_that_does_not_verify_is_incomparable_unless_told(monkeypatch):
    stub_load(monkeypatch, cert("o.json"), cert("n.json"))
    tail = "; `spectui verify {}` names every problem, --no-verify compares it as it is"
    stub_verify(monkeypatch, {"o.json": ["edited"], "n.json": []})
    assert rg.regress("o.json", "n.json") == Regression(
        2, "the old certificate does not verify: edited" + tail.format("o.json")
    )
    stub_verify(monkeypatch, {"o.json": [], "n.json": ["gone", "and this"]})
    assert rg.regress("o.json", "n.json") == Regression(
        2, "the new certificate does not verify: gone (and 1 more)" + tail.format("n.json")
    )
    called = stub_verify(monkeypatch, {"o.json": ["edited"], "n.json": ["gone"]})
    assert rg.regress("o.json", "n.json", check=False).code == 0
    assert called == []  # not even looked at


def test_incomparable_certificates_have_no_rows(monkeypatch):
    new = cert("n.json")
    new["inputs"]["params"]["max_tokens"] = 64
    stub_load(monkeypatch, cert("o.json"), new)
    assert rg.regress("o.json", "n.json", check=False) == Regression(2, "different max_tokens (32 vs 64)")


def test_a_regression_names_every_worse_row_and_its_change(monkeypatch):
    new = cert(
        "n.json",
        greedy=greedy({"a": "differs", "b": "identical"}, 1, 1),
        sampled=None,
        speedup={"value": 1.2, "low": 1.125, "high": 1.25},
    )
    stub_load(monkeypatch, cert("old/o.json"), new)
    rows = [
        RegressRow("greedy identical", "2/2", "1/2", "new divergence on a", True),
        RegressRow("sampled", "1/1", "—", "measured before and not now", True),
        speed("1.50× [1.25–1.75]", "1.20× [1.12–1.25]", "-20.0%, intervals overlap"),  # 1.25 is not below 1.25
    ]
    assert rg.regress("old/o.json", "n.json", check=False) == Regression(
        4,
        "greedy identical, sampled worse than in old/o.json (new divergence on a; measured before and not now)"
        + NO_VERIFY,
        rows,
    )


def test_a_speed_up_lower_beyond_its_intervals_on_the_same_machine_and_mode_is_a_regression(monkeypatch):
    stub_load(monkeypatch, cert("o.json"), cert("n.json", speedup={"value": 1.2, "low": 1.125, "high": 1.1875}))
    stub_verify(monkeypatch, {"o.json": [], "n.json": []})
    low = speed("1.50× [1.25–1.75]", "1.20× [1.12–1.19]", "-20.0%, lower beyond the intervals", True)
    assert rg.regress("o.json", "n.json") == Regression(
        4, "speed-up worse than in o.json (-20.0%, lower beyond the intervals)", [GREEDY_SAME, SAMPLED_SAME, low]
    )


def test_a_speed_up_on_other_hardware_or_in_another_mode_is_not_judged(monkeypatch):
    lower = {"value": 1.2, "low": 1.125, "high": 1.1875}
    other = {"cpu": "Xeon", "gpus": [{"name": "H200"}]}
    stub_load(monkeypatch, cert("o.json"), cert("n.json", speedup=lower, measured_on={"hardware": other}))
    hw = "measured on different hardware (stated: measured_on.hardware)"
    how = f"-20.0%, lower beyond the intervals; {hw}: not judged"
    # not judged is never a pass: INCOMPARABLE, saying why
    assert rg.regress("o.json", "n.json", check=False) == Regression(
        2,
        f"nothing worse found, but speed-up {hw}: not judged" + NO_VERIFY,
        [GREEDY_SAME, SAMPLED_SAME, speed("1.50× [1.25–1.75]", "1.20× [1.12–1.19]", how)],
    )
    stub_load(monkeypatch, cert("o.json"), cert("n.json", speedup=lower, one_at_a_time=True))
    how = "-20.0%, lower beyond the intervals; measured both servers up vs one server at a time: not judged"
    assert rg.regress("o.json", "n.json", check=False).rows[2] == speed("1.50× [1.25–1.75]", "1.20× [1.12–1.19]", how)
    stub_load(monkeypatch, cert("o.json", one_at_a_time=True), cert("n.json", speedup=lower))
    how = "-20.0%, lower beyond the intervals; measured one server at a time vs both servers up: not judged"
    assert rg.regress("o.json", "n.json", check=False).rows[2] == speed("1.50× [1.25–1.75]", "1.20× [1.12–1.19]", how)
    # one at a time on both, on a machine whose other details differ: judged
    same = {"cpu": "Xeon", "gpus": [{"name": "H100", "memory": 94}], "ram": 1}
    stub_load(
        monkeypatch,
        cert("o.json", one_at_a_time=True),
        cert("n.json", speedup=lower, one_at_a_time=True, measured_on={"hardware": same}),
    )
    assert rg.regress("o.json", "n.json", check=False).code == 4


def test_a_speed_up_without_intervals_shows_its_change(monkeypatch):
    stub_load(
        monkeypatch,
        cert("o.json", speedup={"value": 1.5}, measured_on={}),
        cert("n.json", speedup={"value": 1.8}, measured_on={}),
    )
    row = speed("1.50×", "1.80×", "+20.0%, +0.300 (no interval: 1 run; not judged)")
    r = rg.regress("o.json", "n.json", check=False)
    assert r.rows == [GREEDY_SAME, SAMPLED_SAME, row]
    assert r.code == 2 and "has no interval on one side" in r.reason  # not judged: never a pass


def test_a_speed_up_measured_before_and_not_now_is_a_regression(monkeypatch):
    stub_load(monkeypatch, cert("o.json"), cert("n.json", speedup=None))
    row = speed("1.50× [1.25–1.75]", "—", "measured before and not now", True)
    assert rg.regress("o.json", "n.json", check=False) == Regression(
        4, "speed-up worse than in o.json (measured before and not now)" + NO_VERIFY, [GREEDY_SAME, SAMPLED_SAME, row]
    )
    # measured now and not before: no row
    stub_load(monkeypatch, cert("o.json", speedup=None), cert("n.json"))
    assert rg.regress("o.json", "n.json", check=False).rows == [GREEDY_SAME, SAMPLED_SAME]


def test_regress_adds_the_acceptance_rows(monkeypatch):
    acc = {"drafted": 4, "mean_accepted_length": {"value": 1.5}}
    stub_load(monkeypatch, cert("o.json", acceptance=acc, speedup=None), cert("n.json", speedup=None))
    assert rg.regress("o.json", "n.json", check=False) == Regression(
        4,
        "acceptance worse than in o.json (measured before and not now)" + NO_VERIFY,
        [
            GREEDY_SAME,
            SAMPLED_SAME,
            RegressRow("acceptance", "measured", "not measured", "measured before and not now", True),
        ],
    )
