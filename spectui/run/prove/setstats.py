"""Figures over a prompt set, each with its 95 % interval: a ratio over prompts (acceptance per step, per
position), the same ratio over the interleaved passes over the set, and the speed-up on the set (from the
run-to-run spread within prompts) beside the same over prompts (core.stats.over_units). Deterministic
(no resampling), so shards merged give exactly the single run's figures."""

from __future__ import annotations

import math
import statistics

from spectui.core.stats import LEVEL, MIN_DF, TOO_FEW_RUNS, over_units, speed_call

# below these, an interval is shown but no verdict word is drawn from it: "too few runs to judge"
MIN_PROMPTS = 3  # prompts for an interval over prompts
TOO_FEW = TOO_FEW_RUNS


def ratio_interval(nums: list[float], dens: list[float], cap: float | None = None, level: float = LEVEL) -> dict:
    """Σnum/Σden over prompts (the prompt is the unit) with a t-interval from the ratio estimator's
    linearised variance, Σ(num_i − R·den_i)² / ((n−1)·n·mean(den)²) — deterministic, so shards merged
    give exactly the single run's figures. None values (unmeasured prompts) are left out."""
    pairs = [(a, s) for a, s in zip(nums, dens) if a is not None and s]
    if not pairs:
        return {"value": None, "low": None, "high": None, "n": 0, "method": None, "reason": "nothing measured"}
    n = len(pairs)
    total_a, total_s = sum(a for a, _ in pairs), sum(s for _, s in pairs)
    r = total_a / total_s
    if cap is not None:
        r = min(cap, r)
    if n < MIN_PROMPTS:
        why = "1 prompt: no interval" if n == 1 else f"{n} prompts: too few prompts to judge (an interval needs 3)"
        return {"value": r, "low": None, "high": None, "n": n, "method": None, "reason": why}
    from scipy import stats  # lazy: scipy (~167 ms cold): spectui --help stays fast

    mean_s = total_s / n
    var = sum((a - r * s) ** 2 for a, s in pairs) / (n - 1) / (n * mean_s**2)
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * math.sqrt(var)
    low, high = max(0.0, r - half), r + half
    if cap is not None:
        high = min(cap, high)
    return {
        "value": r,
        "low": low,
        "high": high,
        "n": n,
        "method": "ratio over prompts, t-interval on the linearised ratio estimator",
        "reason": None,
    }


def accepted_at(a: dict, i: int) -> int:
    pos = a.get("accepted_per_position") or []
    return pos[i] if i < len(pos) else 0


def set_ratio(per_prompt: list[dict], per_pass: list[dict], num, cap: float | None = None, shift: float = 0.0) -> dict:
    """A ratio over this prompt set (Σnum/Σsteps) with its 95 % interval from the spread between the
    interleaved passes over the set (run 1 of every prompt, run 2, …): how precisely the set's figure was
    measured. At temperature 0 acceptance does not move between runs on llama.cpp, so the interval is
    then exactly the value. `over_prompts` is the same ratio with the prompt as the unit: what other
    prompts like these would give (wide on a small set)."""
    steps = sum(a["steps"] for a in per_prompt)
    value = sum(num(a) for a in per_prompt) / steps if steps else None
    vals = [num(c) / c["steps"] for c in per_pass if c["steps"]]
    low = high = None
    reason = None
    if value is None:
        reason = "nothing measured"
    elif len(vals) < 2:
        reason = "1 run: no interval from repeats"
    else:
        from scipy import stats  # lazy: scipy (~167 ms cold): spectui --help stays fast

        half = float(stats.t.ppf(0.5 + LEVEL / 2, len(vals) - 1)) * statistics.stdev(vals) / math.sqrt(len(vals))
        low, high = max(0.0, value - half), value + half
        if cap is not None:
            high = min(cap, high)
    over = ratio_interval(
        [num(a) for a in per_prompt if a["steps"]], [a["steps"] for a in per_prompt if a["steps"]], cap
    )

    def sh(v):
        return v + shift if v is not None else None

    return {
        "value": sh(value),
        "low": sh(low),
        "high": sh(high),
        "n": len(vals),
        "method": "this prompt set; t-interval over the interleaved runs" if low is not None else None,
        "reason": reason,
        "over_prompts": {**over, "value": sh(over["value"]), "low": sh(over["low"]), "high": sh(over["high"])},
    }


def set_speedup(
    units: list[list[float]], level: float = LEVEL, shared: list[dict[int, float]] | None = None
) -> dict | None:
    """The speed-up on this prompt set: the geometric mean over prompts of each prompt's mean log ratio,
    with a t-interval from the run-to-run spread within prompts (pooled; Σ(runs − 1) degrees of freedom).
    The prompts are the set's own (fixed), so only run-to-run noise is uncertain; the interleaved repeats
    measure exactly that. `over_prompts` (core.stats.over_units) treats the prompts as a sample instead."""
    units = [[float(v) for v in u] for u in units if u]
    if not units:
        return None
    logs = [[math.log(v) for v in u] for u in units]
    means = [statistics.fmean(u) for u in logs]
    p = len(units)
    g = statistics.fmean(means)
    df = sum(len(u) - 1 for u in logs)
    out: dict[str, object] = {
        "value": math.exp(g),
        "low": None,
        "high": None,
        "prompts": p,
        "runs": sum(len(u) for u in units),
        "df": df,
        "level": level,
        "method": None,
        "reason": None,
    }
    if df == 0:
        out["reason"] = "1 run per prompt: no interval from repeats (--runs 2 or more)"
    else:
        from scipy import stats  # lazy: scipy (~167 ms cold)

        pooled = sum((x - m) ** 2 for u, m in zip(logs, means) for x in u) / df
        se = math.sqrt(pooled * sum(1 / len(u) for u in logs)) / p
        half = float(stats.t.ppf(0.5 + level / 2, df)) * se
        out["low"], out["high"] = math.exp(g - half), math.exp(g + half)
        out["method"] = (
            "this prompt set: geometric mean of the prompts' speed-ups; t-interval from the spread between "
            "interleaved runs of each prompt (pooled)"
        )
    if shared is not None:
        out.update(shared_runs(g, shared, level))
    out["over_prompts"] = over_units(units).to_json() if p >= MIN_PROMPTS else None
    return out


def shared_runs(g: float, shared: list[dict[int, float]], level: float = LEVEL) -> dict:
    """Where every prompt's run k shares run k's launches (one server at a time: each run's block started
    the servers anew), run k moves every prompt's ratio together, and the pooled within-prompt spread
    misses it (a '95 %' interval covered 66 % at 8 prompts with a shift as large as the run noise). The
    interval is then over the runs: each run's geometric mean over the prompts measured in every run,
    a t-interval with runs − 1 degrees of freedom (coverage simulated: tests/unit/test_setstats_coverage.py)."""
    from scipy import stats  # lazy: scipy (~167 ms cold)

    runs = sorted({k for d in shared for k in d})
    complete = [d for d in shared if d and all(k in d for k in runs)]
    means = [statistics.fmean(math.log(d[k]) for d in complete) for k in runs] if complete else []
    if len(means) < 2:
        return {"low": None, "high": None, "df": 0, "method": None, "reason": "1 run: no interval over runs"}
    se = statistics.stdev(means) / math.sqrt(len(means))
    half = float(stats.t.ppf(0.5 + level / 2, len(means) - 1)) * se
    return {
        "low": math.exp(g - half),
        "high": math.exp(g + half),
        "df": len(means) - 1,
        "method": (
            "this prompt set, runs sharing launches: t-interval over the runs' geometric means over the "
            f"{len(complete)} prompt(s) measured in every run ({len(means)} runs)"
        ),
        "reason": None,
    }


def speed_word(s: dict | None) -> str:
    """faster / slower / no measurable difference: core.stats.speed_call's word on the set's interval."""
    if s is None:
        return "not measured"
    df = s.get("df") if isinstance(s.get("df"), int) else None
    return speed_call(s["low"], s["high"], df, MIN_DF)


def interval_text(d: dict | None, spec: str = ".2f", unit: str = "") -> str:
    """`0.31× [0.29–0.33]`, or the value and why it has no interval."""
    if not d:
        return "—"
    v = d.get("value", d.get("median"))
    if v is None:
        return "—"
    if d.get("low") is None:
        why = d.get("reason")
        return f"{v:{spec}}{unit}" + (f" ({why})" if why else "")
    if abs(d["high"] - d["low"]) <= 1e-12 * max(1.0, abs(v)):  # a count every run gave alike: no interval
        return f"{v:{spec}}{unit} (exact)"
    return f"{v:{spec}}{unit} [{d['low']:{spec}}–{d['high']:{spec}}]"
