"""The arithmetic of speculative decoding (Leviathan et al. 2023).

α acceptance rate, γ drafted tokens per step, c = draft step cost / target step cost.
Expected tokens per verification step E = (1−α^(γ+1))/(1−α); speed-up S = E / (γc+1).
It assumes verifying γ+1 tokens costs one target step: true while decoding is memory-bound, false on
compute-bound hardware (a CPU) and under concurrency, where the payoff collapses.
"""

from __future__ import annotations

from spectui.engine.errors import InputError


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
        "break-even acceptance rate (S = 1): " + (f"{be:.3f}" if be is not None else "none — this draft never pays at this γ and c"),
        f"best γ for α = {t['alpha']}, c = {t['cost']}: {t['best_gamma']} (S = {t['best_speedup']:.2f}×)",
        "",
        "  α     S",
    ]
    for row in t["table"]:
        bar = "█" * int(round(row["speedup"] * 10))
        lines.append(f"  {row['alpha']:.1f}  {row['speedup']:5.2f}  {bar}")
    lines.append("assumes verifying γ+1 tokens costs one target step: false on a CPU and under concurrency")
    return "\n".join(lines)
