"""The TUI's Textual messages (posting's and harlequin's messages.py): what the run session and the probes
tell the app, past-tense, as data.

The run session's typed events (spectui.run.events) are wrapped one for one; the stream's token events
arrive batched, one `TokensArrived` per side and frame (~30 ms, never a token dropped), cut before any run
event so every message reaches the app in the order the session saw it. Each run message carries the
generation of the run it belongs to: a cancelled run's late messages are never drawn over the next run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

from spectui.run import events

if TYPE_CHECKING:
    from spectui.core.events import StreamEvent
    from spectui.core.figures import SideRecorder
    from spectui.core.findings import ProbeResult, Triage
    from spectui.core.runner import PromptResult
    from spectui.core.types import Prompt


class RunMessage(Message):
    """A message of one run (`generation`: which run; the presenter draws only the current one's)."""

    def __init__(self, generation: int) -> None:
        super().__init__()
        self.generation = generation


class TokensArrived(RunMessage):
    """One frame's stream events of each side (tokens, start, finish, failure), in arrival order, with
    the recorders they were recorded into."""

    def __init__(
        self, generation: int, events: dict[str, list[StreamEvent]], recorders: dict[str, SideRecorder]
    ) -> None:
        super().__init__(generation)
        self.events, self.recorders = events, recorders


class PromptStarted(RunMessage):
    def __init__(self, generation: int, event: events.PromptStarted, recorders: dict[str, SideRecorder]) -> None:
        super().__init__(generation)
        self.prompt: Prompt = event.prompt
        self.recorders = recorders  # the new prompt's, fed by the session from now on


class PromptFinished(RunMessage):
    """The prompt's result, carrying its verdict (core.verdict)."""

    def __init__(self, generation: int, event: events.PromptFinished) -> None:
        super().__init__(generation)
        self.result: PromptResult = event.result


class TriageStarted(RunMessage):
    pass


class TriageFound(RunMessage):
    def __init__(self, generation: int, event: events.TriageFound) -> None:
        super().__init__(generation)
        self.result: PromptResult = event.result
        self.triage: Triage = event.triage


class ProbeStarted(RunMessage):
    def __init__(self, generation: int, event: events.ProbeStarted) -> None:
        super().__init__(generation)
        self.what = event.what


class ProbeFinished(RunMessage):
    """The draft probe found what the draft proposed where the target said no."""

    def __init__(self, generation: int, event: events.ProbeFound) -> None:
        super().__init__(generation)
        self.result: PromptResult = event.result
        self.drafts: ProbeResult = event.drafts


class StepStopped(RunMessage):
    def __init__(self, generation: int, event: events.StepStopped) -> None:
        super().__init__(generation)
        self.step, self.text = event.step, event.message


class RunCancelled(RunMessage):
    """The run was cancelled (Esc) before it ended."""


class RunEnded(RunMessage):
    """The run's worker ended (done, cancelled or failed): whatever it posted before is drawn first.
    `results`: the whole set's, where it ran to its end (its figure goes under the verdict)."""

    def __init__(self, generation: int, results: list[PromptResult] | None) -> None:
        super().__init__(generation)
        self.results = results


def wrap(generation: int, ev: events.RunEvent) -> RunMessage:
    """The Textual message of one run event (PromptStarted is made by the presenter, with its recorders)."""
    if isinstance(ev, events.PromptFinished):
        return PromptFinished(generation, ev)
    if isinstance(ev, events.TriageStarted):
        return TriageStarted(generation)
    if isinstance(ev, events.TriageFound):
        return TriageFound(generation, ev)
    if isinstance(ev, events.ProbeStarted):
        return ProbeStarted(generation, ev)
    if isinstance(ev, events.ProbeFound):
        return ProbeFinished(generation, ev)
    if isinstance(ev, events.StepStopped):
        return StepStopped(generation, ev)
    raise TypeError(f"no message for {type(ev).__name__}")


class ProbeSampled(Message):
    """A live-panel sample; a newer one replaces an older one still in the queue."""

    def __init__(self, gpus, host, procs, gpu_note) -> None:
        super().__init__()
        self.gpus, self.host, self.procs, self.gpu_note = gpus, host, procs, gpu_note

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ProbeSampled)
