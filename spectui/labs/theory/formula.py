"""The arithmetic of speculative decoding (Leviathan et al. 2023).

α acceptance rate, γ drafted tokens per step, c = draft step cost / target step cost.
Expected tokens per verification step E = (1−α^(γ+1))/(1−α); speed-up S = E / (γc+1).
It assumes verifying γ+1 tokens costs one target step: true while decoding is memory-bound, false on
compute-bound hardware (a CPU) and under concurrency, where the payoff collapses.
"""

from __future__ import annotations

import math

from spectui.core.errors import InputError
from spectui.core.figures import per_position_alpha


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
        f"α = {t['alpha']} per position, γ = {t['gamma']}, c = {t['cost']}",
        f"tokens per verification step E = (1−α^(γ+1))/(1−α) = {t['tokens_per_step']:.2f}",
        f"speed-up S = E/(γc+1) = {t['speedup']:.2f}×",
        "break-even α per position (S = 1): "
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


def from_profile(marginal: list[float], conditional: list[float], cost: float, source: str, method: str | None) -> dict:
    """The speed-up at each draft length γ ≤ K from a measured profile (store.spec_profile): tokens per step
    E(γ) = 1 + Σ_{i<γ} marginal[i] (longest-prefix verification), S(γ) = E(γ)/(γc + 1). Exact for a chain
    drafter at every γ ≤ K (a shorter draft is a prefix of the longer); a block drafter (DFlash) measured
    its own K only."""
    if not marginal:
        raise InputError(f"{source}: the profile has no positions")
    if not (math.isfinite(cost) and cost >= 0):
        raise InputError(f"--cost must be a finite number >= 0, not {cost}")
    rows = []
    for g in range(1, len(marginal) + 1):
        e = 1.0 + sum(marginal[:g])
        rows.append({"gamma": g, "tokens_per_step": e, "speedup": e / (g * cost + 1)})
    best = max(rows, key=lambda r: r["speedup"])
    return {
        "profile": source,
        "method": method,
        "cost": cost,
        "conditional": conditional,
        "marginal": marginal,
        "alpha_per_position": per_position_alpha(sum(marginal), len(marginal), 1),
        "rows": rows,
        "best_gamma": best["gamma"],
        "best_speedup": best["speedup"],
    }


def profile_text(t: dict) -> str:
    lines = [
        f"from {t['profile']} ({t['method'] or 'method not named'}), c = {t['cost']}",
        "conditional (draft i accepted given the ones before): " + " ".join(f"{x:.2f}" for x in t["conditional"]),
        "marginal (the first i all accepted):                  " + " ".join(f"{x:.2f}" for x in t["marginal"]),
        "  γ   E = 1 + Σ marginal   S = E/(γc+1)",
    ]
    for r in t["rows"]:
        lines.append(f"  {r['gamma']:<3} {r['tokens_per_step']:>6.2f}              {r['speedup']:5.2f}×")
    lines.append(
        f"best γ: {t['best_gamma']} (S = {t['best_speedup']:.2f}×); exact for a chain drafter, a block drafter only at its K"
    )
    return "\n".join(lines)


def from_measurement(
    baseline_tps: float | None,
    candidate_tps: float | None,
    drafted: int,
    accepted: int,
    steps: int,
    tokens: int | None = None,
    accepted_by_position: list[float] | None = None,
) -> dict | None:
    """Fill the formula from a measured run, and say why prediction and measurement differ.

    γ = drafted/steps and α from the server's counters. Leviathan's α is the acceptance per *position*
    (each drafted token accepted with probability α given the ones before it were), so the measured α is
    the one with Σ_{i=1..γ} α^i = accepted/steps; accepted/drafted, the acceptance per drafted token, is
    Σα^i/γ (0.59 where α is 0.8 at γ = 4) and does not belong on the α axis. The draft cost c is implied
    (_implied_cost).
    """
    if not (baseline_tps and candidate_tps and drafted and steps):
        return None
    gamma = drafted / steps
    alpha = per_position_alpha(accepted, drafted, steps) or 0.0
    measured = candidate_tps / baseline_tps
    tokens_per_step = 1 + accepted / steps
    plain, step_cost, c = _implied_cost(measured, gamma, steps, accepted, tokens)
    a = min(alpha, 0.999999)
    predicted_free = real_gamma_tokens(a, gamma)  # S with c = 0: the tokens per step
    out: dict = {
        "alpha": alpha,  # per position: the α axis of S(α)
        "alpha_per_position": alpha,
        "acceptance_per_drafted_token": accepted / drafted,
        "gamma": gamma,
        "implied_cost": c,
        "step_time_over_target_step": step_cost,
        "verification_steps": steps,
        "plain_tokens": plain if tokens is not None else None,
        "measured_speedup": measured,
        "predicted_speedup_free_draft": predicted_free,
        "predicted_speedup": predicted_free / (gamma * c + 1),
        "predicted_tokens_per_step": predicted_free,
        "measured_tokens_per_step": tokens_per_step,
        "break_even_alpha": break_even_alpha(max(1, round(gamma)), c) if c < 1e9 else None,
        "accepted_by_position": None,
    }
    why = _why(out, accepted, steps, plain, tokens)
    if accepted_by_position:
        shares = [v / steps for v in accepted_by_position]
        out["accepted_by_position"] = shares
        why += _by_position(shares, alpha)
    out["why"] = why
    return out


def _implied_cost(
    measured: float, gamma: float, steps: int, accepted: int, tokens: int | None
) -> tuple[int, float, float]:
    """The plain steps, what a verification step cost (in target steps) and the draft cost ratio c it implies.

    `steps` counts verification steps, which servers count only where the draft was non-empty (llama.cpp
    server-context.cpp); `tokens` (those decoded after the first) then also holds tokens from plain steps,
    tokens − steps − accepted of them, each one target step. The draft cost ratio c is reported by no
    server, so it is *implied*: with the target's step time t = 1/baseline tokens/s, the candidate's
    decode took T = tokens·t·(baseline/candidate rate); less the plain steps, a verification step took
    T_v = (T/t − plain)/steps target steps, and the formula's cost model T_v = γc + 1 gives c. That
    charges every extra cost of a step (drafting, and verifying γ+1 tokens instead of 1) to the draft;
    the formula assumes the verification costs one target step, which compute-bound hardware (a CPU) and
    batching break. Without `tokens`, every token is taken to come from a verification step.
    """
    if tokens is not None and tokens > 0:
        plain = max(0, tokens - steps - accepted)
        window = tokens / measured  # the candidate's decode time in target steps
    else:
        plain = 0
        window = steps * (1 + accepted / steps) / measured
    step_cost = max(0.0, (window - plain) / steps)  # one verification step, in target steps
    return plain, step_cost, max(0.0, (step_cost - 1) / gamma)


def _why(filled: dict, accepted: int, steps: int, plain: int, tokens: int | None) -> str:
    """Why prediction and measurement differ (`filled`: from_measurement's figures): α per position against
    per drafted token, what a verification step cost against the formula's 1 + γc, the plain steps, and
    where the formula's cost model breaks."""
    alpha, gamma, per_token = filled["alpha"], filled["gamma"], filled["acceptance_per_drafted_token"]
    step_cost, measured, c = filled["step_time_over_target_step"], filled["measured_speedup"], filled["implied_cost"]
    predicted_free, predicted = filled["predicted_speedup_free_draft"], filled["predicted_speedup"]
    why = (
        f"α = {alpha:.2f} per position (Σ α^i over γ = {gamma:.2f} positions = {accepted / steps:.2f} accepted "
        f"per step; accepted/drafted = {per_token:.2f} is the acceptance per drafted token). A verification "
        f"step took {step_cost:.2f}× a target step here; the formula charges it 1× plus γ·c for drafting. "
        f"With a free draft it predicts {predicted_free:.2f}×; the measured {measured:.2f}× implies c = {c:.2f}"
    )
    if plain:
        why += (
            f" ({plain} of {tokens} tokens came from steps without a draft, counted as one target step each; "
            f"with them the formula's S is {predicted:.2f}× for the verification steps alone)"
        )
    elif tokens is None:
        why += " (every token taken to come from a verification step: the token count is unknown)"
    return why + (
        " — on compute-bound hardware (a CPU) or under batching, verifying γ+1 tokens is not one step's cost, "
        "so the payoff shrinks or reverses."
    )


def _by_position(shares: list[float], alpha: float) -> str:
    """The server's share of steps accepting each position beside the model's α^i."""
    model = [alpha ** (i + 1) for i in range(len(shares))]
    return (
        " The server's share of steps accepting position i: "
        + ", ".join(f"{v:.2f}" for v in shares)
        + "; the model's α^i: "
        + ", ".join(f"{v:.2f}" for v in model)
        + " (where they part, acceptance is not one α at every position)."
    )


def real_gamma_tokens(alpha: float, gamma: float) -> float:
    """E = 1 + Σ_{i=1..γ} α^i for a real γ (a mean draft length): (1 − α^(γ+1))/(1 − α)."""
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def from_result(result) -> dict | None:
    """from_measurement for one compared prompt (a core.runner.PromptResult): the step count is the
    server's own where /metrics gave it, since two steps whose counters arrived together are one in the
    stream (labeller); the tokens are those decoded after the first (the first comes with the prompt,
    outside the decode rate's window), where they are counted in tokens and not chunks."""
    if not result.measured:  # a failed side: no point to place (its rate and acceptance were never measured)
        return None
    b, c = result.baseline.figures, result.candidate.figures
    steps = int(c.metrics_steps) if c.metrics_steps else c.steps
    fin = result.candidate.finished
    timings = fin.timings if fin is not None else {}
    n = timings.get("predicted_n") or (fin.tokens_predicted if fin is not None else None) or c.tokens
    tokens = int(n) - 1 if c.rate_unit == "tok/s" and isinstance(n, (int, float)) and n > 1 else None
    return from_measurement(b.decode_tps, c.decode_tps, c.drafted, c.accepted, steps, tokens, c.accepted_per_position)


def tokens_per_step_safe(alpha: float, gamma: int) -> float:
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)
