"""labs.theory.terms, term by term: the cost curve V(k) and R(k), the draft decodes a step makes, the step's
cost, the speed-up S = E / (γc + V(γ+1) + R(γ+1)) with E = (1 − α^(γ+1)) / (1 − α) (Leviathan et al. 2023,
eq. 1), the break-even points, the verdict and the term that misses, and the report's lines. Every expected
value is worked out by hand from the inputs in the comments."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from spectui.labs.theory import terms
from spectui.labs.theory.steps import RunSteps
from spectui.labs.theory.terms import StepCosts, Term, check, check_runs

SRC = {"c": "measured: c src", "verify": "measured: v src", "reeval": "measured: r src"}
LINEAR = (1.0, 1.2, 1.4, 1.6)  # V(k) = 1 + 0.2 (k − 1)
# 4 steps of 2 drafted, 3 accepted in all: α + α² = 3/4 → α = 0.5; E = 1 + 3/4 = 1.75 = (1 − 0.5³)/(1 − 0.5)
RUN = RunSteps((2, 2, 2, 2), (1, 1, 1, 0), 0, 2, (0.75, 0.0), "the stream's labels")
COSTS = StepCosts(0.1, LINEAR, (), SRC)
# each step: 2 drafted at n_max 2 → 2 draft decodes · 0.1 + V(3) = 1.4 → 1.6; 4 steps 6.4; tokens 3 + 4 = 7
PREDICTED = 7 / 6.4


def close(a, b, tol=1e-9):
    return abs(a - b) <= tol


# --- StepCosts ---------------------------------------------------------------------------------------------


def test_ideal_costs_and_their_sources():
    i = StepCosts.ideal(0.25, "not measured")
    assert (i.c, i.verify, i.reeval, i.draft_model) == (0.25, (1.0,), (), True)
    assert i.sources == {"c": "ideal: not measured", "verify": "ideal: V(k) = 1", "reeval": "ideal: R = 0"}
    assert StepCosts.ideal(0.0).sources["c"] == "ideal"
    assert i.none_measured is True
    assert StepCosts(0.1, (1.0,)).none_measured is False  # no sources at all: nothing said, not "none measured"
    assert StepCosts(0.1, (1.0,), (), {"c": "ideal", "verify": "measured: x"}).none_measured is False
    assert StepCosts(0.1, (1.0,), (), {"c": "ideal", "verify": "known"}).none_measured is True


def test_the_curve_interpolates_between_measured_k_and_extends_along_the_last_two():
    v = StepCosts(0.1, (1.0, 1.5, 1.7, 2.5))
    assert v.measured_k == 4
    assert v.V(1) == 1.0 and v.V(0.5) == 1.0 and v.V(0) == 1.0
    assert close(v.V(2), 1.5) and close(v.V(3), 1.7) and close(v.V(4), 2.5)
    assert close(v.V(1.5), 1.25)  # halfway between 1.0 and 1.5
    assert close(v.V(2.5), 1.6)  # halfway between 1.5 and 1.7
    assert close(v.V(3.25), 1.9)  # a quarter of the way from 1.7 to 2.5
    assert close(v.V(5), 3.3)  # along the last two: 2.5 + 0.8
    assert close(v.V(6.5), 4.5)  # 1.7 + 0.8 · 3.5
    one = StepCosts(0.1, (2.0,))
    assert one.V(1) == 2.0 and one.V(7) == 2.0  # one value: the same at every k
    two = StepCosts(0.1, (1.0, 3.0))
    assert close(two.V(2), 3.0) and close(two.V(3), 5.0) and close(two.V(1.5), 2.0)


def test_reevaluation_is_zero_without_a_curve_and_read_off_its_curve_with_one():
    assert StepCosts(0.1, LINEAR).R(3) == 0.0
    r = StepCosts(0.1, LINEAR, (0.5, 0.6))
    assert r.R(1) == 0.5 and close(r.R(2), 0.6) and close(r.R(3), 0.7) and close(r.R(1.5), 0.55)


def test_draft_decodes_one_more_than_drafted_unless_the_draft_reached_its_limit():
    c = StepCosts(0.1, LINEAR)
    assert c.draft_decodes(3, None) == 4
    assert c.draft_decodes(3, 4) == 4  # stopped early (p_min): the last token's decode too
    assert c.draft_decodes(4, 4) == 4  # reached n_max: no decode of the last
    assert c.draft_decodes(5, 4) == 5
    assert c.draft_decodes(0, 4) == 1
    assert StepCosts(0.0, LINEAR, draft_model=False).draft_decodes(3, None) == 0.0


def test_a_step_costs_its_decodes_its_verification_and_its_reevaluation():
    c = StepCosts(0.1, LINEAR, (0.1, 0.2, 0.3, 0.4))
    assert close(c.step(2, 2), 2 * 0.1 + 1.4 + 0.3)
    assert close(c.step(2, None), 3 * 0.1 + 1.4 + 0.3)
    assert close(c.step(2), 3 * 0.1 + 1.4 + 0.3)  # no limit given: a draft that stopped early
    assert close(c.step(0, 4), 0.1 + 1.0 + 0.1)
    assert close(c.undrafted_step(), 1.0 + 0.1)
    assert close(c.full_step(3), 0.3 + 1.6 + 0.4)
    assert close(c.full_step(2.5), 0.25 + 1.5 + 0.35)
    n = StepCosts(0.5, LINEAR, (), draft_model=False)
    assert close(n.full_step(3), 1.6) and close(n.step(3, 3), 1.6)


def test_speedup_is_leviathans_E_over_the_full_step():
    c = StepCosts(0.1, LINEAR)
    assert close(c.speedup(0.5, 2), 1.75 / 1.6)  # E = 1 + 0.5 + 0.25
    assert close(c.speedup(0.0, 3), 1 / 1.9)
    # α = 1 is held just under 1: E → γ + 1 = 4
    assert close(c.speedup(1.0, 3), 4 / 1.9, 1e-5)
    assert close(c.speedup(1.5, 3), 4 / 1.9, 1e-5)


def test_costs_to_json():
    c = StepCosts(0.1, (1.0, 1.2), (0.3, 0.4), {"c": "x"})
    assert c.to_json() == {
        "c": 0.1,
        "verify": {"1": 1.0, "2": 1.2},
        "reeval": {"1": 0.3, "2": 0.4},
        "sources": {"c": "x"},
    }
    assert StepCosts(0.1, (1.0,)).to_json() == {"c": 0.1, "verify": {"1": 1.0}, "reeval": None, "sources": {}}


def test_term_to_json():
    t = Term("n", "i", "m", 1.5, "s")
    assert t.to_json() == {"term": "n", "ideal": "i", "measured": "m", "speedup": 1.5, "source": "s"}


# --- break-even and best γ -----------------------------------------------------------------------------------


def test_break_even_alpha_solves_one_plus_alpha_plus_alpha_squared_equal_to_the_step():
    # γ = 2, step 0.2 + 1.4 = 1.6: 1 + α + α² = 1.6 → α = (−1 + √3.4) / 2
    assert close(terms._break_even_alpha(COSTS, 2), (-1 + math.sqrt(3.4)) / 2, 1e-8)
    # γ = 1, step 0.1 + 1.2 = 1.3: 1 + α = 1.3
    assert close(terms._break_even_alpha(COSTS, 1), 0.3, 1e-8)
    # (γ + 1) / step exactly 1: never pays
    assert terms._break_even_alpha(StepCosts(0.5, (1.0, 1.0, 2.0)), 2) is None
    # a step that costs exactly 1 pays from α = 0
    assert terms._break_even_alpha(StepCosts(0.0, (1.0, 1.0, 1.0)), 2) == 0.0


def test_best_gamma_and_break_even_cost():
    # α 0.5: γ 1: 1.5 / 1.3; γ 2: 1.75 / 1.6; γ 3: 1.875 / 1.9 → γ 1
    best, be_a, be_c = terms._best_and_break_even(COSTS, 0.5, 2.0, 2)
    assert best[0] == 1 and close(best[1], 1.5 / 1.3)
    assert close(be_c, (1.75 - 1.4) / 2)  # S = 1 where 2c + 1.4 = 1.75
    assert close(be_a, (-1 + math.sqrt(3.4)) / 2, 1e-8)
    # α 0.9: γ 3 (the last with V(γ+1) measured): 3.439 / 1.9 beats 2.71 / 1.6 and 1.9 / 1.3
    best, _, _ = terms._best_and_break_even(COSTS, 0.9, 2.0, 2)
    assert best[0] == 3 and close(best[1], 3.439 / 1.9)
    best, _, be_c = terms._best_and_break_even(StepCosts(0.1, (1.0,), (), {}, False), 0.5, 2.0, 2)
    assert best is None and be_c is None
    # with R: (1.75 − V(3) − R(3)) / 2 = (1.75 − 1.4 − 0.25) / 2
    _, _, be_c = terms._best_and_break_even(StepCosts(0.1, LINEAR, (0.05, 0.15, 0.25)), 0.5, 2.0, 2)
    assert close(be_c, 0.05)
    # a real γ: E = (1 − 0.5^3.5) / 0.5, V(3.5) = 1.5
    _, _, be_c = terms._best_and_break_even(COSTS, 0.5, 2.5, 2)
    assert close(be_c, ((1 - 0.5**3.5) / 0.5 - 1.5) / 2.5)


# --- agreement -----------------------------------------------------------------------------------------------

INSIDE = "the prediction is inside the measured interval"
OVERLAP = "the prediction's range over the terms' repeats overlaps the measured interval"


def test_agreement_inside_overlapping_or_apart():
    ag = terms._agreement
    assert ag(1.0, None, None, None, 5.0, False) == (None, None, None)
    assert ag(1.0, None, 1.0, 1.0, 5.0, False) == (True, INSIDE, None)
    assert ag(1.0, None, 0.5, 1.0, 5.0, False) == (True, INSIDE, None)
    assert ag(1.0, None, 1.1, 1.2, 5.0, False) == (False, None, None)
    assert ag(1.3, None, 1.1, 1.2, 5.0, False) == (False, None, None)
    assert ag(0.4, (0.5, 1.0), 1.0, 2.0, 5.0, False) == (True, OVERLAP, None)  # touching at 1.0
    assert ag(0.4, (2.0, 3.0), 1.0, 2.0, 5.0, False) == (True, OVERLAP, None)  # touching at 2.0
    assert ag(0.4, (2.1, 3.0), 1.0, 2.0, 5.0, False) == (False, None, None)
    assert ag(0.4, (0.1, 0.9), 1.0, 2.0, 5.0, False) == (False, None, None)
    assert ag(1.5, None, 1.0, 2.0, 5.0, True) == (True, INSIDE, None)


def test_an_interval_that_holds_the_ideal_too_tests_nothing():
    want = (
        "too few runs to test the prediction: the measured interval 1.00–2.00× (width 1.00×) also holds the "
        "ideal formula's 2.00×"
    )
    assert terms._agreement(1.5, None, 1.0, 2.0, 2.0, False) == (None, None, want)
    assert terms._agreement(1.5, None, 1.0, 2.0, 1.0, False)[0] is None  # the ideal at the low end
    assert terms._agreement(1.5, None, 1.0, 2.0, 2.01, False) == (True, INSIDE, None)
    assert terms._agreement(1.5, None, 1.0, 2.0, 1.5, True) == (True, INSIDE, None)  # nothing measured
    assert terms._agreement(0.5, None, 1.0, 2.0, 1.5, False) == (False, None, None)  # apart: not "untested"


def test_predicted_range_over_the_repeats_skips_free_ones():
    again = StepCosts(0.1, (1.0, 1.0, 1.0, 1.0))  # each step 0.2 + 1.0: 4.8 in all
    free = StepCosts(0.0, (0.0,), draft_model=False)  # costs nothing: left out
    lo, hi = terms._predicted_range(RUN, [COSTS, free, again])
    assert close(lo, 7 / 6.4) and close(hi, 7 / 4.8)
    assert terms._predicted_range(RUN, None) is None and terms._predicted_range(RUN, []) is None
    assert terms._predicted_range(RUN, [free]) is None


# --- check and its report -----------------------------------------------------------------------------------


def test_check_fills_the_ladder_from_the_run_and_the_costs():
    chk = check(RUN, COSTS, 1.0, 1.0, 1.2, 3, [COSTS, StepCosts(0.1, (1.0, 1.0, 1.0, 1.0))])
    assert close(chk.alpha, 0.5) and chk.gamma == 2.0 and close(chk.tokens_per_step, 1.75)
    assert chk.by_position == (0.75, 0.0) and chk.by_position_source == "the stream's labels"
    names = [t.name for t in chk.terms]
    assert names == [
        "ideal (c = 0, V = 1, R = 0)",
        "draft cost c",
        "verification V(3.0)",
        "draft re-evaluation R",
        "the run's own steps",
    ]
    assert [t.ideal for t in chk.terms] == ["—", "c as given", "1 target step", "0", "all γ drafted"]
    assert [t.measured for t in chk.terms] == [
        "α 0.50, γ 2.00",
        "c = 0.100",
        "1.40 target steps",
        "0.00 target steps",
        "4 steps, 0 plain",
    ]
    want = [1.75, 1.75 / 1.2, 1.75 / 1.6, 1.75 / 1.6, PREDICTED]
    assert all(close(t.speedup, w, 1e-9) for t, w in zip(chk.terms, want, strict=True))
    assert [t.source for t in chk.terms] == [
        "Leviathan et al.",
        "measured: c src",
        "measured: v src",
        "measured: r src",
        "draft lengths as drafted, acceptance per position from the stream's labels, 2 draft decodes a full step",
    ]
    assert close(chk.predicted, PREDICTED)
    assert close(chk.predicted_range[0], 7 / 6.4) and close(chk.predicted_range[1], 7 / 4.8)
    assert (chk.measured, chk.measured_low, chk.measured_high, chk.runs) == (1.0, 1.0, 1.2, 3)
    assert close(chk.step_measured, 7 / 4) and close(chk.step_predicted, 1.6)
    assert chk.agree is True and chk.agreement == INSIDE and chk.miss is None
    assert chk.best_gamma == 1 and close(chk.best_speedup, 1.5 / 1.3)
    assert close(chk.break_even_alpha, (-1 + math.sqrt(3.4)) / 2, 1e-8)
    assert close(chk.break_even_c, 0.175)
    assert chk.notes == ()


def test_check_ladder_with_reevaluation_and_with_ngram():
    c = StepCosts(0.1, LINEAR, (0.1, 0.2, 0.3), SRC)
    chk = check(RUN, c, 1.0)
    # V(3) = 1.4, R(3) = 0.3; step 0.2 + 1.4 + 0.3 = 1.9
    assert chk.terms[3].measured == "0.30 target steps" and close(chk.terms[3].speedup, 1.75 / 1.9)
    assert close(chk.predicted, 7 / 7.6) and chk.agree is None
    ng = StepCosts(0.5, LINEAR, (), {"c": "known: 0"}, False)
    chk = check(RUN, ng, 1.0)
    assert close(chk.terms[1].speedup, 1.75)  # no draft model: c costs nothing
    assert close(chk.terms[2].speedup, 1.75 / 1.4)
    assert chk.terms[4].source == "draft lengths as drafted, acceptance per position from the stream's labels"
    assert close(chk.predicted, 7 / 5.6) and chk.break_even_c is None
    assert chk.notes == (
        "n-gram drafting: no draft model runs; the lookup in the token history is taken as free (c = 0)",
    )
    # a run whose acceptance is 1 is held just under 1: E = 3
    full = RunSteps((2, 2), (2, 2), 0, 2)
    chk = check(full, COSTS, 1.0)
    assert chk.alpha == 1.0 and close(chk.terms[0].speedup, 3.0, 1e-5)
    # a real γ of 2.5 rounds to the full step of γ 2 (n_max 3: 3 draft decodes... of γ 2: 3 decodes)
    odd = RunSteps((2, 3), (1, 1), 0, 3)
    chk = check(odd, COSTS, 1.0)
    assert chk.terms[2].name == "verification V(3.5)"
    assert chk.terms[4].source.endswith(", 3 draft decodes a full step")


def test_a_free_run_predicts_infinity_and_no_groups_give_nan():
    empty = RunSteps((), (), 0)  # no step at all: it costs nothing
    assert terms._term_ladder(empty, COSTS, 0.0, 0.0, 1)[3] == math.inf
    chk = check(RUN, COSTS, 0.0, 1.0, 1.2, 3)  # no measured speed-up, yet an interval that holds the prediction
    assert math.isnan(chk.step_measured) and close(chk.step_predicted, 1.6)


def test_edge_notes_count_capped_drafts_and_final_undrafted_steps():
    run = RunSteps((2, 2, 1, 1), (1, 1, 0, 0), 1, 2, caps=(5, 2, 1, None), undrafted=1)
    chk = check(run, COSTS, 1.0)
    assert chk.notes[0] == (  # 2 ≥ 2 and 1 ≥ 1 capped; 2 < 5; no cap known
        "edges charged as llama-server runs them: 2 draft(s) capped at n_remaining − 1 without the last decode, "
        "1 final step(s) with no draft call (server-context.cpp:517-536)"
    )
    assert terms._edge_notes(RunSteps((2,), (1,), 1, 2, caps=(3,), undrafted=1), COSTS)[0].startswith(
        "edges charged as llama-server runs them: 0 draft(s) capped"
    )
    assert terms._edge_notes(RunSteps((2,), (1,), 0, 2, caps=(2,)), COSTS)[0].startswith(
        "edges charged as llama-server runs them: 1 draft(s) capped"
    )
    assert terms._edge_notes(RunSteps((2,), (1,), 0, 2, caps=(3,)), COSTS) == []


def test_the_report_line_by_line():
    chk = check(RUN, COSTS, 1.0, 1.0, 1.2, 3)
    w = len("ideal (c = 0, V = 1, R = 0)")
    rows = [
        ("ideal (c = 0, V = 1, R = 0)", "—", "α 0.50, γ 2.00", "1.75"),
        ("draft cost c", "c as given", "c = 0.100", "1.46"),
        ("verification V(3.0)", "1 target step", "1.40 target steps", "1.09"),
        ("draft re-evaluation R", "0", "0.00 target steps", "1.09"),
        ("the run's own steps", "all γ drafted", "4 steps, 0 plain", "1.09"),
    ]
    want = [
        "α = 0.500 per position (the stream's labels), γ = 2.00 drafted per step, E = 1.75 tokens per step",
        "accepted at position i (share of steps): 1:0.75 2:0.00",
        "draft cost c = 0.100 target steps per draft decode [measured: c src]",
        "verification V(k) in target steps, k = 1…4: 1:1.00 2:1.20 3:1.40 4:1.60 [measured: v src]",
        "draft re-evaluation R(k) = 0 [measured: r src]",
        "",
        "  " + "term".ljust(w) + "  " + "ideal".ljust(14) + " " + "measured".ljust(22) + " speed-up",
    ]
    want += ["  " + n.ljust(w) + "  " + i.ljust(14) + " " + m.ljust(22) + " " + s + "×" for n, i, m, s in rows]
    want += [
        "",
        "predicted from the measured terms: 1.09×",
        "measured:                          1.00× [1.00–1.20] over 3 runs (width 0.20×)",
        "a step took 1.75 target steps in the run; the measured terms add up to 1.60",
        "the measured terms account for the measured speed-up (the prediction is inside the measured interval)",
        "best γ from the measured cost curve (γ ≤ 3): 1 (S 1.15× at α 0.50)",
        "break-even α at γ = 2 with the measured costs: 0.422",
        "break-even draft cost at this α and γ: c = 0.175",
    ]
    assert chk.text().split("\n") == want


def test_the_report_with_reevaluation_a_range_one_run_and_no_break_even():
    c = StepCosts(0.1, (1.0, 3.0, 3.0), (0.1, 0.2), {"c": "measured: c"})
    chk = check(RUN, c, 0.5, None, None, 1, [c, StepCosts(0.1, (1.0, 1.0, 1.0))])
    lines = chk.text().split("\n")
    assert "draft re-evaluation R(k): 1:0.10 2:0.20 [?]" in lines
    assert "verification V(k) in target steps, k = 1…3: 1:1.00 2:3.00 3:3.00 [?]" in lines
    # each step 0.2 + V(3) 3.0 + R(3) 0.3 = 3.5: 7 / 14; the second costs 0.2 + 1.0 + 0 = 1.2 a step: 7 / 4.8
    assert "predicted from the measured terms: 0.50× (each repeat's terms: 0.50–1.46×)" in lines
    assert "measured:                          0.50× (1 run: no interval)" in lines
    assert "break-even α at γ = 2 with the measured costs: none — no acceptance rate pays at these costs" in lines
    assert (
        "break-even draft cost at this α and γ: none — verification alone costs more than the tokens a step yields"
        in lines
    )
    # γ ≤ 2: γ 1: 1.5 / (0.1 + 3.0 + 0.2) = 0.45, γ 2: 1.75 / (0.2 + 3.0 + 0.3) = 0.5 → γ 2
    assert "best γ from the measured cost curve (γ ≤ 2): 2 (S 0.50× at α 0.50)" in lines
    assert chk.agree is None and chk.miss is not None and chk.miss in lines


def test_the_report_at_a_break_even_cost_of_exactly_zero_and_without_a_curve():
    c = StepCosts(0.1, (1.0,), (), {"c": "measured: c"}, True)
    # V = 1 at every k: 2c + 1 = 1.75 → c = 0.375; no best γ from one measured k
    text = check(RUN, c, 1.0).text()
    assert "break-even draft cost at this α and γ: c = 0.375" in text and "best γ" not in text
    zero = StepCosts(0.1, (1.0, 1.5, 1.75, 2.0), (), {"c": "measured: c"})
    assert "break-even draft cost at this α and γ: c = 0.000" in check(RUN, zero, 1.0).text().split("\n")
    ng = StepCosts(0.0, (1.0, 1.0, 1.0), (), {"c": "measured: c"}, False)
    assert "break-even draft cost" not in check(RUN, ng, 1.0).text()


def test_the_report_says_which_way_the_prediction_misses_and_how_it_agrees():
    # interval [1.20–1.30] above 1.09, no range: the prediction is below
    chk = check(RUN, COSTS, 1.25, 1.2, 1.3, 3)
    assert chk.agree is False and chk.miss in chk.text().split("\n")
    assert chk.miss.startswith("the prediction 1.09× is below the interval [1.20–1.30]: a step took ")
    # with a range over the repeats reaching into the interval
    chk = check(RUN, COSTS, 1.25, 1.2, 1.3, 3, [COSTS, StepCosts(0.1, (1.0, 1.0, 1.0, 1.0))])
    assert chk.agree is True and chk.agreement == OVERLAP and chk.miss is None
    assert f"the measured terms account for the measured speed-up ({OVERLAP})" in chk.text().split("\n")
    # nothing measured: the terms are named as the ideal's, the miss too
    ideal = StepCosts(0.1, LINEAR, (), {"c": "ideal", "verify": "ideal", "reeval": "ideal"})
    lines = check(RUN, ideal, 1.25, 1.2, 1.3, 3).text().split("\n")
    assert "predicted from the ideal formula's terms (none measured): 1.09×" in lines
    assert "nothing measured: the ideal formula beside the measured speed-up, not a test of it" in lines
    assert "a step took 1.40 target steps in the run; the ideal formula's terms (none measured) add up to 1.60" in lines
    assert not any(line.startswith("the prediction 1.09×") for line in lines)
    # measured terms that miss: the miss's words name them as measured
    lines = check(RUN, COSTS, 1.25, 1.2, 1.3, 3).text().split("\n")
    assert any(
        line.startswith("the prediction 1.09× is below") and "the measured terms add up to 1.60" in line
        for line in lines
    )


# --- which term misses ---------------------------------------------------------------------------------------

MEAS3 = {"c": "measured: c", "verify": "measured: v", "reeval": "measured: r"}


def split_run(group_t, group_d=(0, 1, 2, 2)):
    # 3 steps drafting 1, 2, 2 (accepted 1, 2, 2) and a plain token: 9 tokens in 4 groups
    return RunSteps((1, 2, 2), (1, 2, 2), 1, 2, None, "x", tuple(group_d), tuple(group_t))


def test_a_fixed_cost_per_step_is_named_as_such():
    # c 0.1, V linear, n_max 2: step(0) 0.1 + 1.0, step(1) 0.2 + 1.2, step(2) 0.2 + 1.4: 5.7 in all;
    # every group 0.5 target steps (5 ms at 10 ms a step) longer: 7.7 target steps, measured 9 / 7.7
    run = split_run((16.0, 19.0, 21.0, 21.0))
    miss = terms._which_term(run, COSTS, 9 / 7.7, 9 / 5.7, None, None)
    # (5.7 / 4 = 1.425 sits on a rounding edge: its last digit is left unchecked)
    assert miss.startswith(
        "the prediction 1.58× is above the measured 1.17×: a step took 1.93 target steps, the measured terms "
        "add up to 1.4"
    )
    assert (
        " (+0.50, +35%); in the run's own step times the missing time is a fixed +0.50 target steps (+5.0 ms) per "
        "step, " in miss
    )
    assert miss.endswith(
        " per drafted token: the term that misses is a fixed cost per step, which no measured term (c, V, R) holds"
    )


def test_a_cost_per_drafted_token_is_named_with_how_far_off():
    costs = StepCosts(0.1, LINEAR, (0.1, 0.2, 0.3, 0.4), MEAS3)
    # step(0) 0.1 + 1.0 + 0.1, step(1) 0.2 + 1.2 + 0.2, step(2) 0.2 + 1.4 + 0.3: 1.2, 1.6, 1.9, 1.9 = 6.6;
    # missing 0.05 + 0.3 d: 1.25, 1.95, 2.55, 2.55 = 8.3 target steps at 10 ms
    run = split_run((12.5, 19.5, 25.5, 25.5))
    miss = terms._which_term(run, costs, 9 / 8.3, 9 / 6.6, 1.0, 1.05)
    # per drafted token the terms charge c 0.1 + V's slope 0.2 + R's slope 0.1 = 0.4; 0.3 is 0.75 of it
    assert miss == (
        "the prediction 1.36× is above the interval [1.00–1.05]: a step took 2.08 target steps, the measured "
        "terms add up to 1.65 (+0.43, +26%); in the run's own step times it grows by +0.300 target steps per "
        "drafted token (the measured terms charge 0.400: c and the slope of V and R), +0.05 fixed per step: the "
        "term that misses is the cost per drafted token, off by +75%"
    )


def test_a_per_token_miss_where_the_terms_charge_nothing_per_token():
    flat = StepCosts(0.3, (1.0, 1.0, 1.0, 1.0), (), MEAS3, False)
    # every step 1.0: 4.0; missing 0.05 + 0.3 d: 1.05, 1.35, 1.65, 1.65 = 5.7 at 10 ms
    run = split_run((10.5, 13.5, 16.5, 16.5))
    miss = terms._which_term(run, flat, 9 / 5.7, 9 / 4.0, None, None)
    assert miss.endswith("; it grows by +0.300 target steps per drafted token: the cost per drafted token misses")


def test_a_fixed_miss_wins_a_tie_and_the_mean_draft_counts_drafting_groups_only():
    # missing 0.5 + 0.3 d: fixed 0.5 ≥ 0.3 · mean d 5/3 = 0.5 → fixed (the tie goes to the fixed cost)
    # groups: 1.6, 1.4 + 0.8, 1.6 + 1.1, 1.6 + 1.1 = 9.4 target steps at 10 ms
    run = split_run((16.0, 22.0, 27.0, 27.0))
    miss = terms._which_term(run, COSTS, 9 / 9.4, 9 / 5.7, None, None)
    assert "the term that misses is a fixed cost per step" in miss
    # fixed 0.4 < 0.5: per token; the terms charge 0.1 + 0.2 = 0.3 → off by +100%
    run = split_run((15.0, 21.0, 26.0, 26.0))
    miss = terms._which_term(run, COSTS, 9 / 8.8, 9 / 5.7, None, None)
    assert miss.endswith("+0.40 fixed per step: the term that misses is the cost per drafted token, off by +100%")


@pytest.mark.parametrize(
    "group_d, group_t",
    [((2, 2, 2, 2), (1.0, 2.0, 3.0, 4.0)), ((0, 2), (1.0, 2.0)), ((0, 1, 2), (1.0, 2.0))],
)
def test_steps_that_cannot_be_split(group_d, group_t):
    run = RunSteps((2, 2, 2, 2), (1, 1, 1, 0), 0, 2, None, "x", group_d, group_t)
    miss = terms._which_term(run, COSTS, 1.0, PREDICTED, None, None)
    assert miss == (
        "the prediction 1.09× is above the measured 1.00×: a step took 1.75 target steps, the measured terms add "
        "up to 1.60 (+0.15, +9%); the run's steps all drafted alike, so the missing time cannot be split into "
        "per token and per step"
    )


def test_three_groups_of_two_draft_lengths_are_enough_to_split():
    run = RunSteps((2, 2), (1, 2), 1, 2, None, "x", (0, 2, 2), (16.0, 19.0, 21.0))
    assert "cannot be split" not in terms._which_term(run, COSTS, 6 / 5.6, 6 / 4.1, None, None)


def test_no_missing_time_at_all_is_a_fixed_zero_and_an_equal_prediction_is_not_above():
    flat = StepCosts(0.3, (1.0, 1.0, 1.0, 1.0), (), MEAS3, False)
    # every group 1.0 target step, measured 10 ms each: 9 tokens in 4.0 target steps, nothing missing
    run = split_run((10.0, 10.0, 10.0, 10.0))
    miss = terms._which_term(run, flat, 9 / 4.0, 9 / 4.0, None, None)
    assert miss.startswith("the prediction 2.25× is below the measured 2.25×: a step took 1.00 target steps")
    assert "the missing time is a fixed +0.00 target steps (+0.0 ms) per step" in miss


# --- check_runs ----------------------------------------------------------------------------------------------


def test_check_runs_needs_a_finished_run_that_drafted(monkeypatch):
    assert check_runs([], COSTS) is None
    assert check_runs([SimpleNamespace(speedup=None, candidate="a")], COSTS) is None
    seen = []

    def fake_steps(rec):
        seen.append(rec)
        return RUN if rec == "last" else None

    monkeypatch.setattr(terms, "run_steps", fake_steps)
    assert check_runs([SimpleNamespace(speedup=1.0, candidate="none")], COSTS) is None
    runs = [
        SimpleNamespace(speedup=1.0, candidate="first"),
        SimpleNamespace(speedup=1.2, candidate="last"),
        SimpleNamespace(speedup=0.0, candidate="failed"),
    ]
    chk = check_runs(runs, COSTS, [COSTS])
    assert seen[-1] == "last"  # the last run that finished
    assert chk.runs == 2 and close(chk.measured, math.sqrt(1.2))  # the geometric mean of 1.0 and 1.2 (core.stats)
    assert chk.measured_low <= 1.0 and chk.measured_high >= 1.2
    assert close(chk.predicted_range[0], PREDICTED)


def test_check_to_json():
    again = StepCosts(0.1, (1.0, 1.0, 1.0, 1.0))
    c = StepCosts(0.1, LINEAR, (0.0, 0.0, 0.0, 0.0), SRC)  # R = 0 measured: the same figures as COSTS
    j = check(RUN, c, 1.0, 1.0, 1.2, 3, [COSTS, again]).to_json()
    assert set(j) == {
        "alpha_per_position", "gamma", "tokens_per_step", "accepted_by_position", "accepted_by_position_source",
        "draft_cost_c", "verification_cost", "draft_reevaluation_cost", "sources", "terms", "ideal_speedup",
        "predicted_speedup", "predicted_range", "measured_speedup", "measured_low", "measured_high", "runs",
        "step_cost_measured", "step_cost_predicted", "agree", "agreement", "miss", "best_gamma", "best_speedup",
        "break_even_alpha", "break_even_c", "notes",
    }  # fmt: skip
    assert close(j["alpha_per_position"], 0.5) and j["gamma"] == 2.0 and close(j["tokens_per_step"], 1.75)
    assert j["accepted_by_position"] == [0.75, 0.0] and j["accepted_by_position_source"] == "the stream's labels"
    assert j["draft_cost_c"] == 0.1
    assert j["verification_cost"] == {"1": 1.0, "2": 1.2, "3": 1.4, "4": 1.6}
    assert j["draft_reevaluation_cost"] == {"1": 0.0, "2": 0.0, "3": 0.0, "4": 0.0}
    assert j["sources"] == SRC
    assert len(j["terms"]) == 5 and j["terms"][1]["term"] == "draft cost c" and j["terms"][1]["measured"] == "c = 0.100"
    assert close(j["ideal_speedup"], 1.75) and close(j["predicted_speedup"], PREDICTED)
    assert isinstance(j["predicted_range"], list) and close(j["predicted_range"][1], 7 / 4.8)
    assert (j["measured_speedup"], j["measured_low"], j["measured_high"], j["runs"]) == (1.0, 1.0, 1.2, 3)
    assert close(j["step_cost_measured"], 1.75) and close(j["step_cost_predicted"], 1.6)
    assert j["agree"] is True and j["agreement"] == INSIDE and j["miss"] is None
    assert j["best_gamma"] == 1 and close(j["best_speedup"], 1.5 / 1.3)
    assert close(j["break_even_alpha"], (-1 + math.sqrt(3.4)) / 2, 1e-8) and close(j["break_even_c"], 0.175)
    assert j["notes"] == []
    j = check(RUN, StepCosts(0.1, (1.0,), (), {}, False), 1.0).to_json()
    assert j["draft_reevaluation_cost"] is None and j["predicted_range"] is None and j["miss"] is not None
    assert j["best_gamma"] is None and j["best_speedup"] is None and j["break_even_c"] is None
    bare = check(RunSteps((2, 2), (1, 0), 0, 2), COSTS, 1.0).to_json()
    assert bare["accepted_by_position"] is None and bare["accepted_by_position_source"] == ""


def test_the_report_names_missing_sources_and_the_reevaluations_own():
    lines = check(RUN, StepCosts(0.1, LINEAR, (), {}), 1.0).text().split("\n")
    assert "draft cost c = 0.100 target steps per draft decode [?]" in lines
    assert "verification V(k) in target steps, k = 1…4: 1:1.00 2:1.20 3:1.40 4:1.60 [?]" in lines
    assert "draft re-evaluation R(k) = 0 [?]" in lines
    lines = check(RUN, StepCosts(0.1, LINEAR, (0.25,), SRC), 1.0).text().split("\n")
    assert "draft re-evaluation R(k): 1:0.25 [measured: r src]" in lines


def test_a_low_end_without_a_high_one_is_no_interval():
    import dataclasses

    chk = dataclasses.replace(check(RUN, COSTS, 1.0, 1.0, 1.2, 3), measured_high=None)
    assert "measured:                          1.00× (1 run: no interval)" in chk.text().split("\n")
    chk = dataclasses.replace(check(RUN, COSTS, 1.0, 1.0, 1.2, 3), measured_low=None)
    assert "measured:                          1.00× (1 run: no interval)" in chk.text().split("\n")


def test_check_defaults_plain_steps_and_a_short_gamma():
    chk = check(RUN, StepCosts(0.1, LINEAR), 1.0)
    assert chk.runs == 1 and [t.source for t in chk.terms[1:4]] == ["", "", ""]  # no sources given: blank
    # 2 steps of 2 drafted and 2 plain tokens: 6 tokens in 4 groups; 2 · (0.2 + 1.4) + 2 · (0.1 + 1.0) = 5.4
    chk = check(RunSteps((2, 2), (1, 1), 2, 2), COSTS, 1.0)
    assert close(chk.step_measured, 6 / 4) and close(chk.step_predicted, 5.4 / 4)
    # γ 0.25 rounds to 0: the break-even α is taken at γ 1, where 1 + α = 0.1 + V(2) = 1.3
    chk = check(RunSteps((1, 0, 0, 0), (0, 0, 0, 0), 0, 2), COSTS, 1.0)
    assert close(chk.break_even_alpha, 0.3, 1e-8)
    # a step that costs under one target step still predicts tokens / cost: 4 · 0.1 → 7 / 0.4
    cheap = StepCosts(0.0, (0.1, 0.1, 0.1, 0.1), (), {}, False)
    assert close(check(RUN, cheap, 1.0).predicted, 17.5)
    assert close(terms._predicted_range(RUN, [cheap])[0], 17.5)


def test_no_groups_give_no_step_costs():
    empty = RunSteps((), (), 0)
    ng = StepCosts(0.0, LINEAR, (), {}, False)
    chk = check(empty, ng, 1.0, 0.5, math.inf, 3)  # the interval holds the ideal's 1: untested, no miss
    assert math.isnan(chk.step_measured) and math.isnan(chk.step_predicted) and chk.miss is None


def test_assumed_terms_agree_where_the_interval_holds_the_ideal_too():
    ideal = StepCosts(0.1, LINEAR, (), {"c": "ideal", "verify": "ideal", "reeval": "ideal"})
    chk = check(RUN, ideal, 1.0, 1.0, 1.8, 3)  # holds 1.09 and the ideal 1.75
    assert chk.agree is True and chk.notes == ()
    assert check(RUN, COSTS, 1.0, 1.0, 1.8, 3).agree is None


def test_two_measured_k_give_a_best_gamma_of_one_and_a_low_end_alone_no_verdict():
    best, _, _ = terms._best_and_break_even(StepCosts(0.1, (1.0, 1.2)), 0.5, 2.0, 2)
    assert best[0] == 1 and close(best[1], 1.5 / 1.3)
    assert terms._agreement(1.0, None, 1.0, None, 5.0, False) == (None, None, None)
    assert terms._agreement(1.0, None, None, 1.0, 5.0, False) == (None, None, None)


def test_break_even_alpha_stays_below_one():
    # (γ + 1) / step just over 1, but the α it needs (0.9999999) is past the 0.999999 the speed-up holds α to
    be = terms._break_even_alpha(StepCosts(0.0, (1.0, 1.9999999)), 1)
    assert be is not None and 0.999999 < be < 1
