"""Exact under sampling: does a speculating server sample from the same distribution as the baseline?

1. Seeded pass: N seeds per prompt on both sides; "byte-identical for n of N seeds". llama.cpp samples
   every position from the target with the request's RNG, so a verified draft keeps seeded bytes equal;
   vLLM and SGLang draw their own randomness in rejection sampling, so seeded bytes need not match there
   even when the distribution is exact.
2. Distribution pass (when the seeded pass is not all identical, or asked for): the N completions of
   each side as two samples. Per token position k ≤ K, the two marginal distributions of the token id are
   compared by a permutation test on their total variation distance (TVD), p-values Holm-adjusted over
   the positions; each position's TVD comes with a bootstrap interval, and the smallest TVD this N could
   have told apart from noise (the 95th percentile of the TVD under random relabelling).
   Verdict: `different` (which positions, p, TVD) or `consistent` (no evidence of a difference at the
   stated level). Never "proven".

The permutation test uses only resampling (random.Random with a fixed seed), so the same samples give
the same figures; no distribution function is written by hand.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
from collections import Counter
from dataclasses import dataclass, field

from spectui.backends.base import Backend
from spectui.core.runner import SIDES, PromptResult, RunObserver, compare_prompt
from spectui.core.stats import bootstrap_median, quantile
from spectui.core.types import GenerationParams, Prompt

PERMUTATIONS = 400
ALPHA = 0.05


def tvd(a: list, b: list) -> float:
    """Total variation distance between the empirical distributions of two samples."""
    ca, cb = Counter(a), Counter(b)
    na, nb = len(a), len(b)
    return 0.5 * sum(abs(ca[k] / na - cb[k] / nb) for k in ca.keys() | cb.keys())


RARE = 5  # tokens seen fewer times than this over both samples are pooled into one category


def pooled(a: list, b: list) -> tuple[list, list]:
    """Rare tokens (fewer than RARE over both samples) as one category: at temperature > 0 most tokens are
    seen once, and comparing singletons measures only noise (the chi-square rule of pooling small cells)."""
    counts = Counter(a) + Counter(b)
    other = ("other",)
    return ([x if counts[x] >= RARE else other for x in a], [x if counts[x] >= RARE else other for x in b])


def permutation_test(a: list, b: list, permutations: int = PERMUTATIONS, seed: int = 0) -> tuple[float, float, float]:
    """(observed TVD, p-value, the TVD's 95th percentile under the null) by random relabelling of the pool,
    over the pooled categories."""
    a, b = pooled(a, b)
    observed = tvd(a, b)
    pool = list(a) + list(b)
    rng = random.Random(seed)
    null = []
    for _ in range(permutations):
        rng.shuffle(pool)
        null.append(tvd(pool[: len(a)], pool[len(a) :]))
    p = (1 + sum(1 for v in null if v >= observed - 1e-12)) / (1 + permutations)
    return observed, p, quantile(sorted(null), 0.95)


def holm(pvalues: list[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input's order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def tvd_interval(a: list, b: list, resamples: int = 400, seed: int = 1) -> tuple[float, float]:
    a, b = pooled(a, b)
    rng = random.Random(seed)
    vals = sorted(tvd(rng.choices(a, k=len(a)), rng.choices(b, k=len(b))) for _ in range(resamples))
    return quantile(vals, 0.025), quantile(vals, 0.975)


@dataclass
class PositionTest:
    position: int
    n: tuple[int, int]
    tvd: float
    tvd_low: float
    tvd_high: float
    p: float
    p_holm: float = 1.0
    detectable: float = 0.0

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class SamplingResult:
    prompt: Prompt
    runs: list[PromptResult]
    positions: list[PositionTest] = field(default_factory=list)
    distribution_run: bool = False

    @property
    def seeded_identical(self) -> int:
        return sum(1 for r in self.runs if r.identical)

    @property
    def verdict(self) -> str:
        if not self.distribution_run:
            return "not run (every seed byte-identical)" if self.seeded_identical == len(self.runs) else "not run"
        return "different" if any(t.p_holm < ALPHA for t in self.positions) else "consistent"

    @property
    def smallest_detectable_tvd(self) -> float | None:
        return max((t.detectable for t in self.positions), default=None)

    def acceptance(self) -> float | None:
        acc = [
            r.candidate.figures.acceptance_rate for r in self.runs if r.candidate.figures.acceptance_rate is not None
        ]
        return statistics.median(acc) if acc else None

    def speedup(self):
        ratios = [r.speedup for r in self.runs if r.speedup is not None]
        return bootstrap_median(ratios) if ratios else None

    def text(self) -> str:
        n = len(self.runs)
        lines = [f"{self.prompt.id}: byte-identical for {self.seeded_identical} of {n} seeds"]
        acc, sp = self.acceptance(), self.speedup()
        if sp is not None:
            lines.append(
                f"  speed-up {sp.text(unit='×')}"
                + (f" at {acc:.0%} accepted" if acc is not None else " (the candidate drafted nothing)")
            )
        if self.distribution_run:
            diff = [t for t in self.positions if t.p_holm < ALPHA]
            if diff:
                worst = max(diff, key=lambda t: t.tvd)
                lines.append(
                    f"  distributions: DIFFERENT at {len(diff)} of {len(self.positions)} positions "
                    f"(e.g. token {worst.position}: TVD {worst.tvd:.2f} [{worst.tvd_low:.2f}–{worst.tvd_high:.2f}], "
                    f"Holm p {worst.p_holm:.3g})"
                )
            else:
                lines.append(
                    f"  distributions: consistent at all {len(self.positions)} positions (Holm p ≥ {ALPHA}); "
                    f"this N = {n} could not tell apart a TVD below {self.smallest_detectable_tvd:.2f}"
                )
        return "\n".join(lines)

    def to_json(self) -> dict:
        sp = self.speedup()
        return {
            "id": self.prompt.id,
            "samples": len(self.runs),
            "seeded_identical": self.seeded_identical,
            "divergent_seeds": [r.seed for r in self.runs if r.identical is False],
            "verdict": self.verdict,
            "level": ALPHA,
            "positions": [t.to_json() for t in self.positions],
            "smallest_detectable_tvd": self.smallest_detectable_tvd,
            "acceptance_rate": self.acceptance(),
            "speedup": sp.to_json() if sp else None,
        }


def distribution_pass(result: SamplingResult, k: int) -> None:
    """Per position ≤ k, the two sides' token marginals over the samples (token ids where both gave them)."""

    def seq(rec):
        ids = [t.token_id for t in rec.tokens]
        if None in ids:  # no ids: compare the bytes each token carried
            return [bytes(t.data) for t in rec.tokens]
        return ids

    samples = {s: [seq(getattr(r, s)) for r in result.runs if getattr(r, s).failed is None] for s in SIDES}
    tests = []
    for pos in range(k):
        a = [x[pos] for x in samples["baseline"] if len(x) > pos]
        b = [x[pos] for x in samples["candidate"] if len(x) > pos]
        if len(a) < 2 or len(b) < 2:
            break
        observed, p, detectable = permutation_test(a, b, seed=pos)  # over pooled categories
        lo, hi = tvd_interval(a, b, seed=pos)
        tests.append(PositionTest(pos, (len(a), len(b)), observed, lo, hi, p, detectable=detectable))
    for t, adj in zip(tests, holm([t.p for t in tests]), strict=True):
        t.p_holm = adj
    result.positions = tests
    result.distribution_run = True


async def sampling(
    baseline: Backend,
    candidate: Backend,
    prompts: list[Prompt],
    params: GenerationParams,
    samples: int,
    seed_base: int,
    force_distribution: bool = False,
    observer: RunObserver | None = None,
    progress=None,
) -> list[SamplingResult]:
    """The seeded pass over `samples` seeds per prompt, then the distribution pass where it is needed."""
    obs = observer or RunObserver()
    out = []
    for prompt in prompts:
        runs = []
        for i in range(samples):
            p = dataclasses.replace(params, seed=seed_base + i, cache_prompt=False)
            obs.prompt_started(prompt, p, "sequential")
            r = await compare_prompt(
                baseline, candidate, prompt, p, "sequential", obs.event, first="baseline" if i % 2 == 0 else "candidate"
            )
            r.seed = p.seed
            obs.prompt_finished(r)
            runs.append(r)
            if progress:
                progress(prompt, i + 1, samples)
        res = SamplingResult(prompt, runs)
        if force_distribution or res.seeded_identical < samples:
            distribution_pass(res, params.max_tokens)
        out.append(res)
    return out
