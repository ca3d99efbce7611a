"""The arithmetic of speculative decoding (Leviathan et al. 2023).

α acceptance rate, γ drafted tokens per step, c = draft step cost / target step cost.
Expected tokens per verification step E = (1−α^(γ+1))/(1−α); speed-up S = E / (γc+1).
It assumes verifying γ+1 tokens costs one target step: true while decoding is memory-bound, false on
compute-bound hardware (a CPU) and under concurrency, where the payoff collapses.
"""

from __future__ import annotations

from spectui.core.errors import InputError


def _check(alpha: float, gamma: int, cost: float) -> None:
    if not 0 <= alpha < 1:
        raise InputError(f"acceptance rate α must be in [0, 1), not {alpha}", hint="e.g. --alpha 0.8")
    if gamma < 1:
        raise InputError(f"draft length γ must be at least 1, not {gamma}")
    if cost < 0:
        raise InputError(f"draft cost ratio c must be >= 0, not {cost}", hint="c = draft step time / target step time")


def tokens_per_step(alpha: float, gamma: int) -> float:
    _check(alpha, gamma, 0.0)
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def speedup(alpha: float, gamma: int, cost: float) -> float:
    _check(alpha, gamma, cost)
    return tokens_per_step(alpha, gamma) / (gamma * cost + 1)


def break_even_alpha(gamma: int, cost: float, tol: float = 1e-9) -> float | None:
    """The acceptance rate where S = 1; None when no α < 1 reaches it (S(α→1) = (γ+1)/(γc+1) ≤ 1)."""
    _check(0.0, gamma, cost)
    if (gamma + 1) / (gamma * cost + 1) <= 1:
        return None
    lo, hi = 0.0, 1.0 - 1e-12
    if speedup(lo, gamma, cost) >= 1:
        return 0.0
    while hi - lo > tol:  # S rises monotonically with α
        mid = (lo + hi) / 2
        if speedup(mid, gamma, cost) < 1:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def best_gamma(alpha: float, cost: float, max_gamma: int = 32) -> tuple[int, float]:
    _check(alpha, 1, cost)
    return max(((g, speedup(alpha, g, cost)) for g in range(1, max_gamma + 1)), key=lambda t: t[1])


def analyse(alpha: float, gamma: int, cost: float) -> dict:
    _check(alpha, gamma, cost)
    g, s = best_gamma(alpha, cost)
    return {
        "alpha": alpha,
        "gamma": gamma,
        "cost": cost,
        "tokens_per_step": tokens_per_step(alpha, gamma),
        "speedup": speedup(alpha, gamma, cost),
        "break_even_alpha": break_even_alpha(gamma, cost),
        "best_gamma": g,
        "best_speedup": s,
        "table": [{"alpha": a / 10, "speedup": speedup(a / 10, gamma, cost)} for a in range(0, 10)],
    }


def text(t: dict) -> str:
    be = t["break_even_alpha"]
    lines = [
        f"α = {t['alpha']}, γ = {t['gamma']}, c = {t['cost']}",
        f"tokens per verification step E = (1−α^(γ+1))/(1−α) = {t['tokens_per_step']:.2f}",
        f"speed-up S = E/(γc+1) = {t['speedup']:.2f}×",
        "break-even acceptance rate (S = 1): "
        + (f"{be:.3f}" if be is not None else "none — this draft never pays at this γ and c"),
        f"best γ for α = {t['alpha']}, c = {t['cost']}: {t['best_gamma']} (S = {t['best_speedup']:.2f}×)",
        "",
        "  α     S",
    ]
    for row in t["table"]:
        bar = "█" * int(round(row["speedup"] * 10))
        lines.append(f"  {row['alpha']:.1f}  {row['speedup']:5.2f}  {bar}")
    lines.append("assumes verifying γ+1 tokens costs one target step: false on a CPU and under concurrency")
    return "\n".join(lines)


def from_measurement(
    baseline_tps: float | None, candidate_tps: float | None, drafted: int, accepted: int, steps: int
) -> dict | None:
    """Fill the formula from a measured run, and say why prediction and measurement differ.

    α = accepted/drafted and γ = drafted/steps come from the server's counters. The draft cost ratio c
    is not reported by any server, so it is *implied*: with the target's step time t = 1/baseline
    tokens/s and the candidate's time per verification step T = (tokens/steps)/candidate tokens/s, the
    formula's cost model T = t·(γc + 1) gives c = (T/t − 1)/γ. That charges every extra cost of a step
    (drafting and verifying γ+1 tokens instead of 1) to the draft; the formula itself assumes the
    verification costs one target step, which compute-bound hardware (a CPU) and batching break.
    """
    if not (baseline_tps and candidate_tps and drafted and steps):
        return None
    alpha = accepted / drafted
    gamma = drafted / steps
    t = 1.0 / baseline_tps
    tokens_per_step = 1 + accepted / steps
    step_time = tokens_per_step / candidate_tps
    c = max(0.0, (step_time / t - 1) / gamma)
    g = max(1, round(gamma))
    a = min(alpha, 0.999999)
    predicted_free = speedup(a, g, 0.0)
    return {
        "alpha": alpha,
        "gamma": gamma,
        "implied_cost": c,
        "step_time_over_target_step": step_time / t,
        "measured_speedup": candidate_tps / baseline_tps,
        "predicted_speedup_free_draft": predicted_free,
        "predicted_tokens_per_step": tokens_per_step_safe(a, g),
        "measured_tokens_per_step": tokens_per_step,
        "break_even_alpha": break_even_alpha(g, c) if c < 1e9 else None,
        "why": (
            f"a verification step took {step_time / t:.1f}× a target step here; the formula charges it 1× "
            f"plus γ·c for drafting. With a free draft it predicts {predicted_free:.2f}×; the measured "
            f"{candidate_tps / baseline_tps:.2f}× implies c = {c:.2f} — on compute-bound hardware (a CPU) or "
            "under batching, verifying γ+1 tokens is not one step's cost, so the payoff shrinks or reverses. "
            f"Tokens per step: measured {tokens_per_step:.2f}, formula {tokens_per_step_safe(a, g):.2f} (it "
            "assumes each draft is accepted independently with probability α; real acceptance comes in runs)."
        ),
    }


def from_result(result) -> dict | None:
    """from_measurement for one compared prompt (a core.runner.PromptResult): the step count is the
    server's own where /metrics gave it, since two steps whose counters arrived together are one in the
    stream (labeller)."""
    b, c = result.baseline.figures, result.candidate.figures
    steps = int(c.metrics_steps) if c.metrics_steps else c.steps
    return from_measurement(b.decode_tps, c.decode_tps, c.drafted, c.accepted, steps)


def tokens_per_step_safe(alpha: float, gamma: int) -> float:
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)
