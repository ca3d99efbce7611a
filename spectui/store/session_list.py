"""Listing saved sessions: one summary line per file; a bad file is reported, never hides the others."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spectui.core.errors import InputError
from spectui.store.session import load_session, results_for


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


def summarise(path: Path) -> SessionSummary:
    try:
        s = load_session(path)
    except InputError as exc:
        return SessionSummary(path, "", "", "", "", 0, None, None, None, problem=str(exc))
    # verdicts rebuilt from the recorded events, as replay does (a saved result line may be missing or stale)
    results = results_for(s)
    flags = [r.identical for r in results]
    identical = False if False in flags else (True if flags and all(f is True for f in flags) else None)
    last = results[-1] if results else None
    return SessionSummary(
        path,
        s.created,
        s.infos["baseline"].describe_speedup(),
        s.infos["candidate"].describe_speedup(),
        s.prompts[0].prompt.id if s.prompts else "—",
        len(s.prompts),
        identical,
        last.speedup if last else None,
        last.candidate.figures.acceptance_rate if last else None,
    )


def list_sessions(folder: Path) -> list[SessionSummary]:
    if not folder.is_dir():
        return []
    return [summarise(p) for p in sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)]
