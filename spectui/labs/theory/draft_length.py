"""The draft length a measured draft pays for: `--spec-draft-n-max` from the draft's own
per-position acceptance and its measured cost, by the step formula of labs.theory.terms.

With n_max = k, a verification step yields E(k) = 1 + Σ_{i≤k} p_i tokens, p_i the share of verification
steps in which draft position i was accepted (llama.cpp's /metrics per-position counts over its steps,
measured at a probe n_max ≥ k: position i's share does not depend on how many positions follow it), and costs
k·c + V(k+1) + R(k+1) target steps (StepCosts.full_step). S(k) = E(k) / full_step(k). The choice is the k
with the largest S(k), the largest such k on a tie: going from k − 1 to k adds p_k tokens a step and the
step's growth in cost, and it pays exactly when S(k) ≥ S(k − 1). A draft for which no S(k) exceeds 1 is
not worth serving at any length; the choice then says so (and still names the cheapest length, 1).

c for a draft without a separate model spectui can time (an EAGLE-3 head runs inside the candidate's
llama-server) is had from the candidate's own run: its decode time, in the plain server's decode steps,
less one step for every token no verification step produced and V(γ̄ + 1) for each verification step, over
the tokens it drafted. R (the head re-reading each verified batch) is inside that c, not apart from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from spectui.labs.theory.terms import StepCosts


@dataclass(frozen=True)
class LengthChoice:
    n_max: int
    pays: bool  # S(n_max) > 1: the draft beats plain decoding at its best length (as far as the terms say)
    speedups: tuple[float, ...]  # S(k) for k = 1 … len(shares)
    tokens_per_step: tuple[float, ...]  # E(k)
    step_costs: tuple[float, ...]  # full_step(k), in target steps
    why: str = ""

    def to_json(self) -> dict:
        return {
            "n_max": self.n_max,
            "pays": self.pays,
            "speedups": list(self.speedups),
            "tokens_per_step": list(self.tokens_per_step),
            "step_costs": list(self.step_costs),
            "why": self.why,
        }

    @classmethod
    def from_json(cls, d: dict) -> LengthChoice:
        return cls(
            int(d["n_max"]),
            bool(d["pays"]),
            tuple(float(x) for x in d["speedups"]),
            tuple(float(x) for x in d["tokens_per_step"]),
            tuple(float(x) for x in d["step_costs"]),
            str(d.get("why") or ""),
        )


def choose_n_max(shares: Sequence[float], costs: StepCosts) -> LengthChoice:
    """The n_max with the largest predicted speed-up (the largest on a tie), k = 1 … len(shares)."""
    if not shares:
        raise ValueError("no per-position acceptance measured: the draft needs a run with drafts first")
    if any(not 0 <= p <= 1 for p in shares):
        raise ValueError(f"per-position shares must lie in [0, 1]: {list(shares)}")
    e, cost, s = [], [], []
    total = 1.0
    for k, p in enumerate(shares, 1):
        total += p
        e.append(total)
        cost.append(costs.full_step(k))
        s.append(total / cost[-1])
    best = max(range(len(s)), key=lambda i: (round(s[i], 12), i))
    pays = s[best] > 1
    if not pays:  # no length pays: the cheapest, 1, as the docstring and the why say (not the least slow)
        best = 0
    k = best + 1
    why = (
        f"S({k}) = {e[best]:.3f} tokens a step / {cost[best]:.3f} target steps = {s[best]:.3f}"
        + (
            f"; S({k + 1}) = {s[best + 1]:.3f}: position {k + 1}'s {shares[best + 1]:.1%} does not pay for its cost"
            if best + 1 < len(s)
            else f"; no position beyond {k} was measured"
        )
        + ("" if pays else "; no length beats plain decoding: 1, the cheapest, named")
    )
    return LengthChoice(k, pays, tuple(s), tuple(e), tuple(cost), why)


@dataclass
class RunCost:
    """A speculative run's figures summed over prompts, to find the draft's cost per drafted token."""

    steps_in_t: float = 0.0  # the candidate's decode time in the plain server's decode steps
    tokens: int = 0
    steps: int = 0  # verification steps (with a non-empty draft)
    drafted: int = 0
    accepted: int = 0
    runs: list[str] = field(default_factory=list)

    def add(self, tokens: int, cand_tps: float, plain_tps: float, steps: int, drafted: int, accepted: int) -> None:
        """One prompt: the candidate's tokens and decode rate, the plain server's rate on the same prompt."""
        if tokens <= 0 or cand_tps <= 0 or plain_tps <= 0:
            return
        self.steps_in_t += tokens * plain_tps / cand_tps
        self.tokens += tokens
        self.steps += steps
        self.drafted += drafted
        self.accepted += accepted


def draft_cost(run: RunCost, costs: StepCosts) -> tuple[float | None, str]:
    """c (R inside it) from a speculative run and the target's measured V(k); (None, why) where it cannot be."""
    if not run.drafted or not run.steps:
        return None, "not measured: the run drafted nothing"
    gamma = run.drafted / run.steps
    undrafted = max(0, run.tokens - run.steps - run.accepted)
    left = run.steps_in_t - undrafted - run.steps * costs.V(gamma + 1)
    c = left / run.drafted
    how = (
        f"measured from the candidate's run: {run.steps_in_t:.0f} plain steps of decode time for {run.tokens} "
        f"tokens, less {undrafted} undrafted steps and {run.steps} × V({gamma + 1:.2f}) = "
        f"{run.steps * costs.V(gamma + 1):.0f}, over {run.drafted} drafted tokens (re-evaluation inside c)"
    )
    if c < 0:
        return 0.0, how + f"; came out {c:.3f} < 0 (V over-estimated at this load): 0 used"
    return c, how
