"""Two samples of token sequences (a baseline's and a candidate's completions of one prompt): one
permutation test over the whole sequence, and the smallest TVD at one position it would have found.

The side labels of whole samples are permuted; the statistic is the largest over positions of that
position's total variation distance (TVD) between the two sides' token distributions, standardised by its
mean and spread under relabelling, so one test covers every position (no per-position correction) and a
position where tokens vary a lot by chance does not drown the others. Every token is its own category
(nothing pooled) and a sample that ended is a category of its own at the positions after its end.
scipy.stats.permutation_test runs it, exactly over every relabelling where there are few enough. The
detectable TVD is simulated on the samples themselves (`_detectable_at` says how), and verified against
ground truth in tests/unit/test_sampling_power.py.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

ALPHA = 0.05
PERMUTATIONS = 999  # one test, not one per position: its smallest p, 1/1000, is far below ALPHA
PILOT = 400  # relabellings that give each position's TVD mean and spread under the null
POWER = 0.8  # the detectable TVD is the one found with this probability
SIMULATIONS = 200  # simulated sample sets per TVD tried when computing the detectable TVD
TVD_GRID = [i / 20 for i in range(1, 21)]  # 0.05 … 1.00
NOT_ENOUGH = "not enough samples to decide"
# "consistent" only where the run could have found a TVD of this much at one position (80 % power): a
# difference in half the probability mass of one token's distribution is one a user cares about; a run that
# could only find larger ones cannot decide (tests/unit/test_sampling_threshold.py simulates what it means)
DECIDE_TVD = 0.5


def tvd(a: list, b: list) -> float:
    """Total variation distance between the empirical distributions of two samples."""
    ca, cb = Counter(a), Counter(b)
    na, nb = len(a), len(b)
    return 0.5 * sum(abs(ca[k] / na - cb[k] / nb) for k in ca.keys() | cb.keys())


def encode(a: list[list], b: list[list], k: int):
    """Samples (token sequences) of both sides as an (len(a)+len(b)) × K integer matrix: per position each
    distinct token is numbered from 1, 0 meaning the sample had ended there. K is the longest sample,
    at most k."""
    samples = list(a) + list(b)
    width = min(k, max((len(s) for s in samples), default=0))
    codes = np.zeros((len(samples), width), dtype=np.int64)
    for pos in range(width):
        seen: dict = {}
        for i, s in enumerate(samples):
            if pos < len(s):
                codes[i, pos] = seen.setdefault(s[pos], len(seen) + 1)
    return codes


class _Tables:
    """One-hot counts of every position's categories, and the TVD of every position for many labellings
    at once (one matrix product per batch)."""

    def __init__(self, codes, n_a: int):
        self.np = np
        self.n, self.width = codes.shape
        self.n_a, self.n_b = n_a, self.n - n_a
        sizes = codes.max(axis=0) + 1 if self.width else np.zeros(0, dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        # counts are whole numbers below 2^24: float32 products are exact, and several times faster
        self.onehot = np.zeros((self.n, int(sizes.sum())), dtype=np.float32)
        if self.width:
            self.onehot[np.arange(self.n)[:, None], self.starts[None, :] + codes] = 1.0
        self.totals = self.onehot.sum(axis=0, dtype=np.float64)

    def tvds(self, member):
        """TVD per position (b × K) for b labellings, `member` (b × n) marking each one's side A."""
        np = self.np
        ca = (member.astype(np.float32, copy=False) @ self.onehot).astype(np.float64)
        diff = np.abs(ca / self.n_a - (self.totals - ca) / self.n_b)
        return 0.5 * np.add.reduceat(diff, self.starts, axis=1) if self.width else np.zeros((len(member), 0))


def _random_sides(rng, count: int, n: int, n_a: int):
    """`count` random labellings of n samples into n_a and n − n_a, as 0/1 rows."""
    idx = np.argsort(rng.random((count, n)), axis=1)[:, :n_a]
    member = np.zeros((count, n), dtype=np.float32)
    np.put_along_axis(member, idx, 1.0, axis=1)
    return member


@dataclass
class PositionTest:
    position: int
    n: tuple[int, int]  # samples on each side
    tvd: float  # between the two sides' token distributions here
    tvd_by_chance: float  # its mean under random relabelling: the plug-in TVD is biased upward at small N
    z: float | None  # (tvd − by chance) / spread under relabelling; None: nothing varies here
    p_adjusted: float  # this position's p within the whole test (single-step max-statistic adjustment)
    detectable: float | None = None  # the TVD here found with 80 % probability; None: not even 1.0

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class DistributionTest:
    """The whole-sequence test and what it could have found."""

    p: float
    statistic: float | None  # the largest standardised TVD over the positions
    relabellings: int  # how many the null distribution holds
    exact: bool  # every relabelling (else a random PERMUTATIONS of them)
    p_floor: float  # the smallest p any outcome could have given
    positions: list[PositionTest]
    n: tuple[int, int]
    detectable: float | None = None  # the largest of the positions' (None: some position not even 1.0)
    detect_computed: bool = False
    reason: str | None = None  # why not enough samples, where that is the verdict

    @property
    def tested(self) -> int:
        return sum(1 for t in self.positions if t.z is not None)

    @property
    def verdict(self) -> str:
        if self.reason is not None:
            return NOT_ENOUGH
        return "different" if self.p < ALPHA else "consistent"

    def to_json(self) -> dict:
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "p": self.p,
            "level": ALPHA,
            "statistic": self.statistic,
            "method": "permutation test over whole samples, largest standardised per-position TVD",
            "relabellings": self.relabellings,
            "exact": self.exact,
            "p_floor": self.p_floor,
            "samples": list(self.n),
            "positions_tested": self.tested,
            "smallest_detectable_tvd": self.detectable,
            "detectable_at_power": POWER,
        }


def distribution_test(
    a: list[list], b: list[list], k: int, seed: int = 0, detect: bool = True, permutations: int = PERMUTATIONS
) -> DistributionTest:
    """The two sides' samples (token sequences) compared by one permutation test over the whole sequence;
    with `detect`, the smallest TVD at one position it finds with 80 % probability (by simulation)."""
    n_a, n_b = len(a), len(b)
    if n_a < 2 or n_b < 2:
        reason = f"{n_a} and {n_b} samples finished on the two sides: at least 2 a side are needed"
        return DistributionTest(1.0, None, 0, False, 1.0, [], (n_a, n_b), reason=reason)
    codes = encode(a, b, k)
    n = n_a + n_b
    partitions = math.comb(n, n_a)
    exact = partitions <= permutations
    # a symmetric statistic gives a labelling and its mirror (equal sides) the same value
    p_floor = (2 if n_a == n_b else 1) / partitions if exact else 1 / (permutations + 1)
    if codes.shape[1] == 0:
        reason = "no position to test: every sample was empty"
        return DistributionTest(1.0, None, 0, exact, p_floor, [], (n_a, n_b), reason=reason)

    tables = _Tables(codes, n_a)
    mean, spread = _null_moments(codes, n_a, seed)
    tested = spread > 1e-12
    observed = tables.tvds(np.concatenate([np.ones(n_a), np.zeros(n_b)])[None, :])[0]

    def standardised(tvds):
        z = np.full(tvds.shape, -np.inf)
        z[..., tested] = (tvds[..., tested] - mean[tested]) / spread[tested]
        return z

    if tested.any():
        null, p, stat = _permutation_test(tables, n_a, n, standardised, permutations, seed)
    else:  # no relabelling moves any position's TVD
        null, p, stat = np.full(1, -np.inf), 1.0, None
    positions = _position_tests((n_a, n_b), observed, mean, standardised(observed), tested, null, exact)
    out = DistributionTest(p, stat, len(null) if tested.any() else 0, exact, p_floor, positions, (n_a, n_b))
    out.reason = _untestable(codes, n_a, n_b, p_floor, tested)
    if out.reason is None and detect:
        _find_detectable(out, codes, n_a, null, exact, tested, seed)
    return out


def _position_tests(n: tuple[int, int], observed, mean, z_obs, tested, null, exact: bool) -> list[PositionTest]:
    """Each position's TVD, its mean under relabelling, its standardised TVD and its p within the whole test
    (the largest over positions must reach it); a position no relabelling moves is untested (p 1)."""
    add = 0 if exact else 1

    def p_of(z):
        return (len(null) - np.searchsorted(null, np.asarray(z) - 1e-9, side="left") + add) / (len(null) + add)

    return [
        PositionTest(
            pos,
            n,
            float(observed[pos]),
            float(mean[pos]),
            float(z_obs[pos]) if tested[pos] else None,
            float(min(1.0, p_of(z_obs[pos]))) if tested[pos] else 1.0,
        )
        for pos in range(len(observed))
    ]


def _permutation_test(tables: _Tables, n_a: int, n: int, standardised, permutations: int, seed: int):
    """scipy's permutation test of the largest standardised TVD over positions: its null distribution (sorted),
    p and statistic."""
    from scipy import stats  # lazy: scipy.stats (~4 s cold, 0.2 s warm), only when a test runs

    def statistic(x, axis=-1):  # x: (…, n_a) indices of the samples labelled as side A
        x = np.asarray(x).astype(np.int64)
        flat = x.reshape(-1, n_a)
        member = np.zeros((flat.shape[0], n), dtype=np.float32)
        np.put_along_axis(member, flat, 1.0, axis=1)
        return standardised(tables.tvds(member)).max(axis=1).reshape(x.shape[:-1])

    res = stats.permutation_test(
        (np.arange(n_a), np.arange(n_a, n)),
        lambda x, y, axis=-1: statistic(x, axis),
        permutation_type="independent",
        vectorized=True,
        n_resamples=permutations,
        alternative="greater",
        rng=np.random.default_rng(seed),
    )
    return np.sort(np.asarray(res.null_distribution, dtype=float)), float(res.pvalue), float(res.statistic)


def _untestable(codes, n_a: int, n_b: int, p_floor: float, tested) -> str | None:
    """Why these samples cannot decide at all, whatever they hold: no outcome can reach p < ALPHA, or no
    position where the tokens differ can be tested; None where the test can decide."""
    if p_floor >= ALPHA:
        return (
            f"with {n_a} and {n_b} samples no outcome of the test can reach p < {ALPHA} (its smallest p is "
            f"{p_floor:.2g}): more samples are needed"
        )
    constant = np.array([len(np.unique(codes[:, pos])) == 1 for pos in range(codes.shape[1])])
    if not tested.any() and not constant.all():
        return (
            "no position could be tested: where the tokens differ, every relabelling of the samples gives the "
            "same TVD (each token seen once): more samples are needed"
        )
    return None


def _find_detectable(out: DistributionTest, codes, n_a: int, null, exact: bool, tested, seed: int) -> None:
    """The smallest TVD at each position the test finds with POWER probability, the largest of them, and why
    more samples are needed where that is beyond what a decision needs."""
    n_b, p, positions = out.n[1], out.p, out.positions
    crit = _critical(null, exact) if tested.any() else -np.inf  # else each position's own null decides
    for t in positions:
        t.detectable = _detectable_at(codes, n_a, t.position, crit, seed)
    found = [t.detectable for t in positions]
    known = [f for f in found if f is not None]
    out.detectable = None if len(known) < len(found) else max(known)
    out.detect_computed = True
    if out.detectable is None and p >= ALPHA:
        worst = next(t.position for t in positions if t.detectable is None)
        out.reason = (
            f"with {n_a} and {n_b} samples not even a TVD of 1 at token {worst} would be found with "
            f"{POWER * 100:.0f} % probability: more samples are needed"
        )
    elif out.detectable is not None and out.detectable > DECIDE_TVD and p >= ALPHA:
        out.reason = (
            f"could detect only TVD ≥ {out.detectable:.2f} at one position ({POWER * 100:.0f} % power), more "
            f"than the {DECIDE_TVD} a decision needs: more samples are needed"
        )


def _null_moments(codes, n_a: int, seed: int):
    """Each position's TVD mean and spread over PILOT random relabellings of the pooled samples, taken in
    a canonical order so that they depend on the pool alone, not on which side a sample came from (the
    test stays exact with them fixed)."""
    order = np.lexsort(codes.T[::-1]) if codes.shape[1] else np.arange(len(codes))
    pool = codes[order]
    tables = _Tables(pool, n_a)
    tv = tables.tvds(_random_sides(np.random.default_rng(seed + 1), PILOT, len(pool), n_a))
    return tv.mean(axis=0), tv.std(axis=0)


def _critical(null, exact: bool) -> float:
    """The smallest standardised TVD whose p in the whole test is below ALPHA."""
    add = 0 if exact else 1
    # p(z) = (#null ≥ z + add)/(len + add) < ALPHA ⇔ #null ≥ z < ALPHA·(len + add) − add
    allowed = math.ceil(ALPHA * (len(null) + add) - add) - 1  # how many null values may reach z
    if allowed < 0:
        return np.inf
    return float(null[len(null) - 1 - allowed]) if allowed < len(null) else -np.inf


def _power_at(codes, n_a: int, pos: int, crit: float, seed: int):
    """The simulation _detectable_at bisects: power(d), the share of SIMULATIONS random splits in which the
    test rejects once the second side's distribution at `pos` is moved by TVD d."""
    n = len(codes)
    n_b = n - n_a
    col = codes[:, pos]
    counts = np.bincount(col)
    top = int(np.argmax(counts))
    p_top = counts[top] / n
    new = len(counts)  # a category the samples never show at this position
    onehot = np.zeros((n, new + 1), dtype=np.float32)
    onehot[np.arange(n), col] = 1.0
    rng = np.random.default_rng(seed + 1000 + pos)
    member = _random_sides(rng, SIMULATIONS, n, n_a)
    draws = rng.random((SIMULATIONS, n), dtype=np.float32)
    pilot = _random_sides(rng, PILOT, n, n_a)
    replace_order = rng.permutation(n)

    def tvd_rows(ca, cb):
        return 0.5 * np.abs(ca.astype(np.float64) / n_a - cb.astype(np.float64) / n_b).sum(axis=1)

    def power(d: float) -> float:
        if d <= 1 - p_top + 1e-12 and p_top < 1:
            target, moved = top, d / (1 - p_top)
        else:
            target, moved = new, d
        injected = (1 - member) * (draws < moved)
        ca = member @ onehot
        cb = (1 - member) @ onehot - injected @ onehot
        cb[:, target] += injected.sum(axis=1)
        sim = tvd_rows(ca, cb)
        # the pool after the move, as the test would see it: mean and spread under relabelling
        rep = onehot.copy()
        rows = replace_order[: int(round(moved * n_b))]
        rep[rows] = 0.0
        rep[rows, target] = 1.0
        pa = pilot @ rep
        null = tvd_rows(pa, rep.sum(axis=0) - pa)
        sd = null.std()
        if sd <= 1e-12:
            return 0.0
        z = (sim - null.mean()) / sd
        own = np.quantile((null - null.mean()) / sd, 1 - ALPHA)
        return float(np.mean(z > max(crit, own)))

    return power


def _detectable_at(codes, n_a: int, pos: int, crit: float, seed: int) -> float | None:
    """The smallest TVD (on TVD_GRID) at position `pos` that the test finds with POWER probability, by
    simulation on these samples: the pool split at random into two sides as the null, and the second
    side's distribution at `pos` moved by TVD d — mass d moved onto the position's most frequent token
    from the others in proportion (a candidate that over-produces a likely token), or, where that token
    already holds more than 1 − d, onto a token the samples never show there. A rejection needs that
    position's standardised TVD to pass both the whole test's critical value and its own 95th percentile
    under relabelling; the other positions' chances are left out, so the figure errs large. The same
    splits serve every d, so the power rises with d and a bisection finds the step."""
    power = _power_at(codes, n_a, pos, crit, seed)
    if power(TVD_GRID[-1]) < POWER:
        return None
    lo, hi = -1, len(TVD_GRID) - 1  # power(TVD_GRID[hi]) ≥ POWER; lo: below, or none tried
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if power(TVD_GRID[mid]) >= POWER:
            hi = mid
        else:
            lo = mid
    return TVD_GRID[hi]
