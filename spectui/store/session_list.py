"""Listing saved sessions: one summary line per file; a bad file is reported, never hides the others.

A listing reads each file's header and its summary records only — the servers, each prompt and each
prompt's recorded result (its verdict, speed-up and acceptance) — found by their line prefixes in a
memory map and parsed alone; the stream events, nearly all of a file's bytes, are never parsed (a
1,000,000-event session took 7.8 s to list when every file was loaded whole). `spectui replay` and
`report` still read everything and check each verdict against its events.
"""

from __future__ import annotations

import json
import mmap
import re
from dataclasses import dataclass
from pathlib import Path

import orjson

from spectui.store.session import FORMAT, VERSION, _info

# a record's first bytes as the writer puts them (orjson, or json.dumps with or without spaces), at the
# start of a line: found in one pass (a find for each of the 8 took 2.4 s on a 134 MB session, this 0.4 s)
_KINDS = ("servers", "prompt", "result", "run")
# (never at the file's very start: that is the header's line)
_RECORD = re.compile(rb'\n\{"type": ?"(' + b"|".join(k.encode() for k in _KINDS) + rb')"')


@dataclass
class SessionSummary:
    path: Path
    created: str
    baseline: str
    candidate: str
    prompt: str
    n_prompts: int
    identical: bool | None
    speedup: float | None
    acceptance: float | None
    problem: str | None = None

    def line(self) -> str:
        if self.problem:
            return f"{self.path.name}: {self.problem}"
        same = {True: "identical", False: "DIFFERS", None: "—"}[self.identical]
        sp = (
            f"{self.speedup:.2f}× at {self.acceptance:.0%} accepted"
            if self.speedup and self.acceptance is not None
            else (f"{self.speedup:.2f}× (no drafts)" if self.speedup else "—")
        )
        return (
            f"{self.created[:19]:<20} {self.path.name:<40} {self.prompt:<16} {self.n_prompts:>2} prompts  "
            f"{same:<9} {sp}  [{self.candidate}]"
        )


def _problem(path: Path, why: str) -> SessionSummary:
    return SessionSummary(path, "", "", "", "", 0, None, None, None, problem=why)


def _summary_records(data) -> list[tuple[int, str, dict]]:
    """(offset, kind, record) of every summary record, in file order; an unreadable one is left out."""
    found = [(m.start() + 1, m.group(1).decode()) for m in _RECORD.finditer(data)]
    out = []
    for at, kind in found:
        end = data.find(b"\n", at)
        try:
            rec = orjson.loads(data[at : end if end != -1 else len(data)])
        except orjson.JSONDecodeError:
            continue  # the last line cut mid-write, or a damaged one: replay names it
        if isinstance(rec, dict):
            out.append((at, kind, rec))
    return out


def _number(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def summarise(path: Path) -> SessionSummary:
    try:
        with open(path, "rb") as fh:
            head = json.loads(fh.readline() or b"null")
            if not isinstance(head, dict) or head.get("format") != FORMAT:
                return _problem(path, f"{path} is not a spectui session (its first line is not a spectui header)")
            version = head.get("version")
            if not isinstance(version, int) or isinstance(version, bool) or version > VERSION:
                return _problem(path, f"{path}: session format version {version!r}, not one this spectui reads")
            if fh.seek(0, 2) == 0:
                return _problem(path, f"{path} is empty")
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                records = _summary_records(data)
    except (OSError, ValueError) as exc:
        return _problem(path, f"{path} cannot be read ({exc})")
    servers = [r for _, k, r in records if k == "servers"]
    prompts = [r for _, k, r in records if k == "prompt"]
    results_after: list[dict | None] = []  # each prompt's result (the record after it, before the next prompt)
    for _, kind, rec in records:
        if kind == "prompt":
            results_after.append(None)
        elif kind == "result" and results_after and results_after[-1] is None:
            results_after[-1] = rec
    infos = {}
    for side in ("baseline", "candidate"):
        try:
            infos[side] = _info(servers[-1][side]).describe_speedup() if servers else "?"
        except (KeyError, TypeError, ValueError, AttributeError):
            infos[side] = "?"
    flags = [r.get("identical") if r is not None else None for r in results_after]
    identical = False if False in flags else (True if flags and all(f is True for f in flags) else None)
    last = next((r for r in reversed(results_after) if r is not None), None)
    first = prompts[0].get("prompt") if prompts else None
    candidate = last.get("candidate") if last is not None else None
    return SessionSummary(
        path,
        str(head.get("created", "?")),
        infos["baseline"],
        infos["candidate"],
        str(first.get("id", "?")) if isinstance(first, dict) else "—",
        len(prompts),
        identical,
        _number(last.get("speedup")) if last is not None else None,
        _number(candidate.get("acceptance_rate")) if isinstance(candidate, dict) else None,
    )


def list_sessions(folder: Path) -> list[SessionSummary]:
    if not folder.is_dir():
        return []
    return [summarise(p) for p in sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)]
