"""Spread for repeated runs: the median of N runs with a 95 % interval whose coverage holds at small N.

A speed-up from one run is not reproducible on a shared machine; from N interleaved runs spectui reports
the median of the paired ratios with a 95 % t-interval on their logarithms (rates and ratios are
positive and multiplicative; on log-normal ratios the interval covers the typical ratio, the geometric
mean, which is also the median, with exactly 95 %). Chosen by simulation (tests/unit/test_interval_coverage.py,
`python -m tests.unit.test_interval_coverage`): the percentile bootstrap of the median that this module used
before covered 49 % at 2 runs, 75 % at 3, 88 % at 4; this one covers 95 % at every N ≥ 2. An
order-statistic interval for the median needs no model but exists only from 6 runs (the widest, [min,
max], covers 1 − 2·0.5^N: 94 % at 5) and jumps between 97.9 % and 89 % at 10, so it was not taken.

One run gives no interval ("too few runs for a 95 % interval"). Over a prompt set the unit is the prompt,
not the run: `over_units` takes each prompt's mean log ratio and puts the interval on those; its point value
is their geometric mean (the centre of that interval; `Spread.median` holds it), so the whole set's figure is
the one `spectui prove` reports for the same runs.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

LEVEL = 0.95
METHOD = "t-interval on log values"
# an interval within ±2 % of 1.00 is no measurable difference: two identical llama-servers ran 1.3 % apart
# here in all 5 interleaved runs (server-timed), an effect of the processes, not of speculation
TOLERANCE = 0.02

# the words a speed-up's interval earns (speed_call); "faster" only where the whole interval lies above 1
FASTER, SLOWER, NO_DIFFERENCE = "faster", "slower", "no measurable difference"
NO_INTERVAL, TOO_FEW_RUNS = "no interval", "too few runs to judge"
MIN_DF = 2  # degrees of freedom a certificate's speed-up needs for a word: 3 runs of a prompt, or 2 runs of 2


@dataclass(frozen=True)
class Spread:
    median: float
    low: float | None  # None: no interval (`reason` says why)
    high: float | None
    n: int
    level: float = LEVEL
    method: str | None = None  # how the interval was made
    reason: str | None = None  # why there is none

    @property
    def measured(self) -> bool:
        return self.low is not None

    def contains(self, value: float) -> bool:
        return self.low is not None and self.high is not None and self.low <= value <= self.high

    def to_json(self) -> dict:
        return {
            "median": self.median,
            "low": self.low,
            "high": self.high,
            "n": self.n,
            "level": self.level,
            "method": self.method,
            "reason": self.reason,
        }

    def text(self, fmt: str = ".2f", unit: str = "") -> str:
        if self.low is None:
            return f"{self.median:{fmt}}{unit} ({self.reason or 'no interval'})"
        return f"{self.median:{fmt}}{unit} [{self.low:{fmt}}–{self.high:{fmt}}]"


def speed_call(
    low: float | None, high: float | None, df: int | None = None, min_df: int = 0, tolerance: float = TOLERANCE
) -> str:
    """THE word on a speed-up, from its 95 % interval alone: `faster` where the interval lies above 1×,
    `slower` where it lies below, `no measurable difference` where it holds 1× or stays within ±tolerance of
    it. A value without an interval (one run, one prompt) is a point, never a verdict on speed: `no
    interval`; an interval on fewer than `min_df` degrees of freedom earns none either. Every view (the
    headline, compare's per-prompt line, the certificate's verdict line) takes its word from here."""
    if low is None or high is None:
        return NO_INTERVAL
    if df is not None and df < min_df:
        return TOO_FEW_RUNS
    if low <= 1.0 <= high or (1 - tolerance <= low and high <= 1 + tolerance):
        return NO_DIFFERENCE
    return FASTER if low > 1.0 else SLOWER


def quantile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted values (numpy's default, 'linear')."""
    if not sorted_values:
        raise ValueError("no values")
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _too_few(n: int, what: str = "run") -> str:
    return (
        f"{n} {what}{'s' if n != 1 else ''}: no spread measured; too few for a {LEVEL * 100:.0f} % interval, it needs 2"
    )


def log_t_bounds(logs: list[float], level: float = LEVEL) -> tuple[float, float] | None:
    """The t-interval for the mean of `logs`, exponentiated; None below 2 values."""
    n = len(logs)
    if n < 2:
        return None
    from scipy import stats  # lazy: scipy (~3 s cold) only for an interval; spectui --help stays fast

    mean = statistics.fmean(logs)
    sd = statistics.stdev(logs)
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return math.exp(mean - half), math.exp(mean + half)


def interval(values: list[float], level: float = LEVEL) -> Spread:
    """The median of positive values (rates, ratios, times) and a t-interval on their logarithms."""
    vals = [float(v) for v in values]
    if not vals:
        raise ValueError("no values")
    med = statistics.median(vals)
    if any(not (v > 0 and math.isfinite(v)) for v in vals):
        return Spread(med, None, None, len(vals), level, reason="a value is not positive: no interval on its log")
    bounds = log_t_bounds([math.log(v) for v in vals], level)
    if bounds is None:
        return Spread(med, None, None, len(vals), level, reason=_too_few(len(vals)))
    return Spread(med, bounds[0], bounds[1], len(vals), level, method=METHOD)


def ratio_interval(values: list[float], level: float = LEVEL) -> Spread:
    """A speed-up over N paired runs: the geometric mean of the ratios — the centre of their t-interval on
    logs, and the figure a certificate, the whole set and every view give for the same runs (one run, one
    speed-up) — with that interval; the median where a ratio is not positive (no logarithm)."""
    spread = interval(values, level)
    vals = [float(v) for v in values]
    if not all(v > 0 and math.isfinite(v) for v in vals):
        return spread
    geo = math.exp(statistics.fmean(math.log(v) for v in vals))
    method = f"geometric mean, {spread.method}" if spread.method else None
    return Spread(geo, spread.low, spread.high, spread.n, spread.level, method, spread.reason)


def unit_geomean(units: list[list[float]]) -> float:
    """over_units' point value alone (no scipy: `spectui sessions` shows it for every file): the geometric
    mean over the units of each unit's geometric mean — the centre of over_units' interval, and the figure
    `spectui prove` reports for the same set (run.prove.setstats), so one run never shows two speed-ups; the
    plain median where a value is not positive (no logarithm)."""
    units = [[float(v) for v in u] for u in units if u]
    if not units:
        raise ValueError("no values")
    if any(not (v > 0 and math.isfinite(v)) for u in units for v in u):
        return statistics.median(v for u in units for v in u)
    return math.exp(statistics.fmean(statistics.fmean(math.log(v) for v in u) for u in units))


def over_units(units: list[list[float]], level: float = LEVEL, what: str = "prompt") -> Spread:
    """The spread over a set whose unit is not the run (the prompts of a set, each run N times): each
    unit's runs are summarised by their mean log value, and the interval is over the units, so N runs of
    one prompt count as one observation of that prompt, not N independent ones."""
    units = [[float(v) for v in u] for u in units if u]
    med = unit_geomean(units)
    if any(not (v > 0 and math.isfinite(v)) for u in units for v in u):
        return Spread(med, None, None, len(units), level, reason="a value is not positive: no interval on its log")
    means = [statistics.fmean(math.log(v) for v in u) for u in units]
    bounds = log_t_bounds(means, level)
    if bounds is None:
        return Spread(med, None, None, len(units), level, reason=_too_few(len(units), what))
    return Spread(
        med,
        bounds[0],
        bounds[1],
        len(units),
        level,
        method=f"geometric mean over {what}s, {METHOD}, one value per {what}",
    )
