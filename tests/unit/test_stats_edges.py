"""core.stats at its edges, each value worked by hand in the test: the ends of an interval, a quantile in
the last gap, a value with no logarithm over prompts, and the words shown where there is no interval
(MUTATION.md: the survivors of core/stats these kill)."""

import math

import pytest

from spectui.core.stats import Spread, over_units, quantile


def test_an_interval_contains_its_own_ends():
    s = Spread(1.0, 0.9, 1.1, 3)
    assert s.contains(0.9) and s.contains(1.1) and s.contains(1.0)
    assert not s.contains(0.899) and not s.contains(1.101)
    assert not Spread(1.0, None, None, 1).contains(1.0)  # no interval contains nothing


def test_a_quantile_in_the_last_gap_interpolates_towards_the_largest_value():
    # (4 - 1) · 0.9 = 2.7: 0.7 of the way from the third value (3) to the fourth (4)
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.9) == pytest.approx(3.7)
    assert quantile([1.0, 2.0, 3.0, 4.0], 1.0) == 4.0
    with pytest.raises(ValueError, match="^no values$"):
        quantile([], 0.5)


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_over_prompts_a_value_with_no_logarithm_gives_the_plain_median_and_no_interval(bad):
    # every value pooled: sorted (bad, 1, 2, 3), median (1 + 2) / 2 = 1.5; no logarithm of `bad`
    s = over_units([[1.0, bad], [2.0], [3.0]])
    assert (s.median, s.low, s.high, s.n) == (1.5, None, None, 3)
    assert s.reason == "a value is not positive: no interval on its log"


def test_no_interval_and_no_reason_reads_no_interval():
    assert Spread(1.234, None, None, 1).text() == "1.23 (no interval)"
    assert Spread(1.234, None, None, 1, reason="why").text(".1f", "×") == "1.2× (why)"


def test_an_infinite_median_is_written_as_python_writes_it():
    # f"{inf:.2f}" is "inf" (Python's format spec); an upper-case format would give "INF"
    assert Spread(math.inf, None, None, 2, reason="r").text() == "inf (r)"


def test_over_prompts_at_another_level_the_interval_takes_that_levels_t_quantile():
    # the prompts' mean logs 0, 0.1, 0.2 (sd 0.1); at 90 %: t(0.95, 2 df) = 2.919986 (a t table),
    # 0.1 ± 2.919986 · 0.1 / √3 = 0.1 ± 0.168585
    units = [[1.0, 1.0], [math.exp(0.05), math.exp(0.15)], [math.exp(0.2)]]
    s = over_units(units, level=0.9)
    assert (s.n, s.level) == (3, 0.9)
    assert s.low == pytest.approx(math.exp(0.1 - 0.168585), rel=1e-5)
    assert s.high == pytest.approx(math.exp(0.1 + 0.168585), rel=1e-5)
    # a value with no logarithm keeps the level it was asked for, with no interval
    bad = over_units([[1.0, 0.0], [2.0], [3.0]], level=0.9)
    assert (bad.n, bad.level, bad.low) == (3, 0.9, None)


def test_one_prompt_gives_its_geometric_mean_and_says_why_there_is_no_interval():
    s = over_units([[1.1, 1.2]])
    assert s.median == pytest.approx(math.sqrt(1.1 * 1.2))
    assert (s.low, s.high, s.n, s.level) == (None, None, 1, 0.95)
    assert s.reason == "1 prompt: no spread measured; too few for a 95 % interval, it needs 2"
    assert over_units([[1.1, 1.2]], level=0.9).level == 0.9


def test_no_values_at_all_is_refused_in_those_words():
    from spectui.core.stats import interval, unit_geomean

    for empty in ([], [[], []]):  # units with no runs are dropped first
        with pytest.raises(ValueError, match="^no values$"):
            unit_geomean(empty)
    with pytest.raises(ValueError, match="^no values$"):
        interval([])


def test_a_speedups_interval_at_another_level_and_its_point_the_geometric_mean():
    from spectui.core.stats import ratio_interval

    # logs 0, 0.1, 0.2: geometric mean e^0.1; at 90 %, 0.1 ± 2.919986 · 0.1 / √3 (as above)
    s = ratio_interval([1.0, math.exp(0.1), math.exp(0.2)], level=0.9)
    assert s.median == pytest.approx(math.exp(0.1))
    assert (s.n, s.level, s.method) == (3, 0.9, "geometric mean, t-interval on log values")
    assert s.low == pytest.approx(math.exp(0.1 - 0.168585), rel=1e-5)
    one = ratio_interval([1.5])
    assert one.median == pytest.approx(1.5)
    assert (one.low, one.high, one.n, one.level, one.method) == (None, None, 1, 0.95, None)
    assert ratio_interval([1.5], level=0.9).level == 0.9
    assert one.reason == "1 run: no spread measured; too few for a 95 % interval, it needs 2"


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_a_speedup_with_no_logarithm_is_the_plain_median_without_an_interval(bad):
    from spectui.core.stats import ratio_interval

    s = ratio_interval([1.0, bad, 2.0])  # sorted (bad, 1, 2): median 1
    assert (s.median, s.low, s.n) == (1.0, None, 3)
    assert s.reason == "a value is not positive: no interval on its log"
    assert ratio_interval([1.0, bad, 2.0], level=0.9).level == 0.9
