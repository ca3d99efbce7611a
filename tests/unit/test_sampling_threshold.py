"""What "consistent" promises: a sampled comparison says `consistent` only where it could have
found a TVD of DECIDE_TVD (0.5) at one position with 80 % probability; where it could find only larger
ones it says "not enough samples to decide (could detect only TVD ≥ x)". Simulated on token sequences whose
truth is known (tests/unit/test_sampling_power.py's six-token distribution): at such a sample count a real
TVD of 0.5 goes unfound more often than the 20 % that "consistent" allows, so calling it consistent would
promise what the run could not see."""

from __future__ import annotations

import numpy as np

from spectui.labs.sampling.twosample import DECIDE_TVD, NOT_ENOUGH, distribution_test
from tests.unit.test_sampling_power import draw

K = 8


def test_too_few_samples_to_find_a_tvd_of_a_half_are_not_called_consistent():
    from scipy.stats import binomtest

    rng = np.random.default_rng(36)
    n = 6
    t = distribution_test(draw(rng, n, K), draw(rng, n, K), K, seed=1)  # both sides the same distribution
    assert t.p >= 0.05 and t.detectable is not None and t.detectable > DECIDE_TVD, (t.p, t.detectable)
    assert t.verdict == NOT_ENOUGH and f"could detect only TVD ≥ {t.detectable:.2f}" in (t.reason or "")
    # the meaning: at this N a true TVD of 0.5 at one position is found well under 80 % of the time
    trials = 80
    found = sum(
        distribution_test(
            draw(rng, n, K), draw(rng, n, K, shifted=int(rng.integers(K))), K, seed=i, detect=False, permutations=199
        ).verdict
        == "different"
        for i in range(trials)
    )
    assert binomtest(found, trials, 0.8, alternative="less").pvalue < 0.01, found


def test_enough_samples_are_still_called_consistent():
    rng = np.random.default_rng(7)
    t = distribution_test(draw(rng, 40, K), draw(rng, 40, K), K, seed=2)
    assert t.detectable is not None and t.detectable <= DECIDE_TVD and t.verdict == "consistent", t.detectable
