"""The speed-up interval keeps its 95 %: coverage simulated on ratios whose truth is known.

Run as a module to print the figures (`.venv/bin/python -m tests.unit.test_interval_coverage`), also for
heavy-tailed log ratios (t with 3 degrees of freedom), which the interval does not assume.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from spectui.core.stats import interval, over_units

TRIALS = 4000


def coverage(n: int, trials: int = TRIALS, seed: int = 0, draw=None) -> float:
    """How often interval() of n log-normal ratios (median 1.3, 5 % spread) contains the true 1.3."""
    rng = np.random.default_rng(seed)
    truth = 1.3
    logs = draw(rng, (trials, n)) if draw is not None else rng.normal(0.0, 0.05, size=(trials, n))
    hits = 0
    for row in np.exp(logs + math.log(truth)):
        s = interval(list(row))
        hits += s.contains(truth)
    return hits / trials


@pytest.mark.parametrize("n", [2, 3, 4, 6, 10])
def test_coverage_on_log_normal_ratios_is_95_percent(n):
    c = coverage(n, seed=n)
    assert 0.93 <= c <= 0.97, (n, c)


def test_one_run_gives_no_interval_and_says_why():
    s = interval([1.2])
    assert not s.measured and "too few for a 95 % interval" in s.text() and "1 run: no spread measured" in s.text()


def test_two_close_runs_are_not_called_faster():
    # the case that was wrong: --repeat 2 with ratios 1.10 and 1.12 printed [1.10–1.12] "faster"; two runs leave
    # the t-interval wide (t = 12.7 at one degree of freedom)
    s = interval([1.10, 1.12])
    assert s.low < 1.0 < s.high


def whole_set_coverage(prompts: int, runs: int, trials: int = 2000, seed: int = 1) -> float:
    """Prompts differ (their log speed-ups spread 10 %), runs of one prompt spread 3 %: the interval over
    prompts must cover the typical prompt's speed-up."""
    rng = np.random.default_rng(seed)
    truth = 0.8
    hits = 0
    for _ in range(trials):
        effects = rng.normal(0.0, 0.10, size=prompts)
        units = [list(np.exp(math.log(truth) + e + rng.normal(0.0, 0.03, size=runs))) for e in effects]
        hits += over_units(units).contains(truth)
    return hits / trials


def test_whole_set_interval_resamples_prompts_not_runs():
    c = whole_set_coverage(4, 3)
    assert 0.93 <= c <= 0.97, c


def _heavy(rng, shape):  # t with 3 degrees of freedom, scaled to a similar spread
    return rng.standard_t(3, size=shape) * 0.03


if __name__ == "__main__":
    for n in (2, 3, 4, 6, 10):
        print(
            f"N = {n:>2}: coverage log-normal {coverage(n, seed=n):.3f}, heavy-tailed (t3) "
            f"{coverage(n, seed=n, draw=_heavy):.3f}"
        )
    print(f"whole set, 4 prompts × 3 runs: {whole_set_coverage(4, 3):.3f}")
