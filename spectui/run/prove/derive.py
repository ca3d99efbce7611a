"""Every verdict and figure of a certificate, derived from its session files alone (run.prove.certificate
references them by sha256): the greedy runs of each prompt judged again from their recorded events
(core.verdict.judge), triage's recorded causes, the sampled prompts through labs.sampling.exact's promise and
distribution test, the speed-up and the acceptance with their intervals (run.prove.setstats), and the verdict
line. `derive` is pure: `prove`, `verify` and `merge` all call it, so they agree by construction."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from spectui.core.figures import per_position_alpha, rate_basis_note
from spectui.core.runner import PromptResult, same_tokenizer
from spectui.core.types import SIDES
from spectui.core.verdict import judge
from spectui.run.phased import ORDER
from spectui.run.prove import crosscheck
from spectui.run.prove.provenance import machine_name, machines, where_measured
from spectui.run.prove.sampled import sampled_json
from spectui.run.prove.setstats import accepted_at, interval_text, set_ratio, set_speedup, speed_word
from spectui.run.prove.shard import Shard
from spectui.run.prove.warm import judged, warm_json
from spectui.store.session import Session, load_session, recorded_verdict, recorders_for


def normalised(obj):
    """What a value reads back as from JSON (tuples → lists, int keys → text): derivations are compared
    in this form."""
    return json.loads(json.dumps(obj))


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
    off_schedule: bool = False  # its runs are not the inputs' runs 1…N, each once: not compared as scheduled

    @property
    def status(self) -> str:
        if self.off_schedule:
            return "incomplete"
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

    def ratios_by_run(self) -> dict[int, float]:
        return {r.run: s for r in self.runs if r.result.measured and (s := r.result.speedup) is not None}

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
            side: sum(r.side(side).figures.prompt_cached or 0 for r in measured) if measured else None for side in SIDES
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
            "decode_tps": {side: [r.side(side).figures.decode_tps for r in measured] for side in SIDES},
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
    gamma = drafted / steps if steps else None
    # accepted ≤ drafted: the mean accepted length lies in [1, 1 + γ] ⊆ [1, n-max + 1], and so does its interval
    mal = set_ratio(per, per_pass, lambda a: a["accepted"], cap=gamma, shift=1.0)
    positions = _per_position(per, per_pass)
    return {
        "drafted": drafted,
        "accepted": accepted,
        "steps": steps,
        "acceptance_rate": accepted / drafted,
        "mean_accepted_length": mal,
        "alpha": _alpha(mal, drafted, steps, gamma),
        "per_position": positions,
        "per_position_note": None
        if positions is not None
        else "the server gave no per-position counters (llama.cpp: --metrics; vLLM: spec_decode per-position metrics)",
        "source": "server /metrics" if all(a["source"] == "server /metrics" for a in per) else "stream",
    }


def _alpha(mal: dict, drafted: int, steps: int, gamma: float | None) -> dict:
    """α per position at γ, with the interval of the mean accepted length carried over to it."""

    def alpha_at(length: float | None) -> float | None:
        # α rises with accepted/steps at a fixed γ: the ends of that interval give α's
        return per_position_alpha((length - 1) * steps, drafted, steps) if length is not None and steps else None

    return {"value": alpha_at(mal["value"]), "low": alpha_at(mal["low"]), "high": alpha_at(mal["high"]), "gamma": gamma}


def _per_position(per: list[dict], per_pass: list[dict]) -> list[dict] | None:
    """Each draft position's acceptance with its interval; None where a prompt that drafted has no
    per-position counters."""
    if not all(a["accepted_per_position"] is not None for a in per if a["drafted"]):
        return None
    width = max((len(a["accepted_per_position"] or []) for a in per), default=0)
    return [
        {
            "position": i,
            "accepted": sum(accepted_at(a, i) for a in per),
            **set_ratio(per, per_pass, lambda a, i=i: accepted_at(a, i), cap=1.0),
        }
        for i in range(width)
    ]


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
            run = saved["run"] if isinstance(saved.get("run"), int) else 1
            index, category = order[sp.prompt.id]
            g = groups.setdefault(sp.prompt.id, PromptRuns(index, sp.prompt.id, category))
            g.runs.append(GreedyRun(r, run))
    for g in groups.values():
        g.runs.sort(key=lambda x: x.run)
    return sorted(groups.values(), key=lambda g: g.index), problems


def derive(sessions: dict[str, list[Session]], inputs: dict, measured_on: dict) -> dict:
    """Every verdict and figure of the certificate from its sessions: what `verify` recomputes."""
    order = {p["id"]: (i, p.get("category", "")) for i, p in enumerate(inputs["prompt_set"]["prompts"])}
    greedy = sessions.get("greedy", [])
    servers, problems = servers_of(greedy + sessions.get("sampled", []))
    problems += crosscheck.problems_of(sessions)
    groups, more = greedy_groups(greedy, order)
    problems += more
    not_run, more = schedule(groups, inputs, order)
    problems += more
    counts = {k: sum(1 for g in groups if g.status == k) for k in ("identical", "differs", "failed", "incomplete")}

    alone_now = bool(orders_of(greedy)) and orders_of(greedy) == {ORDER}
    # one server at a time: run k of every prompt shares run k's launches, so the interval is over runs
    speed = set_speedup([g.ratios() for g in groups], shared=[g.ratios_by_run() for g in groups] if alone_now else None)
    cand = measured_on.get("servers", {}).get("candidate", {})
    sampled = sampled_json(sessions.get("sampled", []), order, inputs, cand.get("launch_argv"))
    measured = [r for g in groups for r in g.measured()]
    rate_notes = sorted({n for r in measured if (n := _rate_note(r))})
    alone, more = one_at_a_time(greedy + sessions.get("sampled", []), inputs)
    warm, warm_problems = warm_json(groups, greedy, alone)  # a drafter that keeps state: passes apart
    problems += more + warm_problems
    derived = {
        "servers": servers,
        # only where true, so certificates made with both servers up stay as they were (and verify)
        **({"one_at_a_time": {"servers": "one at a time", "line": MEASURED_APART}} if alone else {}),
        "greedy": {
            "prompts": len(groups),
            **counts,
            "runs": sum(len(g.runs) for g in groups),
            "per_prompt": [g.to_json() for g in groups],
            # only where some prompt of the share was not run as scheduled (complete certificates as before)
            **({"not_run": not_run} if not_run else {}),
        },
        "differences": _differences(groups, alone, inputs),
        "sampled": sampled,
        "speedup": {
            "overall": speed,
            "speed": speed_word(speed),
            "note": "; ".join(rate_notes) or None,
            **by_machine(groups, inputs, measured_on),
        },
        "acceptance": acceptance_summary(groups),
        "by_category": _by_category(groups),
        "cache": _cache(inputs, measured),
        "problems": problems,
        **({"warm_passes": warm} if warm else {}),
    }
    derived["verdict"] = judged(verdict_of(derived, measured_on), derived)
    return normalised(derived)


def _by_category(groups: list[PromptRuns]) -> dict:
    """Each category of the set (in the set's order): its prompts, how many identical, its speed-up and
    acceptance."""
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
    return by_category


def _cache(inputs: dict, measured: list[PromptResult]) -> dict:
    """The prompt cache asked for, and the prompt tokens each side computed and took from its cache."""
    return {
        "requested": inputs["params"].get("cache_prompt"),
        **{
            side: {
                "prompt_tokens": sum(r.side(side).figures.prompt_tokens or 0 for r in measured),
                "prompt_cached": sum(r.side(side).figures.prompt_cached or 0 for r in measured),
            }
            for side in SIDES
        },
    }


def _differences(groups: list[PromptRuns], alone: bool, inputs: dict) -> list[dict]:
    """Each differing prompt's first difference; one at a time, an untriaged one says triage was skipped."""
    differences = [
        {"id": g.id, "category": g.category, **difference_json(d)} for g in groups if (d := g.first_difference())
    ]
    skipped = (inputs.get("one_at_a_time") or {}).get("triage")
    for x in differences:
        if alone and x["cause"] is None and skipped:
            x["cause_summary"] = f"triage {skipped}"
    return differences


def orders_of(sessions: list[Session]) -> set[str]:
    return {sp.order for s in sessions for sp in s.prompts}


def by_machine(groups: list[PromptRuns], inputs: dict, measured_on: dict) -> dict:
    """Merged shards that ran on different machines: the speed-up of each machine's prompts ({} otherwise,
    so other certificates stay as they were). A prompt's machine is its shard's (run.prove.shard)."""
    found = machines(measured_on)
    if len(found) < 2:
        return {}
    out = []
    for hw, indices in found:
        of = int(((measured_on.get("shards") or [{}])[0].get("shard") or {}).get("of", 1))
        mine = [g for g in groups if any(Shard(i, of).takes(g.index) for i in indices)]
        sp = set_speedup([g.ratios() for g in mine])
        out.append({"machine": machine_name(hw), "shards": indices, "prompts": len(mine), "speedup": sp})
    return {"by_machine": out}


def schedule(groups: list[PromptRuns], inputs: dict, order: dict) -> tuple[list[str], list[str]]:
    """The share is the denominator: (ids of the share not run as scheduled, problems). A prompt of the
    share with no run, a (prompt, run) recorded twice, or a count of runs other than `inputs.runs` leaves
    that prompt not compared (its group marked off schedule); a prompt run outside the share is a problem."""
    share = inputs.get("share") or [p["id"] for p in inputs["prompt_set"]["prompts"]]
    runs = inputs.get("runs")
    by_id = {g.id: g for g in groups}
    not_run: list[str] = []
    problems: list[str] = []
    for pid in sorted(set(share), key=lambda i: order.get(i, (1 << 30, ""))[0]):
        g = by_id.get(pid)
        if g is None:
            not_run.append(pid)
            problems.append(f"prompt {pid}: in the share, but the sessions hold no run of it")
            continue
        seen = [r.run for r in g.runs]
        twice = sorted({k for k in seen if seen.count(k) > 1})
        if twice:
            problems.append(f"prompt {pid}: run {', '.join(map(str, twice))} recorded twice")
        elif isinstance(runs, int) and sorted(seen) != list(range(1, runs + 1)):
            problems.append(f"prompt {pid}: runs {seen} recorded; inputs.runs says {runs}")
        else:
            continue
        g.off_schedule = True
        not_run.append(pid)
    for g in groups:
        if g.id not in set(share):
            g.off_schedule = True
            problems.append(f"prompt {g.id}: run, but not in the certificate's share")
    return not_run, problems


MEASURED_APART = (
    "the baseline and the candidate were measured one after the other, never both up: each side started alone, "
    "whole phases alternating B C | C B, and each pair judged from the two recordings as side by side"
)


def one_at_a_time(sessions: list[Session], inputs: dict) -> tuple[bool, list[str]]:
    """Whether the sessions recorded every pair measured one after the other (run.phased: never both
    servers up), and where that disagrees with the inputs or between the runs."""
    orders = {sp.order for s in sessions for sp in s.prompts}
    alone = bool(orders) and orders == {ORDER}
    problems = []
    if ORDER in orders and not alone:
        problems.append(
            f"some runs were measured one server at a time and some with both up ({', '.join(sorted(orders))})"
        )
    claimed = inputs.get("params", {}).get("order") == ORDER
    if orders and claimed != alone:
        problems.append(
            f"the inputs say {'one server at a time' if claimed else 'both servers up'}; the sessions recorded "
            f"{', '.join(sorted(orders))}"
        )
    return alone, problems


def _rate_note(r: PromptResult) -> str | None:
    return rate_basis_note(r.baseline.figures, r.candidate.figures)


# -- the verdict line ----------------------------------------------------------------------------------
def verdict_of(derived: dict, measured_on: dict) -> dict:
    """The one verdict, in words a reader can act on: first word IDENTICAL or DIFFERENT, or INCOMPLETE where
    no difference was found but something could not be compared (a side failed, too few samples)."""
    g, s = derived["greedy"], derived.get("sampled")
    not_run = g.get("not_run") or []
    n = g["prompts"] + sum(1 for i in not_run if i not in {p["id"] for p in g["per_prompt"]})
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
        untriaged = "not triaged, one server at a time" if derived.get("one_at_a_time") else "not triaged"
        for d in diffs:
            causes[d["cause"] or untriaged] = causes.get(d["cause"] or untriaged, 0) + 1
        what = ", ".join(f"{c} {k}" if len(causes) > 1 else c for c, k in sorted(causes.items(), key=lambda x: -x[1]))
        line = f"DIFFERENT on {g['differs']}/{n} (greedy; cause{'s' if len(causes) > 1 else ''}: {what})"
        if s is not None:
            line += f" · sampled {sampled_words(s)}"
    elif status == "different":
        assert s is not None  # no greedy difference: the sampled pass found it
        line = f"DIFFERENT on {s_diff}/{s['total']} (sampled: {sampled_words(s)}) · greedy identical on {g['identical']}/{n}"
    else:
        # no difference found; INCOMPLETE where some prompt was not compared or a sampled one undecided: a
        # certificate that could not compare everything proves nothing about the rest
        unsure = n - g["identical"] - len(not_run)
        head = "IDENTICAL on" if status == "identical" else "INCOMPLETE: identical on"
        line = f"{head} {g['identical']}/{n} (greedy"
        if not_run:
            line += f"; {len(not_run)} not run: {', '.join(not_run[:3])}{' …' if len(not_run) > 3 else ''}"
        line += f"; {unsure} not compared: a side failed or was cut off)" if unsure else ")"
        if status == "identical" and s is not None and s["counts"]["consistent"]:
            # the sampled part only found no evidence of a difference: the first words say so, never a bare
            # IDENTICAL over a distribution test
            tvd = s.get("detectable_tvd")
            could = f"could detect TVD ≥ {tvd:.2f}" if tvd is not None else "detectable TVD not computed"
            line = f"IDENTICAL (greedy) on {g['identical']}/{n} · CONSISTENT (sampled, {could}) on "
            line += f"{s['passed']}/{s['total']} ({sampled_words(s)})"
        elif s is not None:
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
    word = {  # the word core.stats.speed_call gave the set's interval; FASTER only where it lies above 1×
        "faster": "FASTER ",
        "slower": "SLOWER ",
        "no measurable difference": "NO MEASURABLE DIFFERENCE ",
        "too few runs to judge": "TOO FEW RUNS TO JUDGE ",
    }.get(derived["speedup"]["speed"], "")
    acc = derived.get("acceptance")
    if acc is None or not acc.get("drafted"):
        at = " (the candidate drafted nothing)"
    else:
        a, mal = acc["alpha"]["value"], acc["mean_accepted_length"]["value"]
        at = f" at α {a:.2f} (mean accepted length {mal:.2f})" if a is not None and mal is not None else ""

    per = derived["speedup"].get("by_machine")
    if per:  # shards on different machines: one speed-up over all of them would mix two hardware
        each = "; ".join(f"{m['machine']} {interval_text(m['speedup'], unit='×')}" for m in per)
        return f" · speed-up per machine: {each}{at} ({where_measured(measured_on)})"
    return f" · {word}{interval_text(sp, unit='×')}{at} {where_measured(measured_on)}"
