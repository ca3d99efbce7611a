"""The certificate: one versioned JSON document (schema: certificate.schema.json beside this module) that
says a candidate server is identical to its baseline and how much faster, derived only from the raw
session files it sits next to, each referenced by its sha256.

    sessions (greedy.jsonl, sampled.jsonl)  ──derive──▶  "derived" (every verdict and figure)
    inputs (prompt set, shard, runs, sampled subset) ┘        │
    measured_on (servers, files, hardware, version, date)     └──▶ verdict line, Markdown, HTML

`derive` is a pure function of the session files and the inputs: `prove` calls it on the files it has
just written, `verify` calls it again (no servers) and compares, and `merge` calls it on the union of
shard runs, so a merged certificate is the one a single run over the same raw data gives. Per prompt,
the verdict is THE verdict (core.verdict.judge) of each recorded run, judged from its recorded events.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from spectui.core.errors import InputError
from spectui.core.figures import per_position_alpha
from spectui.core.runner import PromptResult, same_tokenizer
from spectui.core.stats import LEVEL, over_units
from spectui.core.verdict import judge
from spectui.store.session import Session, load_session, recorded_verdict, recorders_for

FORMAT = "spectui-certificate"
VERSION = 1
SCHEMA = Path(__file__).with_name("certificate.schema.json")
TOLERANCE = 0.02  # an interval within ±2 % of 1.00 is no measurable difference (core.runner.Repeated)
CERT_NAME, MD_NAME, HTML_NAME = "certificate.json", "certificate.md", "certificate.html"


# -- files -----------------------------------------------------------------------------------------
def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def session_ref(path: Path, base: Path, phase: str) -> dict:
    """A session as the certificate references it: its path relative to the certificate, and its sha256."""
    import os

    return {
        "path": os.path.relpath(path.resolve(), base.resolve()),
        "phase": phase,
        "sha256": sha256_of(path),
        "bytes": path.stat().st_size,
    }


def load(path: str | Path) -> dict:
    """A certificate document; a one-line error for a file that is not one (or a newer version)."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / CERT_NAME
    if not p.is_file():
        raise InputError(f"certificate {p} does not exist")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{p} is not a spectui certificate (not JSON: {exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError(f'{p} is not a spectui certificate (no "format": "{FORMAT}")')
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version > VERSION:
        raise InputError(f"{p}: certificate version {version!r}; this spectui reads up to {VERSION}")
    for key in ("inputs", "measured_on", "sessions", "derived"):
        if not isinstance(doc.get(key), dict if key != "sessions" else list):
            raise InputError(f"{p}: the certificate has no valid {key!r}")
    doc["_path"] = str(p)
    return doc


def canonical(doc: dict) -> str:
    """The certificate as written: JSON, keys in a fixed order, without the reader's own `_path`."""
    return json.dumps({k: v for k, v in doc.items() if k != "_path"}, indent=2, ensure_ascii=False) + "\n"


def normalised(obj):
    """What a value reads back as from JSON (tuples → lists, int keys → text): derivations are compared
    in this form."""
    return json.loads(json.dumps(obj))


# -- statistics over prompts -------------------------------------------------------------------------
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
    if n < 2:
        return {"value": r, "low": None, "high": None, "n": 1, "method": None, "reason": "1 prompt: no interval"}
    from scipy import stats  # lazily: spectui --help stays fast

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


# -- one prompt's greedy runs -------------------------------------------------------------------------
@dataclass
class GreedyRun:
    result: PromptResult
    run: int


@dataclass
class PromptRuns:
    index: int  # position in the prompt set
    id: str
    category: str
    runs: list[GreedyRun] = field(default_factory=list)

    @property
    def status(self) -> str:
        st = [r.result.verdict.status for r in self.runs if r.result.verdict is not None]
        if "differs" in st:
            return "differs"
        if st and len(st) == len(self.runs) and all(s == "identical" for s in st):
            return "identical"
        if any(s == "failed" for s in st):
            return "failed"
        return "incomplete"

    def measured(self) -> list[PromptResult]:
        """Runs where both sides finished: only these give a rate, a speed-up or an acceptance figure."""
        return [r.result for r in self.runs if r.result.measured]

    def ratios(self) -> list[float]:
        return [s for r in self.measured() if (s := r.speedup) is not None]

    def acceptance(self) -> dict | None:
        return counts_of(self.measured())

    def first_difference(self) -> GreedyRun | None:
        return next(
            (r for r in self.runs if r.result.verdict is not None and r.result.verdict.status == "differs"), None
        )

    def to_json(self) -> dict:
        diff = self.first_difference()
        sp = set_speedup([self.ratios()])  # this prompt's runs: the same method as the set's
        measured = self.measured()
        cache = {
            side: sum(getattr(r, side).figures.prompt_cached or 0 for r in measured) if measured else None
            for side in ("baseline", "candidate")
        }
        return {
            "id": self.id,
            "category": self.category,
            "runs": len(self.runs),
            "status": self.status,
            "verdicts": [r.result.verdict.status if r.result.verdict else None for r in self.runs],
            "reasons": sorted(
                {r.result.verdict.reason for r in self.runs if r.result.verdict and r.result.verdict.reason}
            ),
            "speedups": self.ratios(),
            "speedup": sp,
            "decode_tps": {
                side: [getattr(r, side).figures.decode_tps for r in measured] for side in ("baseline", "candidate")
            },
            "acceptance": self.acceptance(),
            "prompt_cached": cache,
            "difference": difference_json(diff) if diff is not None else None,
        }


def difference_json(run: GreedyRun) -> dict:
    r = run.result
    d = r.verdict.divergence if r.verdict is not None else None
    t = r.triage
    return {
        "run": run.run,
        "kind": d.kind if d else None,
        "byte": d.byte if d else None,
        "baseline_token": d.baseline_token if d else None,
        "candidate_token": d.candidate_token if d else None,
        "reason": r.verdict.reason if r.verdict else "",
        "baseline_excerpt": d.to_json()["baseline_excerpt"] if d else "",
        "candidate_excerpt": d.to_json()["candidate_excerpt"] if d else "",
        "cause": t.cause if t is not None else None,
        "cause_summary": t.summary if t is not None else None,
        "prompt_cached": [r.baseline.figures.prompt_cached, r.candidate.figures.prompt_cached],
    }


# -- acceptance over a group of prompts --------------------------------------------------------------
def counts_of(results: list[PromptResult]) -> dict | None:
    """The candidate's draft counters over finished runs: the server's own /metrics deltas where it gave
    them, else the stream's counts; per-position counts only where every run that drafted had them."""
    if not results:
        return None
    drafted = accepted = steps = 0
    per_pos: list[int] = []
    have_positions = True
    for r in results:
        f = r.candidate.figures
        d = int(f.metrics_drafted if f.metrics_drafted is not None else f.drafted)
        drafted += d
        accepted += int(f.metrics_accepted if f.metrics_accepted is not None else f.accepted)
        steps += int(f.metrics_steps if f.metrics_steps else f.steps)
        if f.accepted_per_position is not None:
            pos = [int(v) for v in f.accepted_per_position]
            per_pos += [0] * (len(pos) - len(per_pos))
            for i, v in enumerate(pos):
                per_pos[i] += v
        elif d:
            have_positions = False
    source = "server /metrics" if all(r.candidate.figures.metrics_drafted is not None for r in results) else "stream"
    return {
        "drafted": drafted,
        "accepted": accepted,
        "steps": steps,
        "accepted_per_position": per_pos if have_positions and drafted else None,
        "source": source,
    }


def _at(a: dict, i: int) -> int:
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
        from scipy import stats  # lazily: spectui --help stays fast

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


def acceptance_summary(groups: list[PromptRuns]) -> dict | None:
    """Totals, mean accepted length, α and per-position acceptance over the prompts, each with its interval
    (this set, from the runs; and over prompts)."""
    per = [a for g in groups if (a := g.acceptance()) is not None]
    if not per:
        return None
    drafted = sum(a["drafted"] for a in per)
    accepted = sum(a["accepted"] for a in per)
    steps = sum(a["steps"] for a in per)
    if not drafted:
        return {"drafted": 0, "accepted": 0, "steps": steps, "note": "the candidate drafted nothing"}
    passes = sorted({r.run for g in groups for r in g.runs})
    per_pass = [
        c
        for k in passes
        if (c := counts_of([r.result for g in groups for r in g.runs if r.run == k and r.result.measured]))
    ]
    mal = set_ratio(per, per_pass, lambda a: a["accepted"], shift=1.0)
    gamma = drafted / steps if steps else None

    def alpha_at(length: float | None) -> float | None:
        # α rises with accepted/steps at a fixed γ: the ends of that interval give α's
        return per_position_alpha((length - 1) * steps, drafted, steps) if length is not None and steps else None

    alpha = {
        "value": alpha_at(mal["value"]),
        "low": alpha_at(mal["low"]),
        "high": alpha_at(mal["high"]),
        "gamma": gamma,
    }
    positions = None
    if all(a["accepted_per_position"] is not None for a in per if a["drafted"]):
        width = max((len(a["accepted_per_position"] or []) for a in per), default=0)
        positions = [
            {
                "position": i,
                "accepted": sum(_at(a, i) for a in per),
                **set_ratio(per, per_pass, lambda a, i=i: _at(a, i), cap=1.0),
            }
            for i in range(width)
        ]
    return {
        "drafted": drafted,
        "accepted": accepted,
        "steps": steps,
        "acceptance_rate": accepted / drafted,
        "mean_accepted_length": mal,
        "alpha": alpha,
        "per_position": positions,
        "per_position_note": None
        if positions is not None
        else "the server gave no per-position counters (llama.cpp: --metrics; vLLM: spec_decode per-position metrics)",
        "source": "server /metrics" if all(a["source"] == "server /metrics" for a in per) else "stream",
    }


# -- the speed-up over a group of prompts ------------------------------------------------------------------
def set_speedup(units: list[list[float]], level: float = LEVEL) -> dict | None:
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
    out = {
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
        from scipy import stats

        pooled = sum((x - m) ** 2 for u, m in zip(logs, means) for x in u) / df
        se = math.sqrt(pooled * sum(1 / len(u) for u in logs)) / p
        half = float(stats.t.ppf(0.5 + level / 2, df)) * se
        out["low"], out["high"] = math.exp(g - half), math.exp(g + half)
        out["method"] = (
            "this prompt set: geometric mean of the prompts' speed-ups; t-interval from the spread between "
            "interleaved runs of each prompt (pooled)"
        )
    out["over_prompts"] = over_units(units).to_json() if p > 1 else None
    return out


def speed_word(s: dict | None) -> str:
    """faster / slower / no measurable difference, by the README's rule (core.runner.Repeated)."""
    if s is None:
        return "not measured"
    if s["low"] is None:
        return "no interval"
    if s["low"] <= 1.0 <= s["high"] or (1 - TOLERANCE <= s["low"] and s["high"] <= 1 + TOLERANCE):
        return "no measurable difference"
    return "faster" if s["low"] > 1.0 else "slower"


# -- the derivation ------------------------------------------------------------------------------------
def load_sessions(refs: list[dict], base: Path) -> dict[str, list[Session]]:
    out: dict[str, list[Session]] = {"greedy": [], "sampled": []}
    for ref in refs:
        out.setdefault(ref["phase"], []).append(load_session(base / ref["path"]))
    return out


def servers_of(sessions: list[Session]) -> tuple[dict, list[str]]:
    """The servers as the sessions recorded them (without URLs: shards run on other hosts), and where
    sessions disagree."""
    found: dict = {}
    problems: list[str] = []
    for s in sessions:
        for side, info in s.infos.items():
            d = {k: v for k, v in info.to_json().items() if k != "url"}
            if side not in found:
                found[side] = d
            elif found[side] != d:
                diff = sorted(k for k in d if d[k] != found[side].get(k))
                problems.append(f"{s.path.name}: the {side} differs from the other sessions' in {', '.join(diff)}")
    return found, problems


def greedy_groups(sessions: list[Session], order: dict[str, tuple[int, str]]) -> tuple[list[PromptRuns], list[str]]:
    groups: dict[str, PromptRuns] = {}
    problems: list[str] = []
    for s in sessions:
        ids = same_tokenizer(s.infos.get("baseline"), s.infos.get("candidate"))
        for sp in s.prompts:
            if sp.prompt.id not in order:
                problems.append(f"{s.path.name}: prompt {sp.prompt.id!r} is not in the certificate's prompt set")
                continue
            b, c = recorders_for(sp)
            verdict = judge(b, c, ids, sp.damaged)  # judged again from the recorded events
            recorded = recorded_verdict(sp)
            if recorded is not None and not recorded.agrees(verdict):
                problems.append(
                    f"{s.path.name}: {sp.prompt.id}: the run recorded {recorded.line()}; its events give {verdict.line()}"
                )
            r = PromptResult(sp.prompt, b, c, verdict, damaged=sp.damaged, triage=sp.triage)
            saved = sp.result if isinstance(sp.result, dict) else {}
            run = saved.get("run") if isinstance(saved.get("run"), int) else 1
            index, category = order[sp.prompt.id]
            g = groups.setdefault(sp.prompt.id, PromptRuns(index, sp.prompt.id, category))
            g.runs.append(GreedyRun(r, run))
    for g in groups.values():
        g.runs.sort(key=lambda x: x.run)
    return sorted(groups.values(), key=lambda g: g.index), problems


def sampled_json(sessions: list[Session], order: dict, inputs: dict, argv: list[str] | None) -> dict | None:
    """Identity under sampling, per prompt: seeded bytes where the drafting mode promises them, the
    whole-sequence distribution test (labs.sampling, its power beside it) where only the distribution is."""
    cfg = inputs.get("sampled")
    if not cfg or not cfg.get("ids"):
        return None
    from spectui.labs.sampling import SamplingResult, distribution_pass, guarantee_for

    by_id: dict[str, list[PromptResult]] = {}
    info = None
    for s in sessions:
        ids = same_tokenizer(s.infos.get("baseline"), s.infos.get("candidate"))
        info = info or s.infos.get("candidate")
        for sp in s.prompts:
            b, c = recorders_for(sp)
            r = PromptResult(sp.prompt, b, c, judge(b, c, ids, sp.damaged), damaged=sp.damaged)
            r.seed = sp.params.seed
            by_id.setdefault(sp.prompt.id, []).append(r)
    if not by_id:
        return None  # none of the sampled prompts fell in this shard's share
    kind = info.backend if info is not None else "unknown"
    prompts = []
    for pid in sorted(by_id, key=lambda i: order.get(i, (1 << 30, ""))[0]):
        runs = sorted(by_id[pid], key=lambda r: r.seed or 0)
        res = SamplingResult(runs[0].prompt, runs)
        res.guarantee = guarantee_for(kind, info, argv)
        failed = [r.seed for r in runs if r.failed or r.incomplete]
        if not failed and res.seeded_identical < len(runs):
            distribution_pass(res, int(cfg["max_tokens"]))
        t = res.test
        if failed:
            status, why = "failed", f"a side failed on seed {failed[0]}: no verdict"
        elif res.seeded_identical == len(runs):
            status, why = "identical", "every seed byte-identical"
        elif res.guarantee.promise == "seeded bytes":
            status, why = "different", "seeded bytes differ where the candidate's drafting promises them"
        elif t is not None and t.verdict == "different":
            status, why = "different", f"distribution different (p {t.p:.3g})"
        elif t is not None and t.verdict == "consistent" and res.guarantee.promise == "distribution only":
            status, why = "consistent", "distribution consistent"
        elif t is not None and t.verdict == "consistent":
            status, why = "undecided", "seeded bytes differ and whether the candidate promises them is unknown"
        else:
            status, why = "undecided", (t.reason if t is not None and t.reason else "not enough samples to decide")
        prompts.append(
            {
                "id": pid,
                "category": order.get(pid, (0, ""))[1],
                "samples": len(runs),
                "seeded_identical": res.seeded_identical,
                "divergent_seeds": [r.seed for r in runs if r.identical is False],
                "guarantee": res.guarantee.to_json(),
                "status": status,
                "why": why,
                "test": t.to_json() if t is not None else None,
                "compared": res.representation if t is not None else "bytes",
            }
        )
    count = {
        k: sum(1 for p in prompts if p["status"] == k)
        for k in ("identical", "consistent", "different", "undecided", "failed")
    }
    detect = [p["test"]["smallest_detectable_tvd"] for p in prompts if p["status"] == "consistent" and p["test"]]
    return {
        "prompts": prompts,
        "counts": count,
        "passed": count["identical"] + count["consistent"],
        "total": len(prompts),
        # the weakest guarantee among the consistent ones: what every one of them could detect
        "detectable_tvd": (max(detect) if None not in detect else None) if detect else None,
    }


def derive(sessions: dict[str, list[Session]], inputs: dict, measured_on: dict) -> dict:
    """Every verdict and figure of the certificate from its sessions: what `verify` recomputes."""
    order = {p["id"]: (i, p.get("category", "")) for i, p in enumerate(inputs["prompt_set"]["prompts"])}
    greedy = sessions.get("greedy", [])
    servers, problems = servers_of(greedy + sessions.get("sampled", []))
    groups, more = greedy_groups(greedy, order)
    problems += more
    expected = set(inputs.get("share") or [])
    missing = sorted(expected - {g.id for g in groups}, key=lambda i: order[i][0])
    if missing:
        problems.append(f"the sessions hold no run of {len(missing)} prompt(s) of the share: {', '.join(missing[:5])}")
    counts = {k: sum(1 for g in groups if g.status == k) for k in ("identical", "differs", "failed", "incomplete")}
    speed = set_speedup([g.ratios() for g in groups])
    categories = sorted({g.category for g in groups}, key=lambda c: min(g.index for g in groups if g.category == c))
    by_category = {}
    for cat in categories:
        members = [g for g in groups if g.category == cat]
        sp = set_speedup([g.ratios() for g in members])
        by_category[cat or "(none)"] = {
            "prompts": len(members),
            "identical": sum(1 for g in members if g.status == "identical"),
            "speedup": sp,
            "speed": speed_word(sp),
            "acceptance": acceptance_summary(members),
        }
    cand = measured_on.get("servers", {}).get("candidate", {})
    sampled = sampled_json(sessions.get("sampled", []), order, inputs, cand.get("launch_argv"))
    measured = [r for g in groups for r in g.measured()]
    cache = {
        "requested": inputs["params"].get("cache_prompt"),
        **{
            side: {
                "prompt_tokens": sum(getattr(r, side).figures.prompt_tokens or 0 for r in measured),
                "prompt_cached": sum(getattr(r, side).figures.prompt_cached or 0 for r in measured),
            }
            for side in ("baseline", "candidate")
        },
    }
    rate_notes = sorted({n for r in measured if (n := _rate_note(r))})
    derived = {
        "servers": servers,
        "greedy": {
            "prompts": len(groups),
            **counts,
            "runs": sum(len(g.runs) for g in groups),
            "per_prompt": [g.to_json() for g in groups],
        },
        "differences": [
            {"id": g.id, "category": g.category, **difference_json(d)} for g in groups if (d := g.first_difference())
        ],
        "sampled": sampled,
        "speedup": {
            "overall": speed,
            "speed": speed_word(speed),
            "note": "; ".join(rate_notes) or None,
        },
        "acceptance": acceptance_summary(groups),
        "by_category": by_category,
        "cache": cache,
        "problems": problems,
    }
    derived["verdict"] = verdict_of(derived, measured_on)
    return normalised(derived)


def _rate_note(r: PromptResult) -> str | None:
    from spectui.core.figures import rate_basis_note

    return rate_basis_note(r.baseline.figures, r.candidate.figures)


# -- the verdict line ----------------------------------------------------------------------------------
def verdict_of(derived: dict, measured_on: dict) -> dict:
    """The one verdict, in words a reader can act on: first word IDENTICAL or DIFFERENT, or INCOMPLETE where
    no difference was found but something could not be compared (a side failed, too few samples)."""
    g, s = derived["greedy"], derived.get("sampled")
    n = g["prompts"]
    diffs = derived["differences"]
    s_diff = s["counts"]["different"] if s else 0
    if g["differs"] or s_diff:
        status = "different"
    elif g["identical"] == n and n > 0 and (s is None or s["passed"] == s["total"]):
        status = "identical"
    else:
        status = "incomplete"
    if status == "different" and g["differs"]:
        causes: dict[str, int] = {}
        for d in diffs:
            causes[d["cause"] or "not triaged"] = causes.get(d["cause"] or "not triaged", 0) + 1
        what = ", ".join(f"{c} {k}" if len(causes) > 1 else c for c, k in sorted(causes.items(), key=lambda x: -x[1]))
        line = f"DIFFERENT on {g['differs']}/{n} (greedy; cause{'s' if len(causes) > 1 else ''}: {what})"
        if s is not None:
            line += f" · sampled {sampled_words(s)}"
    elif status == "different":
        line = f"DIFFERENT on {s_diff}/{s['total']} (sampled: {sampled_words(s)}) · greedy identical on {g['identical']}/{n}"
    else:
        # no difference found; INCOMPLETE where some prompt was not compared or a sampled one undecided: a
        # certificate that could not compare everything proves nothing about the rest
        unsure = n - g["identical"]
        head = "IDENTICAL on" if status == "identical" else "INCOMPLETE: identical on"
        line = f"{head} {g['identical']}/{n} (greedy"
        line += f"; {unsure} not compared: a side failed or was cut off)" if unsure else ")"
        if s is not None:
            line += f" and {s['passed']}/{s['total']} (sampled, {sampled_words(s)})"
        line += speed_words(derived, measured_on)
    return {"status": status, "line": line}


def sampled_words(s: dict) -> str:
    c = s["counts"]
    parts = []
    if c["identical"]:
        parts.append("seeded bytes identical" + (f" on {c['identical']}" if c["identical"] != s["total"] else ""))
    if c["consistent"]:
        tvd = s.get("detectable_tvd")
        found = f", could detect TVD ≥ {tvd:.2f}" if tvd is not None else ", detectable TVD not computed"
        parts.append(
            "distribution consistent" + (f" on {c['consistent']}" if c["consistent"] != s["total"] else "") + found
        )
    for k in ("different", "undecided", "failed"):
        if c[k]:
            parts.append(f"{c[k]} {'not enough samples to decide' if k == 'undecided' else k}")
    return ", ".join(parts) or "none run"


def speed_words(derived: dict, measured_on: dict) -> str:
    sp = derived["speedup"]["overall"]
    if sp is None:
        return " · no speed-up measured (no run where both sides finished)"
    word = {"slower": "SLOWER ", "no measurable difference": "NO MEASURABLE DIFFERENCE "}.get(
        derived["speedup"]["speed"], ""
    )
    acc = derived.get("acceptance")
    if acc is None or not acc.get("drafted"):
        at = " (the candidate drafted nothing)"
    else:
        a, mal = acc["alpha"]["value"], acc["mean_accepted_length"]["value"]
        at = f" at α {a:.2f} (mean accepted length {mal:.2f})" if a is not None and mal is not None else ""
    from spectui.run.provenance import where

    return f" · {word}{interval_text(sp, unit='×')}{at} {where(measured_on.get('hardware') or {})}"


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
    return f"{v:{spec}}{unit} [{d['low']:{spec}}–{d['high']:{spec}}]"


# -- verify ------------------------------------------------------------------------------------------
@dataclass
class Verification:
    ok: bool
    problems: list[str]
    checked: list[str]


def differences(a, b, path: str = "derived", limit: int = 12) -> list[str]:
    """Where two JSON values differ, as `path: certificate says X, the sessions give Y` lines."""
    out: list[str] = []

    def walk(x, y, p):
        if len(out) >= limit:
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for k in list(x) + [k for k in y if k not in x]:
                walk(x.get(k, _MISSING), y.get(k, _MISSING), f"{p}.{k}")
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for i, (u, v) in enumerate(zip(x, y)):
                walk(u, v, f"{p}[{i}]")
        elif x != y or type(x) is not type(y) and not (_num(x) and _num(y)):
            out.append(f"{p}: the certificate says {_short(x)}, the sessions give {_short(y)}")

    walk(a, b, path)
    return out


_MISSING = object()


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _short(v) -> str:
    if v is _MISSING:
        return "nothing"
    text = json.dumps(v, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "…"


def verify(path: str | Path) -> Verification:
    """Every hash checked and every figure and verdict re-derived from the referenced sessions (no servers)."""
    doc = load(path)
    cert_path = Path(doc["_path"])
    base = cert_path.parent
    problems: list[str] = []
    checked: list[str] = []
    readable = []
    for ref in doc["sessions"]:
        p = base / str(ref.get("path"))
        if not p.is_file():
            problems.append(f"session {ref.get('path')}: missing (the certificate references it)")
            continue
        digest = sha256_of(p)
        if digest != ref.get("sha256"):
            problems.append(
                f"session {ref.get('path')}: sha256 {digest[:16]}… does not match the certificate's "
                f"{str(ref.get('sha256'))[:16]}… (the file was changed after the certificate was made)"
            )
        else:
            checked.append(f"session {ref.get('path')}: sha256 ok")
        readable.append(ref)
    if len(readable) == len(doc["sessions"]):
        try:
            fresh = derive(load_sessions(readable, base), doc["inputs"], doc["measured_on"])
        except InputError as exc:
            problems.append(f"the sessions cannot be read: {exc.one_line()}")
            fresh = None
        if fresh is not None:
            found = differences(doc["derived"], fresh)
            problems += found
            if not found:
                checked.append("every verdict and figure re-derived from the sessions: equal")
            top = doc.get("verdict")
            if top != fresh["verdict"]:
                problems.append(
                    f"verdict: the certificate says {_short(top)}, the sessions give {_short(fresh['verdict'])}"
                )
            for side in ("baseline", "candidate"):
                claimed = doc["measured_on"].get("servers", {}).get(side, {})
                recorded = fresh["servers"].get(side, {})
                for key in ("build", "model", "speculative", "kv_cache", "backend"):
                    if claimed.get(key) != recorded.get(key):
                        problems.append(
                            f"measured_on.servers.{side}.{key}: the certificate says {_short(claimed.get(key))}, "
                            f"the sessions recorded {_short(recorded.get(key))}"
                        )
    from spectui.run.render import render_html, render_markdown

    for name, render in ((MD_NAME, render_markdown), (HTML_NAME, render_html)):
        r = base / rendering_name(cert_path, name)
        if r.is_file():
            if r.read_text(encoding="utf-8") != render(doc):
                problems.append(f"{r.name}: does not match the certificate JSON (edited after it was rendered)")
            else:
                checked.append(f"{r.name}: matches the certificate JSON")
    return Verification(not problems, problems, checked)


def rendering_name(cert_path: Path, default: str) -> str:
    """certificate.json → certificate.md/.html; merged.json → merged.md/.html."""
    return cert_path.with_suffix(Path(default).suffix).name


# -- merge ---------------------------------------------------------------------------------------------
COMPARABLE_INPUTS = ("prompt_set", "params", "runs", "sampled")


def merge(paths: list[str | Path], out: str | Path) -> dict:
    """Shard certificates → the certificate a single run over the same raw data gives: identity counts
    add up and every interval is recomputed from the merged sessions, never averaged."""
    docs = [load(p) for p in paths]
    first = docs[0]
    for d in docs[1:]:
        for key in COMPARABLE_INPUTS:
            if normalised(d["inputs"].get(key)) != normalised(first["inputs"].get(key)):
                raise InputError(
                    f"{d['_path']} and {first['_path']} differ in {key}: not shards of one certificate",
                    hint="merge shards of the same prove command (same prompt set, runs and options)",
                )
    shards = [d["inputs"].get("shard") for d in docs]
    if any(s is None for s in shards):
        raise InputError("merge takes shard certificates (made with --shard I/N); one given is not a shard")
    total = {s["of"] for s in shards}
    if len(total) != 1:
        raise InputError(f"the shards are of different splits ({', '.join(sorted(f'/{t}' for t in total))})")
    n = total.pop()
    seen = sorted(s["index"] for s in shards)
    if seen != list(range(1, n + 1)):
        missing = sorted(set(range(1, n + 1)) - set(seen))
        dup = sorted({i for i in seen if seen.count(i) > 1})
        raise InputError(
            f"shards {'missing: ' + ', '.join(f'{i}/{n}' for i in missing) if missing else ''}"
            f"{'; ' if missing and dup else ''}{'given twice: ' + ', '.join(f'{i}/{n}' for i in dup) if dup else ''}",
            hint="merge every shard of the split exactly once",
        )
    for d in docs:
        v = verify(d["_path"])
        if not v.ok:
            raise InputError(f"{d['_path']} does not verify: {v.problems[0]}", hint="run spectui verify on it")
    for d in docs[1:]:
        for side in ("baseline", "candidate"):
            a, b = (x["derived"]["servers"].get(side, {}) for x in (first, d))
            if a != b:
                keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
                raise InputError(
                    f"{d['_path']}: the {side} server differs from {first['_path']}'s in {', '.join(keys)}"
                )
    out_path = Path(out).expanduser()
    if out_path.is_dir():
        raise InputError(f"-o {out} is a folder", hint="give -o a file name, e.g. merged.json")
    base = out_path.parent
    refs = []
    for d in docs:
        src = Path(d["_path"]).parent
        for ref in d["sessions"]:
            refs.append(session_ref(src / ref["path"], base, ref["phase"]))
    inputs = {**first["inputs"], "shard": None, "share": [p["id"] for p in first["inputs"]["prompt_set"]["prompts"]]}
    mo = dict(first["measured_on"])
    mo["shards"] = [
        {
            "shard": d["inputs"]["shard"],
            "certificate": d["_path"],
            "certificate_sha256": sha256_of(Path(d["_path"])),
            "hardware": d["measured_on"].get("hardware"),
            "date": d["measured_on"].get("date"),
            "urls": {s: d["measured_on"]["servers"][s].get("url") for s in ("baseline", "candidate")},
        }
        for d in sorted(docs, key=lambda d: d["inputs"]["shard"]["index"])
    ]
    hws = {json.dumps(_machine(d["measured_on"].get("hardware")), sort_keys=True) for d in docs}
    if len(hws) > 1:
        mo["hardware_note"] = f"the shards ran on {len(hws)} different machines: each speed-up is paired within one"
    doc = build(inputs, mo, refs, base)
    return doc


def _machine(hw: dict | None) -> dict:
    hw = hw or {}
    return {"cpu": hw.get("cpu"), "gpus": [g.get("name") for g in hw.get("gpus") or []]}


# -- assembling and writing -------------------------------------------------------------------------------
def build(inputs: dict, measured_on: dict, refs: list[dict], base: Path) -> dict:
    derived = derive(load_sessions(refs, base), inputs, measured_on)
    return {
        "format": FORMAT,
        "version": VERSION,
        "verdict": derived["verdict"],
        "inputs": normalised(inputs),
        "measured_on": normalised(measured_on),
        "sessions": refs,
        "derived": derived,
    }


def write(doc: dict, path: Path) -> list[Path]:
    """The certificate JSON and its Markdown and HTML renderings beside it, each written atomically."""
    from spectui.run.render import render_html, render_markdown
    from spectui.store.locations import atomic_write

    doc["_path"] = str(path)
    written = [atomic_write(path, canonical(doc))]
    written.append(atomic_write(path.with_suffix(".md"), render_markdown(doc)))
    written.append(atomic_write(path.with_suffix(".html"), render_html(doc)))
    return written


# -- regress -------------------------------------------------------------------------------------------
EXIT_NO_REGRESSION, EXIT_REGRESSION, EXIT_INCOMPARABLE = 0, 4, 2


@dataclass
class RegressRow:
    what: str
    old: str
    new: str
    change: str
    regression: bool = False


@dataclass
class Regression:
    code: int
    reason: str
    rows: list[RegressRow] = field(default_factory=list)

    def text(self) -> str:
        head = {0: "NO REGRESSION", 4: "REGRESSION", 2: "INCOMPARABLE"}[self.code] + f": {self.reason}"
        if not self.rows:
            return head
        w = max(len(r.what) for r in self.rows)
        wo = max(len(r.old) for r in self.rows)
        wn = max(len(r.new) for r in self.rows)
        lines = [head, "", f"{'':<{w}}  {'old':<{wo}}  {'new':<{wn}}  change"]
        for r in self.rows:
            mark = "  ◀ REGRESSION" if r.regression else ""
            lines.append(f"{r.what:<{w}}  {r.old:<{wo}}  {r.new:<{wn}}  {r.change}{mark}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {
            "code": self.code,
            "reason": self.reason,
            "rows": [r.__dict__ for r in self.rows],
        }


def _model_identity(doc: dict, side: str) -> str | None:
    s = doc["measured_on"].get("servers", {}).get(side, {})
    f = s.get("model_file") or {}
    return f.get("sha256") or s.get("model")


def incomparable(old: dict, new: dict) -> str | None:
    a, b = old["inputs"], new["inputs"]
    if a["prompt_set"]["sha256"] != b["prompt_set"]["sha256"]:
        return (
            f"different prompt sets ({a['prompt_set'].get('name')} {a['prompt_set']['sha256'][:12]} vs "
            f"{b['prompt_set'].get('name')} {b['prompt_set']['sha256'][:12]})"
        )
    if sorted(a.get("share") or []) != sorted(b.get("share") or []):
        return "different shares of the prompt set (merge the shards first, or compare the same shard)"
    for key in ("max_tokens", "cache_prompt"):
        if a["params"].get(key) != b["params"].get(key):
            return f"different {key} ({a['params'].get(key)} vs {b['params'].get(key)})"
    for side in ("baseline", "candidate"):
        x, y = _model_identity(old, side), _model_identity(new, side)
        if x and y and x != y:
            return f"different {side} models ({_short_id(x)} vs {_short_id(y)})"
    return None


def _short_id(v: str) -> str:
    return v[:12] + "…" if len(v) == 64 else v


def _lower(old: dict | None, new: dict | None) -> tuple[bool, str]:
    """Lower beyond the intervals: the new figure's 95 % interval entirely below the old one's (each this
    set's, from its interleaved runs). Without an interval on both sides a change is shown, not judged."""
    if not old or not new or old.get("value") is None or new.get("value") is None:
        return False, "not measured on both"
    change = f"{new['value'] - old['value']:+.3f}"
    if old.get("low") is None or new.get("high") is None:
        return False, f"{change} (no interval: 1 run; not judged)"
    apart = new["high"] < old["low"]
    if apart:
        return True, f"{change}, lower beyond the intervals"
    return False, f"{change}, intervals " + ("apart (higher)" if new["low"] > old["high"] else "overlap")


def regress(old_path: str | Path, new_path: str | Path) -> Regression:
    """Two certificates of the same prompt set: new divergences, acceptance (mean accepted length,
    per-position) lower beyond its intervals, the speed-up's change with its intervals."""
    old, new = load(old_path), load(new_path)
    why = incomparable(old, new)
    if why:
        return Regression(EXIT_INCOMPARABLE, why)
    rows: list[RegressRow] = []
    og, ng = old["derived"]["greedy"], new["derived"]["greedy"]
    ostat = {p["id"]: p["status"] for p in og["per_prompt"]}
    new_div = [p["id"] for p in ng["per_prompt"] if p["status"] == "differs" and ostat.get(p["id"]) != "differs"]
    fixed = [p["id"] for p in ng["per_prompt"] if p["status"] == "identical" and ostat.get(p["id"]) == "differs"]
    rows.append(
        RegressRow(
            "greedy identical",
            f"{og['identical']}/{og['prompts']}",
            f"{ng['identical']}/{ng['prompts']}",
            (f"new divergence on {', '.join(new_div)}" if new_div else "no new divergence")
            + (f"; identical again on {', '.join(fixed)}" if fixed else ""),
            bool(new_div),
        )
    )
    os_, ns = old["derived"].get("sampled"), new["derived"].get("sampled")
    if os_ and ns:
        opass = {p["id"] for p in os_["prompts"] if p["status"] in ("identical", "consistent")}
        worse = [p["id"] for p in ns["prompts"] if p["status"] == "different" and p["id"] in opass]
        rows.append(
            RegressRow(
                "sampled",
                f"{os_['passed']}/{os_['total']}",
                f"{ns['passed']}/{ns['total']}",
                f"now different on {', '.join(worse)}" if worse else "no new difference",
                bool(worse),
            )
        )
    oa, na = old["derived"].get("acceptance") or {}, new["derived"].get("acceptance") or {}
    if oa.get("drafted") or na.get("drafted"):
        low, how = _lower(oa.get("mean_accepted_length"), na.get("mean_accepted_length"))
        rows.append(
            RegressRow(
                "mean accepted length",
                interval_text(oa.get("mean_accepted_length")),
                interval_text(na.get("mean_accepted_length")),
                how,
                low,
            )
        )
        rows.append(
            RegressRow(
                "acceptance per drafted token",
                f"{oa['acceptance_rate']:.1%}" if oa.get("acceptance_rate") is not None else "—",
                f"{na['acceptance_rate']:.1%}" if na.get("acceptance_rate") is not None else "—",
                "shown, not judged (it falls with a longer draft by design)",
            )
        )
        opos, npos = oa.get("per_position") or [], na.get("per_position") or []
        for i in range(min(len(opos), len(npos))):
            low, how = _lower(opos[i], npos[i])
            rows.append(
                RegressRow(
                    f"acceptance at position {i + 1}",
                    interval_text(opos[i], ".1%"),
                    interval_text(npos[i], ".1%"),
                    how,
                    low,
                )
            )
        if len(opos) != len(npos):
            rows.append(RegressRow("positions drafted", str(len(opos)), str(len(npos)), "the draft length changed"))
    osp, nsp = old["derived"]["speedup"]["overall"], new["derived"]["speedup"]["overall"]
    same_hw = _machine(old["measured_on"].get("hardware")) == _machine(new["measured_on"].get("hardware"))
    if osp and nsp:
        low, how = _lower(osp, nsp)
        how = f"{nsp['value'] / osp['value'] - 1:+.1%}, {how.split(', ', 1)[-1] if ', ' in how else how}"
        if not same_hw:
            how += "; measured on different hardware: not judged"
        rows.append(
            RegressRow(
                "speed-up",
                interval_text(osp, unit="×"),
                interval_text(nsp, unit="×"),
                how,
                low and same_hw,
            )
        )
    bad = [r.what for r in rows if r.regression]
    if bad:
        return Regression(EXIT_REGRESSION, f"{', '.join(bad)} worse than in {old['_path']}", rows)
    return Regression(EXIT_NO_REGRESSION, "nothing worse beyond its interval", rows)
