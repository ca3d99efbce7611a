"""What a run tells its driver as it goes: typed, past-tense events, defined once here. The run session emits
the first seven; prove's passes add three of their own (a phase begun, a pair done, the certificate written).
Every driver handles them by name: the CLI and prove print `line(event)`, the TUI's comparison screen draws
each in one `match` (tui.screens.compare). Stream events (tokens) go through the session's fast sink instead.

A new event is added in three places: its dataclass here (with its line in `line` where a driver prints it),
the TUI's `match` where the comparison screen draws it, and a test.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spectui.core.findings import ProbeResult, Triage
from spectui.core.runner import PromptResult
from spectui.core.types import GenerationParams, Prompt


@dataclass(frozen=True, slots=True)
class PromptStarted:
    prompt: Prompt
    params: GenerationParams
    order: str


@dataclass(frozen=True, slots=True)
class PromptFinished:
    """The prompt's result, carrying its verdict (core.verdict): every view shows that one."""

    result: PromptResult


@dataclass(frozen=True, slots=True)
class TriageStarted:
    result: PromptResult


@dataclass(frozen=True, slots=True)
class TriageFound:
    result: PromptResult
    triage: Triage


@dataclass(frozen=True, slots=True)
class ProbeStarted:
    result: PromptResult
    what: str  # "starting the draft model …", "rebuilding each step's drafts …"


@dataclass(frozen=True, slots=True)
class ProbeFound:
    result: PromptResult
    drafts: ProbeResult


@dataclass(frozen=True, slots=True)
class StepStopped:
    """Triage or the probe stopped on an error: the run's result stands without it."""

    result: PromptResult
    step: str  # "triage" | "draft probe"
    message: str


RunEvent = PromptStarted | PromptFinished | TriageStarted | TriageFound | ProbeStarted | ProbeFound | StepStopped


# -- prove's passes (run.prove.prove), besides the run session's own events --------------------------------
@dataclass(frozen=True, slots=True)
class PhaseStarted:
    phase: str  # "greedy" | "triage" | "sampled" | "certificate"
    total: int  # requests pairs (prompt runs) in the phase


@dataclass(frozen=True, slots=True)
class Progressed:
    phase: str
    done: int
    total: int
    prompt_id: str

    def milestone(self) -> bool:
        """A line worth printing: every pair, but the sampled pass's (many seeds) at each tenth and its last."""
        return self.phase != "sampled" or self.done == self.total or self.done % max(1, self.total // 10) == 0


@dataclass(frozen=True, slots=True)
class CertificateWritten:
    path: Path
    document: dict


ProveEvent = PhaseStarted | Progressed | CertificateWritten
Event = RunEvent | ProveEvent

PHASES = {
    "greedy": "greedy pass: {total} prompt runs at temperature 0",
    "triage": "triage of {total} differing prompt(s): reruns, cache, log-probabilities",
    "sampled": "sampled pass: {total} seeded prompt runs",
    "certificate": "deriving the certificate from the recorded sessions",
}


def line(ev: Event) -> str | None:
    """What a driver prints of an event, in one line (None: nothing; the result shows it in the report)."""
    match ev:
        case PromptStarted(prompt=prompt):
            return f"{prompt.id} …"
        case TriageStarted(result=result):
            return f"{result.prompt.id} differs: triage (reruns, cache, log-probabilities) …"
        case ProbeStarted(result=result, what=what):
            return f"{result.prompt.id}: {what}"
        case StepStopped(result=result, step=step, message=message):
            return f"{result.prompt.id}: {step} stopped: {message}"
        case PhaseStarted(phase=phase, total=total):
            return PHASES[phase].format(total=total) + " …"
        case Progressed(phase=phase, done=done, total=total, prompt_id=prompt_id):
            return f"{phase} {done}/{total} {prompt_id}"
    return None


def said_when_quiet(ev: Event) -> bool:
    """An event said even with --json: a step that stopped leaves the report without what it would have held."""
    return isinstance(ev, StepStopped)
