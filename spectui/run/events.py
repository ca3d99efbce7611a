"""What a run session tells its driver as it goes: typed, past-tense events (the CLI prints them, the TUI
turns them into Textual messages). Stream events (tokens) go through the session's fast sink instead."""

from __future__ import annotations

from dataclasses import dataclass

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
