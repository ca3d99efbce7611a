"""The sampling lab's statistics on fixed inputs, against hand computations."""

import pytest

from spectui.labs.sampling import holm, permutation_test, pooled, tvd


def test_tvd_by_hand():
    # a: x 3/4, y 1/4; b: x 1/4, y 3/4 → TVD = (|3/4-1/4| + |1/4-3/4|)/2 = 1/2
    assert tvd(list("xxxy"), list("xyyy")) == pytest.approx(0.5)
    assert tvd(list("ab"), list("ab")) == 0.0


def test_holm_by_hand():
    # sorted 0.01, 0.02, 0.04 with m = 3: 3·0.01 = 0.03, 2·0.02 = 0.04, 1·0.04 = 0.04 (monotone)
    assert holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])


def test_identical_samples_have_p_one():
    observed, p, _ = permutation_test([1] * 10 + [2] * 10, [1] * 10 + [2] * 10)
    assert observed == 0.0 and p == 1.0


def test_rare_tokens_are_pooled():
    a, b = pooled([1, 1, 1, 1, 1, 2], [1, 3])
    assert a == [1, 1, 1, 1, 1, ("other",)] and b == [1, ("other",)]
