"""What the TUI says of a prompt's repeated runs and of the whole set: core.report's own figures and texts.

A replay numbers each result as its run recorded it (run k of n, one prompt object per group of repeats,
as store.session.results_for does for `replay --no-tui`), so core.runner.grouped, core.report.repeat_text
and core.report.whole_set give the TUI the figures the text report prints for the same file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spectui.core.findings import finding_lines
from spectui.core.report import repeat_text, whole_set
from spectui.core.runner import PromptResult, grouped
from spectui.core.types import ServerInfo
from spectui.core.warmth import warm_passes
from spectui.store.replay import SessionBackend

if TYPE_CHECKING:
    from spectui.backends.base import Backend
    from spectui.store.session import Session


def replayed_session(backends: dict[str, Backend]) -> Session | None:
    """The session a replay plays (None for live servers)."""
    backend = backends.get("baseline")
    return backend.session if isinstance(backend, SessionBackend) else None


def recorded_runs(session: Session) -> int:
    """Runs per prompt as the session recorded them (its `--repeat`): the settings row's "runs"."""
    counts = [sp.result.get("runs") for sp in session.prompts if isinstance(sp.result, dict)]
    return max([n for n in counts if isinstance(n, int) and n >= 1], default=1)


def place_replayed(session: Session, result: PromptResult, results: list[PromptResult], records: list[int]) -> None:
    """Put a replayed prompt's result into `results` numbered as recorded (run k of n); `records` holds each
    result's record index. A record played again (a seek back) replaces its earlier result."""
    index = next((i for i, sp in enumerate(session.prompts) if sp.prompt is result.prompt), None)
    if index is not None:
        saved = session.prompts[index].result
        saved = saved if isinstance(saved, dict) else {}
        run, runs = saved.get("run"), saved.get("runs")
        if isinstance(run, int) and isinstance(runs, int) and 1 <= run <= runs:
            result.run, result.runs = run, runs
        if index in records:  # played again: everything from it on is played again too
            del results[records.index(index) :], records[records.index(index) :]
        if result.run > 1 and results and results[-1].prompt.id == result.prompt.id:
            result.prompt = results[-1].prompt  # one prompt object per group of repeats, as results_for
    results.append(result)
    records.append(-1 if index is None else index)


def runs_line(results: list[PromptResult]) -> str | None:
    """The last prompt's speed-up over its runs so far with its interval and acceptance (core.report's
    repeat_text, as the text report's "repeated runs"); None until it has two runs."""
    if not results:
        return None
    group = grouped(results)[-1]
    return repeat_text(group) if len(group.runs) > 1 else None


def whole_set_line(results: list[PromptResult], candidate: ServerInfo | None = None) -> str | None:
    """The whole set's one figure with its acceptance (core.report.whole_set), over two or more prompts;
    where the candidate's drafter keeps state, its passes judged apart (warm_line); and where a drafting
    candidate changed the greedy output, the finding core.findings states (how often, and the causes)."""
    ws = whole_set(results)
    finding = finding_lines(results)
    lines = [
        f"whole set {ws.text()}" if ws is not None else None,
        warm_line(candidate, results),
        finding[0] if finding else None,
    ]
    return "\n".join(x for x in lines if x) or None


def warm_line(candidate: ServerInfo | None, results: list[PromptResult]) -> str | None:
    """A candidate whose drafter keeps state, run more than once: each pass judged apart (core.warmth)."""
    w = warm_passes(results, candidate.speculative.get("state") if candidate is not None else None)
    return f"warm passes: {w.line}" if w is not None and len(w.passes) > 1 else None
