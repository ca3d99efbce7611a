"""Spread for repeated runs: medians, and percentile-bootstrap confidence intervals of a median.

A speed-up from one run is not reproducible on a shared machine; from N interleaved runs spectui
reports the median of the paired ratios with a 95 % interval. The bootstrap resamples with a fixed
seed, so the same runs always give the same interval.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Spread:
    median: float
    low: float | None  # None: fewer than 2 values, no interval measured
    high: float | None
    n: int
    level: float = 0.95

    @property
    def measured(self) -> bool:
        return self.low is not None

    def contains(self, value: float) -> bool:
        return self.low is not None and self.low <= value <= self.high

    def to_json(self) -> dict:
        return {"median": self.median, "low": self.low, "high": self.high, "n": self.n, "level": self.level}

    def text(self, fmt: str = ".2f", unit: str = "") -> str:
        if self.low is None:
            return f"{self.median:{fmt}}{unit} (1 run: no spread measured)"
        return f"{self.median:{fmt}}{unit} [{self.low:{fmt}}–{self.high:{fmt}}]"


def quantile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted values (numpy's default, 'linear')."""
    if not sorted_values:
        raise ValueError("no values")
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def bootstrap_median(values: list[float], level: float = 0.95, resamples: int = 10_000, seed: int = 0) -> Spread:
    """The median and a percentile-bootstrap interval for it."""
    vals = [float(v) for v in values]
    if not vals:
        raise ValueError("no values")
    med = statistics.median(vals)
    if len(vals) < 2:
        return Spread(med, None, None, len(vals), level)
    rng = random.Random(seed)
    n = len(vals)
    meds = sorted(statistics.median(rng.choices(vals, k=n)) for _ in range(resamples))
    alpha = (1 - level) / 2
    return Spread(med, quantile(meds, alpha), quantile(meds, 1 - alpha), n, level)
