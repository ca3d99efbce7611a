"""Issue 42: "agrees" only where the measured interval could have disagreed, its width shown; terms that
were assumed (--no-measure) never "account for" the speed-up nor give a break-even "with the measured costs"."""

from __future__ import annotations

from spectui.labs.theory.terms import RunSteps, StepCosts, check

MEASURED = {"c": "measured: a", "verify": "measured: b", "reeval": "measured: c"}
RUN = RunSteps(drafted=(4,) * 10, accepted=(3,) * 10, plain=0, n_max=4)
COSTS = StepCosts(0.05, (1.0, 1.2, 1.4, 1.6, 1.8), (), MEASURED)


def first() -> tuple[float, float]:
    probe = check(RUN, COSTS, 1.0, 0.5, 1.5, runs=3)
    return probe.predicted, probe.terms[0].speedup  # the prediction, and the ideal formula's speed-up


def test_a_narrow_interval_around_the_prediction_agrees_and_shows_its_width():
    predicted, ideal = first()
    assert ideal > predicted * 1.2  # the ideal promises more: a narrow interval can tell them apart
    chk = check(RUN, COSTS, predicted, predicted * 0.97, predicted * 1.03, runs=3)
    assert chk.agree is True
    text = chk.text()
    assert "account for the measured speed-up" in text
    assert f"(width {predicted * 0.06:.2f}×)" in text


def test_an_interval_that_holds_the_ideal_too_is_too_few_runs_not_agreement():
    predicted, ideal = first()
    chk = check(RUN, COSTS, predicted, predicted * 0.9, ideal * 1.1, runs=2)
    assert chk.agree is None and chk.miss is None
    text = chk.text()
    assert "too few runs to test the prediction" in text and "account for" not in text
    assert f"also holds the ideal formula's {ideal:.2f}×" in text


def test_assumed_terms_never_account_for_nor_give_a_measured_break_even():
    ideal_costs = StepCosts.ideal(0.0, "not measured (--no-measure)")
    assert ideal_costs.none_measured
    _, ideal = first()
    chk = check(RUN, ideal_costs, ideal, ideal * 0.9, ideal * 1.1, runs=3)
    text = chk.text()
    assert "account for" not in text
    assert "with the measured costs" not in text
    assert "with the ideal costs (c = 0, V = 1, R = 0 assumed)" in text
    assert "not a test of it" in text
