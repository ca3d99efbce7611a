"""A certificate's warm passes: for a candidate whose drafter keeps state between requests (backends.spectypes),
each pass judged apart from the recorded greedy sessions (core.warmth), and whether every prompt had a warm
run — a certificate over cold runs only says nothing of the server as it runs all day.

Derived from the sessions, as every figure of the certificate, so `spectui verify` derives it again:
the chain is what the candidate's final events named (`speculative.types`), the requests a drafter had been
sent before a run are counted in the order the sessions recorded them.
"""

from __future__ import annotations

from spectui.backends import spectypes
from spectui.core.warmth import warm_passes
from spectui.store.session import Session

ONE_AT_A_TIME = (
    "one server at a time starts the candidate anew for each pass: every run of its stateful drafter was cold"
)
NO_WARM_PASS = "a stateful drafter ({note}) with no warm run of {ids}: give --runs 2 or more"


def candidate_chain(results) -> tuple[str, ...]:
    """Every type the candidate's final events named, in order, over `results`."""
    found: list[str] = []
    for r in results:
        fin = r.candidate.finished
        if fin is not None:
            found += spectypes.chain_of(fin.settings.get("speculative.types") or fin.settings.get("speculative.type"))
    return spectypes.chain_of(found)


def recorded_order(sessions: list[Session]) -> dict[tuple[str, int], int]:
    """(prompt id, run) → how many requests the candidate had been sent before it, over the sessions in order."""
    seen: dict[tuple[str, int], int] = {}
    n = 0
    for s in sessions:
        for sp in s.prompts:
            saved = sp.result if isinstance(sp.result, dict) else {}
            run = saved["run"] if isinstance(saved.get("run"), int) else 1
            seen.setdefault((sp.prompt.id, run), n)
            n += 1
    return seen


def warm_json(groups, sessions: list[Session], alone: bool = False) -> tuple[dict | None, list[str]]:
    """(the warm passes, problems) for prove's greedy groups (run.prove.derive.PromptRuns); (None, []) where the
    candidate keeps no state between requests. `alone`: one server at a time, which starts the candidate anew
    for each pass (run.phased), so no run is warm."""
    results = [run.result for g in groups for run in g.runs]
    note = spectypes.state_note(candidate_chain(results))
    if note is None:
        return None, []
    order = recorded_order(sessions)
    seen = {id(run.result): order[(g.id, run.run)] for g in groups for run in g.runs if (g.id, run.run) in order}
    warm = warm_passes(results, note, seen, {id(run.result): run.run for g in groups for run in g.runs})
    if warm is None:
        return None, []
    cold_only = [g.id for g in groups if alone or not any(run.run > 1 for run in g.runs)]
    problems = [ONE_AT_A_TIME] if alone else []
    if cold_only:
        ids = ", ".join(cold_only[:3]) + (" …" if len(cold_only) > 3 else "")
        problems.append(NO_WARM_PASS.format(note=note, ids=ids))
    return {**warm.to_json(), "cold_only": cold_only, "prompts": _moved(groups)}, problems


def _moved(groups) -> list[dict]:
    """Each prompt whose bytes differ in some run: was its cold run identical, which runs differ, and what the
    drafter drafted in each run — where the cold run is identical and a warm one not, the state moved them."""
    out = []
    for g in groups:
        runs = sorted(g.runs, key=lambda x: x.run)
        differ = [x.run for x in runs if x.result.identical is False]
        if not differ:
            continue
        cold = runs[0].result.identical if runs and runs[0].run == 1 else None
        out.append(
            {
                "id": g.id,
                "cold_identical": cold,
                "differs_in_runs": differ,
                "drafted": [x.result.candidate.figures.drafted for x in runs],
                "state_dependent": cold is True,
            }
        )
    return out


def verdict_words(derived: dict) -> str:
    """The warm finding appended to the verdict line, where the candidate keeps state; '' otherwise."""
    w = derived.get("warm_passes")
    if not w:
        return ""
    if w.get("cold_only"):
        return f" · cold only on {len(w['cold_only'])} prompt(s): the certificate says nothing of the server warm"
    return f" · {w['line']}"


def judged(verdict: dict, derived: dict) -> dict:
    """The one verdict (run.prove.derive.verdict_of) with the warm finding in its line; IDENTICAL becomes
    INCOMPLETE where a stateful drafter's prompt was run cold only."""
    words = verdict_words(derived)
    if not words:
        return verdict
    status, line = verdict["status"], verdict["line"]
    if status == "identical" and (derived.get("warm_passes") or {}).get("cold_only"):
        status, line = "incomplete", f"INCOMPLETE: {line}"
    return {"status": status, "line": line + words}
