"""Exact under sampling: does a speculating server sample from the same distribution as the baseline?

1. Seeded pass: N seeds per prompt on both sides; "byte-identical for n of N seeds". Which promise that
   checks depends on how the candidate drafts (`guarantee_for`): llama.cpp with greedy drafting (its
   default) samples every position from the target with the request's RNG, so a verified draft keeps
   seeded bytes equal; with `--spec-draft-sampling probabilistic` it verifies by rejection sampling
   (common/sampling.cpp), and vLLM and SGLang draw their own randomness in rejection sampling: there a
   seeded mismatch is expected and only the distribution is promised. llama-server does not report its
   drafting mode over HTTP; spectui reads it from the server's argv where the server runs on this machine.
2. Distribution pass (when the seeded pass is not all identical, or asked for): the N completions of each
   side as two samples, compared by ONE permutation test over the whole sequence: the side labels of
   whole samples are permuted, and the statistic is the largest over positions of that position's total
   variation distance (TVD) between the two sides' token distributions, standardised by its mean and
   spread under relabelling (so a position where tokens vary a lot by chance does not drown the others).
   No per-position correction is needed and no tokens are pooled: every token is its own category, and
   a sample that ended is a category of its own at the positions after its end. scipy.stats'
   permutation_test runs it (exactly, over every relabelling, where there are few enough).
   Verdict: `different` (p < 0.05, and the positions that stand out), `consistent` (no evidence of a
   difference, with the smallest TVD at one position this test would have found with 80 % probability:
   computed by simulation on these samples), or `not enough samples to decide` (no outcome of the test
   could reach p < 0.05, or not even a TVD of 1 would have been found, or no position could be tested).
   Never "proven".

The test assumes a side's samples are independent draws. The two sides' samples with the same seed may
be alike (greedy drafting makes them identical): that makes the test cautious, never eager.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from spectui.backends.base import Backend
from spectui.backends.launchspec import flag_value, has_flag
from spectui.backends.lossy import lossy_settings
from spectui.core.runner import SIDES, PromptResult, RunObserver, compare_prompt
from spectui.core.stats import ratio_interval
from spectui.core.types import GenerationParams, Prompt, ServerInfo
from spectui.labs.sampling.twosample import (  # noqa: F401  (the lab's statistics, re-exported for its callers)
    ALPHA,
    NOT_ENOUGH,
    POWER,
    DistributionTest,
    PositionTest,
    distribution_test,
    encode,
    tvd,
)
from spectui.machine.probes import local_argv, local_env

# -- which promise applies ------------------------------------------------------------------------


@dataclass(frozen=True)
class Guarantee:
    """What a correct candidate promises under sampling, from how it drafts."""

    drafting: str  # "greedy" | "probabilistic" | "n-gram" | "none" | "own randomness" | "unknown"
    promise: str  # "seeded bytes" | "distribution only" | "unknown"
    why: str

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def launch_argv(url: str) -> list[str] | None:
    """The argv of the server behind `url` where it runs on this machine (machine.probes.local_argv)."""
    return local_argv(url)


def launch_env(url: str) -> dict[str, str] | None:
    """The environment of the server behind `url` where it runs on this machine (machine.probes.local_env)."""
    return local_env(url)


# llama.cpp's --spec-draft-sampling acts on the drafters that sample (draft-simple, draft-mtp:
# common/speculative.cpp sets result_q only for them); n-gram drafts are looked up, never sampled
_SAMPLED_DRAFTERS = ("draft-simple", "draft-mtp")
_SPECULATION_FLAGS = ("--spec-type", "--spec-default", "-md", "--spec-draft-model", "--model-draft")


# common/arg.cpp:4236: --spec-draft-sampling is also set by this variable; the argument wins where both are
# given (tools/server/README.md, "If both command line argument and environment variable are both set")
SAMPLING_ENV = "LLAMA_ARG_SPEC_DRAFT_SAMPLING"


def guarantee_for(
    kind: str, info: ServerInfo | None, argv: list[str] | None, env: Mapping[str, str] | None = None
) -> Guarantee:
    """Which promise the candidate makes: seeded bytes (llama.cpp drafting greedily, or with no draft
    that is sampled) or the distribution only (llama.cpp --spec-draft-sampling probabilistic, or
    LLAMA_ARG_SPEC_DRAFT_SAMPLING in the launched environment; vLLM, SGLang); "unknown" where spectui
    cannot tell, said why."""
    if kind in ("vllm", "sglang"):
        return Guarantee(
            "own randomness",
            "distribution only",
            f"{kind} draws its own randomness in rejection sampling",
        )
    if kind != "llama.cpp":
        return Guarantee("unknown", "unknown", f"a {kind} server: how it verifies drafts under sampling is unknown")
    if argv is not None:
        return _llamacpp_launched(argv, env)
    types = [t for t in str((info.speculative if info else {}).get("type") or "").split(",") if t]
    if types and all(t == "none" for t in types):
        return Guarantee("none", "seeded bytes", "the candidate drafts nothing")
    if types and not any(t in _SAMPLED_DRAFTERS or t == "on" for t in types):
        return Guarantee(
            "n-gram",
            "seeded bytes",
            f"{','.join(types)} drafts are looked up, not sampled: --spec-draft-sampling does not apply",
        )
    return Guarantee(
        "unknown",
        "unknown",
        "llama-server does not report --spec-draft-sampling and this server's argv is not readable here: a seeded "
        "mismatch is a failure under greedy drafting, expected under probabilistic",
    )


def _llamacpp_launched(argv: list[str], env: Mapping[str, str] | None) -> Guarantee:
    """A llama-server whose command line (and environment, where readable) is known: its draft sampling, as
    --spec-draft-sampling or LLAMA_ARG_SPEC_DRAFT_SAMPLING sets it (the argument wins)."""
    if not has_flag(argv, *_SPECULATION_FLAGS):
        return Guarantee("none", "seeded bytes", "launched without speculation")
    lossy = lossy_settings(argv)
    if lossy:  # drafts accepted at random: no promise on the bytes nor on the distribution
        return Guarantee(
            "lossy", "unknown", f"launched with {', '.join(lossy)}: drafts are accepted without the target's agreement"
        )
    mode, said = "greedy", "--spec-draft-sampling"
    if env is not None and env.get(SAMPLING_ENV):
        mode, said = env[SAMPLING_ENV], f"{SAMPLING_ENV} in its environment"
    given = flag_value(argv, "--spec-draft-sampling")
    if given is not None:
        mode, said = given, "--spec-draft-sampling"
    if mode == "probabilistic":
        return Guarantee(
            "probabilistic",
            "distribution only",
            f"launched with {said} probabilistic: drafts are verified by rejection sampling",
        )
    unread = "" if env is not None else f" ({SAMPLING_ENV} not read: its environment is not readable here)"
    return Guarantee(
        "greedy",
        "seeded bytes",
        f"launched without --spec-draft-sampling probabilistic{unread}: every position is sampled from the "
        "target with the request's RNG",
    )


# -- one prompt's result ---------------------------------------------------------------------------


@dataclass
class SamplingResult:
    prompt: Prompt
    runs: list[PromptResult]
    test: DistributionTest | None = None
    guarantee: Guarantee | None = None
    representation: str = "token ids"  # what the distribution pass compared: "token ids" | "token bytes"

    @property
    def distribution_run(self) -> bool:
        return self.test is not None

    @property
    def positions(self) -> list[PositionTest]:
        return self.test.positions if self.test is not None else []

    @property
    def compared(self) -> list[PromptResult]:
        """The seeds both sides answered in full. A request that failed (either side) is left out of every count,
        the seeded one and the distribution's samples alike, and named with its seed (failed_seeds): one
        failed baseline request is not a seed whose bytes differ."""
        return [r for r in self.runs if not r.failed and not r.incomplete]

    @property
    def failed_seeds(self) -> list[str]:
        """Each left-out request, by its seed and what failed: 'seed 1003 (baseline: connection lost)'."""
        out = []
        for r in self.runs:
            if not r.failed and not r.incomplete:
                continue
            why = [f"{rec.name}: {rec.failed.message}" for rec in (r.baseline, r.candidate) if rec.failed is not None]
            out.append(f"seed {r.seed} ({'; '.join(why) or 'cut off'})")
        return out

    @property
    def seeded_identical(self) -> int:
        return sum(1 for r in self.compared if r.identical)

    @property
    def seeded_mismatch_is_failure(self) -> bool:
        """A seed whose bytes differ is a failure only where seeded bytes are promised; where the promise
        is unknown spectui cannot call it a pass either."""
        if self.seeded_identical == len(self.compared):
            return False
        return self.guarantee is None or self.guarantee.promise != "distribution only"

    @property
    def verdict(self) -> str:
        if self.test is None:
            if not self.compared:
                return "not run (every request failed)" if self.runs else "not run"
            return "not run (every seed byte-identical)" if self.seeded_identical == len(self.compared) else "not run"
        return self.test.verdict

    def seeded_line(self) -> str:
        """The seeded count over the seeds compared, and the requests left out by seed (CLI and TUI)."""
        n = len(self.compared)
        line = f"byte-identical for {self.seeded_identical} of {n} seeds"
        left = self.failed_seeds
        if left:
            line += (
                f" ({len(left)} failed request{'s' if len(left) != 1 else ''} left out of both counts: "
                f"{', '.join(left[:3])}{' …' if len(left) > 3 else ''})"
            )
        return line

    def overall(self) -> tuple[str, str]:
        """One verdict over the seeded bytes, the distributions and what the drafting promises: (answer, line),
        the answer "same", "different" or "undecided" (its colour in the TUI)."""
        n, k = len(self.compared), self.seeded_identical
        if not n:
            return "undecided", "verdict: NOT COMPARED — every request failed"
        t, promise = self.test, self.guarantee.promise if self.guarantee is not None else "unknown"
        differ = f"seeded bytes differ for {n - k} of {n} seeds"
        if t is not None and t.verdict == "different":
            answer, line = "different", "DIFFERENT — the two sides' output distributions differ"
        elif k < n and promise == "seeded bytes":
            answer, line = "different", f"DIFFERENT — {differ}, which the candidate's drafting promises"
        elif t is not None and t.verdict == NOT_ENOUGH:
            answer, line = "undecided", "NOT DECIDED — not enough samples to test the distributions"
        elif k < n and promise != "distribution only":
            answer, line = "undecided", f"NOT DECIDED — {differ}; whether the drafting promises them is unknown"
        elif k < n and t is None:  # no distribution test ran (prove's sampled pass skips it after a failure)
            answer = "undecided"
            line = f"NOT DECIDED — {differ}, which this drafting does not promise; the distributions were not tested"
        elif k < n:
            answer = "same"
            line = f"CONSISTENT — {differ}, which this drafting does not promise; the distributions are consistent"
        else:
            answer = "same"
            dist = "; the distributions are consistent" if t is not None and t.verdict == "consistent" else ""
            line = f"SAME — every seed's bytes identical ({k} of {n}){dist}"
        left = len(self.failed_seeds)
        return answer, f"verdict: {line}" + (
            f" · {left} failed request{'s' if left != 1 else ''} left out" if left else ""
        )

    @property
    def smallest_detectable_tvd(self) -> float | None:
        return self.test.detectable if self.test is not None else None

    def acceptance(self) -> float | None:
        acc = [
            r.candidate.figures.acceptance_rate for r in self.runs if r.candidate.figures.acceptance_rate is not None
        ]
        return statistics.median(acc) if acc else None

    def speedup(self):
        ratios = [r.speedup for r in self.runs if r.speedup is not None]
        return ratio_interval(ratios) if ratios else None

    def text(self) -> str:
        lines = [f"{self.prompt.id}: {self.seeded_line()}"]
        g = self.guarantee
        if g is not None:
            judged = {
                "seeded bytes": "seeded bytes promised, a mismatch is a failure",
                "distribution only": "only the distribution promised, a seeded mismatch is not a failure",
                "unknown": "whether seeded bytes are promised is unknown",
            }[g.promise]
            lines.append(f"  drafting {g.drafting}: {judged} ({g.why})")
        acc, sp = self.acceptance(), self.speedup()
        if sp is not None:
            lines.append(
                f"  speed-up {sp.text(unit='×')}"
                + (f" at {acc:.0%} accepted" if acc is not None else " (the candidate drafted nothing)")
            )
        t = self.test
        if t is not None:
            lines.append("  " + self.distribution_line())
            if t.verdict == "different":
                diff = sorted((x for x in t.positions if x.p_adjusted < ALPHA), key=lambda x: x.p_adjusted)
                for x in diff[:3]:
                    lines.append(
                        f"    token {x.position}: TVD {x.tvd:.2f} ({x.tvd_by_chance:.2f} expected by chance), "
                        f"p {x.p_adjusted:.3g}"
                    )
        lines.append("  " + self.overall()[1])
        return "\n".join(lines)

    def distribution_line(self) -> str:
        """The distribution verdict in one line (CLI and TUI)."""
        t = self.test
        if t is None:
            return f"distributions: {self.verdict}"
        n_a, n_b = t.n
        if t.verdict == NOT_ENOUGH:
            return f"distributions: NOT ENOUGH SAMPLES TO DECIDE — {t.reason}"
        if t.verdict == "different":
            stand = sum(1 for x in t.positions if x.p_adjusted < ALPHA)
            return (
                f"distributions: DIFFERENT (one test over {len(t.positions)} positions, p {t.p:.3g}; "
                f"{stand} position{'s' if stand != 1 else ''} stand out)"
            )
        found = (
            f"a TVD of {t.detectable:.2f} at any one position would have been found with {POWER * 100:.0f} % probability"
            if t.detect_computed and t.detectable is not None
            else "the smallest detectable TVD was not computed"
        )
        return (
            f"distributions: consistent (one test over {len(t.positions)} positions, {t.tested} varying, "
            f"p {t.p:.3g} ≥ {ALPHA}; {n_a}+{n_b} samples): {found}; smaller differences may remain"
        )

    def to_json(self) -> dict:
        sp = self.speedup()
        return {
            "id": self.prompt.id,
            "samples": len(self.runs),
            "seeded_identical": self.seeded_identical,
            "divergent_seeds": [r.seed for r in self.runs if r.identical is False],
            "compared_samples": len(self.compared),
            "failed_seeds": [r.seed for r in self.runs if r.failed or r.incomplete],
            "overall": self.overall()[1],
            "guarantee": self.guarantee.to_json() if self.guarantee is not None else None,
            "seeded_mismatch_is_failure": self.seeded_mismatch_is_failure,
            "verdict": self.verdict,
            "level": ALPHA,
            "test": self.test.to_json() if self.test is not None else None,
            "compared": self.representation,
            "positions": [t.to_json() for t in self.positions],
            "smallest_detectable_tvd": self.smallest_detectable_tvd,
            "acceptance_rate": self.acceptance(),
            "speedup": sp.to_json() if sp else None,
        }


def distribution_pass(result: SamplingResult, k: int) -> None:
    """The two sides' finished samples (first k tokens) through the whole-sequence test: token ids where
    every sample of both sides has them, else each token's bytes (never ids on one side, bytes on the
    other)."""
    recs = {s: [getattr(r, s) for r in result.compared] for s in SIDES}  # a failed seed out of both sides
    with_ids = all(t.token_id is not None for s in SIDES for rec in recs[s] for t in rec.tokens)
    result.representation = "token ids" if with_ids else "token bytes"

    def seq(rec):
        return [t.token_id for t in rec.tokens] if with_ids else [bytes(t.data) for t in rec.tokens]

    result.test = distribution_test([seq(r) for r in recs["baseline"]], [seq(r) for r in recs["candidate"]], k)


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
    candidate_argv: list[str] | None = None,
    candidate_env: Mapping[str, str] | None = None,
) -> list[SamplingResult]:
    """The seeded pass over `samples` seeds per prompt, then the distribution pass where it is needed.
    `candidate_argv`: how the candidate was launched, where the caller knows (else read from the local
    process, where there is one)."""
    obs = observer or RunObserver()
    argv = candidate_argv if candidate_argv is not None else launch_argv(candidate.url)
    env = candidate_env if candidate_env is not None else launch_env(candidate.url)
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
        # after the runs: llama.cpp names the speculation types a request used in its final event
        res.guarantee = guarantee_for(candidate.kind, candidate.info, argv, env)
        if candidate_argv is None and argv is not None:  # read here, not given: its source is said
            res.guarantee = dataclasses.replace(
                res.guarantee, why=f"{res.guarantee.why} (from the process command line)"
            )
        if force_distribution or res.seeded_identical < len(res.compared):
            distribution_pass(res, params.max_tokens)
        out.append(res)
    return out
