"""Medians and their intervals on fixed inputs, against values computed by hand."""

import math

import pytest

from spectui.core.stats import interval, over_units, quantile


def test_quantile_is_linear_interpolation():
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.25) == pytest.approx(1.75)  # (4-1)*0.25 = 0.75 of the way from 1 to 2
    assert quantile([5.0], 0.9) == 5.0


def test_constant_runs_have_a_zero_width_interval():
    s = interval([2.0] * 5)
    assert (s.median, s.low, s.high, s.n) == (2.0, pytest.approx(2.0), pytest.approx(2.0), 5)


def test_one_run_measures_no_spread():
    s = interval([0.3])
    assert s.low is None and not s.measured and "1 run: no spread measured" in s.text()


def test_three_values_interval_by_hand():
    # logs of e^0, e^0.1, e^0.2: mean 0.1, sd 0.1, t(0.975, 2) = 4.3027: 0.1 ± 4.3027·0.1/√3 = 0.1 ± 0.2484
    s = interval([1.0, math.exp(0.1), math.exp(0.2)])
    assert s.median == pytest.approx(math.exp(0.1))
    assert s.low == pytest.approx(math.exp(0.1 - 0.248414), rel=1e-5)
    assert s.high == pytest.approx(math.exp(0.1 + 0.248414), rel=1e-5)


def test_over_units_takes_one_value_per_prompt():
    # three prompts, their runs' mean logs 0, 0.1 and 0.2: the same interval as three single values,
    # however many runs each prompt had
    units = [[1.0, 1.0, 1.0, 1.0], [math.exp(0.05), math.exp(0.15)], [math.exp(0.2)]]
    s = over_units(units)
    assert s.n == 3 and s.low == pytest.approx(math.exp(0.1 - 0.248414), rel=1e-5)
    assert "too few" in over_units([[1.1, 1.2, 1.3]]).text()
    # the point is the centre of that interval: the geometric mean of the prompts' mean logs (0.1), not
    # their median (here also 0.1): see the skewed set below
    assert s.median == pytest.approx(math.exp(0.1))


def test_the_whole_sets_figure_is_the_one_prove_reports_for_the_same_runs():
    from spectui.run.prove.setstats import set_speedup

    # prompts' mean logs 0, 0.1 and 0.8: median exp(0.1) = 1.105, geometric mean exp(0.3) = 1.350
    units = [[1.0, 1.0], [math.exp(0.05), math.exp(0.15)], [math.exp(0.7), math.exp(0.9)]]
    s = over_units(units)
    assert s.median == pytest.approx(math.exp(0.3)) and s.contains(s.median)
    cert = set_speedup(units)
    assert cert is not None and cert["value"] == pytest.approx(s.median)
    assert cert["over_prompts"]["median"] == pytest.approx(cert["value"])


def test_a_value_that_is_not_positive_has_no_interval():
    assert not interval([1.0, 0.0, 2.0]).measured


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
    assert runs([1.10, 1.12]).verdict == "no measurable difference"  # two runs: the interval is wide


def test_a_speedup_across_two_clocks_says_so():
    # llama.cpp's server-timed rate over vLLM's observed one is one ratio of two clocks
    from spectui.core.events import StreamFinished
    from spectui.core.figures import SideRecorder
    from spectui.core.report import speedup_text
    from spectui.core.runner import PromptResult, Repeated
    from spectui.core.types import Prompt

    r = PromptResult(Prompt("p"), SideRecorder("b"), SideRecorder("c"))
    for side, tps, source in ((r.baseline, 50.0, "server timings"), (r.candidate, 60.0, "observed")):
        side.figures.decode_tps, side.figures.decode_source = tps, source
        side.finished = StreamFinished(1, "limit")
    assert "mixes two clocks" in speedup_text(r)
    assert "mixes two clocks" in Repeated(Prompt("p"), [r]).to_json()["rate_note"]
    r.candidate.figures.decode_source = "server timings"
    assert "clocks" not in speedup_text(r) and Repeated(Prompt("p"), [r]).rate_note is None


# -- speed_call: the one word on a speed-up, from its interval ------------------------------------------
@pytest.mark.parametrize(
    ("low", "high", "df", "word"),
    [
        (1.05, 1.30, None, "faster"),  # the whole interval above 1×
        (0.70, 0.95, None, "slower"),
        (0.90, 1.20, None, "no measurable difference"),  # holds 1×
        (1.005, 1.019, None, "no measurable difference"),  # above 1×, but within ±2 % of it
        (None, None, None, "no interval"),  # one run: a point, never a word on speed
        (1.05, 1.30, 1, "too few runs to judge"),  # under the certificate's 2 degrees of freedom
    ],
)
def test_speed_call_says_faster_only_where_the_interval_lies_above_one(low, high, df, word):
    from spectui.core.stats import MIN_DF, speed_call

    assert speed_call(low, high, df, MIN_DF) == word


def test_faster_is_a_promise_the_interval_keeps_when_nothing_is_faster():
    """Simulated: two equal servers (true ratio 1×, log-normal noise as measured here), 3 runs: the word
    "faster" is said in at most 2.5 % + a margin of the cases (one tail of a 95 % interval)."""
    import random

    from spectui.core.stats import ratio_interval, speed_call

    rng = random.Random(7)
    trials, said = 2000, 0
    for _ in range(trials):
        s = ratio_interval([math.exp(rng.gauss(0.0, 0.08)) for _ in range(3)])
        said += speed_call(s.low, s.high) == "faster"
    assert said / trials < 0.035
