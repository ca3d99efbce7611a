"""Medians and bootstrap intervals on fixed inputs, against values computed by hand."""

import pytest

from spectui.core.stats import bootstrap_median, quantile


def test_quantile_is_linear_interpolation():
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.25) == pytest.approx(1.75)  # (4-1)*0.25 = 0.75 of the way from 1 to 2
    assert quantile([5.0], 0.9) == 5.0


def test_constant_runs_have_a_zero_width_interval():
    s = bootstrap_median([2.0] * 5)
    assert (s.median, s.low, s.high, s.n) == (2.0, 2.0, 2.0, 5)


def test_one_run_measures_no_spread():
    s = bootstrap_median([0.3])
    assert s.low is None and not s.measured and "1 run: no spread measured" in s.text()


def test_five_values_interval_by_hand():
    # For 1..5 the bootstrap median is the smallest value when at least 3 of 5 draws are 1:
    # C(5,3)(1/5)^3(4/5)^2 + C(5,4)(1/5)^4(4/5) + (1/5)^5 = 0.0579 > 0.025, so the 2.5 % quantile is 1
    # (and by symmetry the 97.5 % quantile is 5).
    s = bootstrap_median([1, 2, 3, 4, 5])
    assert (s.median, s.low, s.high) == (3, 1, 5)


def test_verdicts():
    from spectui.core.events import StreamFinished
    from spectui.core.figures import SideRecorder
    from spectui.core.runner import PromptResult, Repeated
    from spectui.core.types import Prompt

    def runs(ratios):
        out = []
        for k, q in enumerate(ratios, 1):
            r = PromptResult(Prompt("p"), SideRecorder("b"), SideRecorder("c"), run=k, runs=len(ratios))
            r.baseline.figures.decode_tps, r.candidate.figures.decode_tps = 100.0, 100.0 * q
            for side in (r.baseline, r.candidate):  # a speed-up exists only where both sides finished
                side.finished = StreamFinished(1, "limit")
            out.append(r)
        return Repeated(Prompt("p"), out)

    assert runs([0.29, 0.30, 0.31, 0.28, 0.30]).verdict == "slower"
    assert runs([1.2, 1.3, 1.25]).verdict == "faster"
    assert runs([0.98, 1.03, 1.01, 0.99, 1.0]).verdict == "no measurable difference"
    assert runs([1.004, 1.013, 1.016, 1.01, 1.015]).verdict == "no measurable difference"  # inside ±2 %
    assert runs([1.03, 1.05, 1.04]).verdict == "faster"
    assert runs([0.5]).verdict == "1 run: no spread measured"
