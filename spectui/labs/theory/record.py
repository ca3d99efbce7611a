"""The formula's measured terms kept after the servers are gone: the record `spectui prove`
puts in a certificate ("terms") and `spectui theory --from S --save` appends to the session S (a "terms"
record, store.session), or keeps beside it (S.terms.json) where the session must stay as recorded.

Each prompt's entry holds the raw times its terms came from (labs.theory.curve.CostCurve.to_json: ms as the
servers timed them) and the check made of them (labs.theory.terms.TheoryCheck.to_json). The times are recorded
figures: nothing can measure them again without the servers. The check is derivable: wherever the record
is read (`spectui verify`, `spectui report`) it is derived again from those times and the session's own
runs, so a reader is never shown α, a speed-up or a prediction that the session does not give.

A session a certificate references is checked by its sha256, so it stays as it was recorded: its terms go
to the side file, which names the session's sha256 (so does a session whose last line was cut). Readers
take the session's own record first, then the side file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from spectui.core.errors import InputError
from spectui.core.runner import grouped
from spectui.labs.theory.costs import check_prompt
from spectui.labs.theory.curve import CostCurve
from spectui.labs.theory.terms import check_runs
from spectui.store.bounded import load_json_file
from spectui.store.locations import atomic_write
from spectui.store.session import append_terms, read_terms, results_for

FORMAT = "spectui-terms"
VERSION = 1
SUFFIX = ".terms.json"
HOW = (
    "measured after the greedy runs on the servers compared, on separate requests of token ids (labs.theory.costs): "
    "V(k) and R(k) from llama-server's prompt_ms (V(k) plus what every position's outputs add, where the "
    "verification-batch probe ran: each entry's sources say), c from the draft model's decode step on its own "
    "llama-server"
)


def entry(pid: str, chk, curve) -> dict:
    """One prompt's terms: the raw measurement (None where nothing was measured) and the check."""
    return {
        "id": pid,
        "measurement": curve.to_json() if curve is not None else None,
        "check": chk.to_json() if chk is not None else None,
        "why_none": None if chk is not None else "the candidate drafted nothing in this prompt's runs",
    }


def record(entries: list[dict], repeats: int, draft_model: str | None) -> dict:
    return json.loads(
        json.dumps(
            {
                "format": FORMAT,
                "version": VERSION,
                "how": HOW,
                "repeats": repeats,
                "draft_model": draft_model,
                "prompts": entries,
            }
        )
    )


async def measure(
    client,
    baseline,
    candidate,
    groups,
    draft_model: str | None = None,
    repeats: int = 3,
    say: Callable[[str], None] | None = None,
    done: Callable[[int, str], None] | None = None,
    draft_named: str = "named with --draft-model",
    launched=None,
) -> dict:
    """The terms of each prompt's runs (core.runner.Repeated groups, as read back from the session file),
    measured on the live servers (labs.theory.costs.check_prompt), as a record."""
    entries = []
    for i, g in enumerate(groups, 1):
        chk, curve = await check_prompt(
            client, baseline, candidate, g.runs, draft_model, repeats, say, draft_named=draft_named, launched=launched
        )
        entries.append(entry(g.prompt.id, chk, curve))
        if done is not None:
            done(i, g.prompt.id)
    return record(entries, repeats, draft_model)


def runs_by_prompt(sessions) -> dict[str, list]:
    """Each prompt's recorded runs (core.runner.PromptResult) across sessions (a merged certificate's
    shards hold disjoint prompts)."""
    return runs_of([r for s in sessions for r in results_for(s)])


def runs_of(results: list) -> dict[str, list]:
    out: dict[str, list] = {}
    for g in grouped(results):
        out.setdefault(g.prompt.id, []).extend(g.runs)
    return out


def rederive(e: dict, runs: list):
    """The check of one entry derived again from its recorded times and the session's runs (TheoryCheck, or
    None where no run drafted)."""
    m = e.get("measurement")
    if m is None or not runs:
        return None
    curve = CostCurve.from_json(m)
    return check_runs(runs, curve.terms(), curve.terms_each())


def from_stored(rec: dict, groups) -> tuple[dict, dict]:
    """Each group's check and curve from a kept record (core.runner.Repeated groups, as read back from the
    session): the times as measured then, the check derived again from them and the runs now. A prompt the
    record does not hold gets (None, None)."""
    by_id = {e.get("id"): e for e in rec.get("prompts") or [] if isinstance(e, dict)}
    checks: dict = {}
    curves: dict = {}
    for g in groups:
        e = by_id.get(g.prompt.id)
        m = e.get("measurement") if e else None
        try:
            checks[g.prompt.id] = rederive(e, g.runs) if e else None
            curves[g.prompt.id] = CostCurve.from_json(m) if m else None
        except InputError as exc:
            raise InputError(f"the terms kept for {g.prompt.id!r} are refused: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"the terms kept for {g.prompt.id!r} cannot be read ({exc!r})") from None
    return checks, curves


# -- the side file beside a session ----------------------------------------------------------------------
def side_path(session_path: str | Path) -> Path:
    p = Path(session_path).expanduser()
    return p.with_name(p.name + SUFFIX)


def _certified(p: Path) -> bool:
    """Whether a certificate in the session's folder references it (then its bytes must not change)."""
    cert = p.parent / "certificate.json"
    try:
        doc = load_json_file(cert, "certificate") if cert.is_file() else None
    except InputError:
        return True  # unreadable: it may reference the session, so leave the session as it is
    refs = doc.get("sessions") if isinstance(doc, dict) else None
    return any(isinstance(r, dict) and r.get("path") == p.name for r in refs or [])


def save(session_path: str | Path, rec: dict) -> Path:
    """Append the record to the session as a "terms" record; beside it (atomically, naming the session file
    and its sha256) where a certificate references the session or its last line was cut. Returns where."""
    p = Path(session_path).expanduser()
    if not _certified(p) and append_terms(p, rec):
        return p
    return save_beside(p, rec)


def save_beside(session_path: str | Path, rec: dict) -> Path:
    """Write the record beside the session (atomically), naming the session file and its sha256."""
    p = Path(session_path).expanduser()
    data = p.read_bytes()
    doc = {**rec, "session": {"file": p.name, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}}
    return atomic_write(side_path(p), json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


def load_beside(session_path: str | Path) -> tuple[dict | None, list[str]]:
    """The record saved beside a session, or None; warnings (one line each) where it cannot be used or the
    session was recorded to since."""
    side = side_path(session_path)
    if not side.is_file():
        return None, []
    try:
        rec = load_json_file(side, "terms record")
    except InputError as exc:
        return None, [f"{exc}; no measured terms shown"]
    if not isinstance(rec, dict) or rec.get("format") != FORMAT or not isinstance(rec.get("prompts"), list):
        return None, [f'{side}: not a spectui terms record (no "format": "{FORMAT}"); no measured terms shown']
    if not isinstance(rec.get("version"), int) or rec["version"] > VERSION:
        return None, [f"{side}: terms record version {rec.get('version')!r}; this spectui reads up to {VERSION}"]
    warnings = []
    digest = hashlib.sha256(Path(session_path).expanduser().read_bytes()).hexdigest()
    if (rec.get("session") or {}).get("sha256") != digest:
        warnings.append(
            f"{side.name}: the session changed after the terms were measured; the check uses the session's runs "
            "now and the times measured then"
        )
    return rec, warnings


def checks_for(rec: dict, runs: dict[str, list]) -> dict:
    """prompt id → TheoryCheck (or None) derived from the record's times and the runs (for the HTML report)."""
    out = {}
    for e in rec.get("prompts") or []:
        if e.get("id") in runs:
            try:
                out[e["id"]] = rederive(e, runs[e["id"]])
            except (KeyError, TypeError, ValueError) as exc:
                raise InputError(f"the terms recorded for {e['id']!r} cannot be read ({exc!r})") from None
    return out


def entries_for(rec: dict, checks: dict) -> list[dict]:
    """The record's entries with each check as derived now (what the text and Markdown reports show)."""
    return [
        {
            **e,
            "check": checks[e["id"]].to_json() if checks.get(e.get("id")) is not None else None,
        }
        for e in rec.get("prompts") or []
        if e.get("id") in checks
    ]


def stored(session_path: str | Path, in_session: dict | None = None) -> tuple[dict | None, list[str]]:
    """The terms kept with a session: its own "terms" record (`in_session` where the session is loaded
    already), else the side file; warnings where one cannot be used."""
    rec = in_session if in_session is not None else read_terms(session_path)
    if rec is None:
        return load_beside(session_path)
    if rec.get("format") != FORMAT or not isinstance(rec.get("prompts"), list):
        return None, [f"{session_path}: its terms record is not a spectui terms record; no measured terms shown"]
    if not isinstance(rec.get("version"), int) or rec["version"] > VERSION:
        return None, [
            f"{session_path}: terms record version {rec.get('version')!r}; this spectui reads up to {VERSION}"
        ]
    return rec, []


def for_report(session_path: str | Path, results: list) -> tuple[dict | None, dict, list[str]]:
    """What `spectui report` shows of the terms kept with a session: (the record with each check derived
    again from its times and the session's runs, prompt id → TheoryCheck, warnings); (None, {}, …) where
    none was saved."""
    rec, warnings = stored(session_path)
    if rec is None:
        return None, {}, warnings
    checks = checks_for(rec, runs_of(results))
    return {**rec, "prompts": entries_for(rec, checks)}, checks, warnings
