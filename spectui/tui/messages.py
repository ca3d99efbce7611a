"""The TUI's Textual messages (posting's and harlequin's messages.py): what the run, the servers and the probes
tell the comparison screen, past-tense, as data.

A run's events are the run session's own (spectui.run.events), carried as they are in one `RunPosted`; the
screen handles each by name (`match`). Three more happen only in the TUI and are defined here beside it: a
frame's stream events (`TokensArrived`, ~30 ms, never a token dropped, cut before any run event so every
event reaches the screen in the order the session saw it), the run cancelled, and the run's worker ended.
Each `RunPosted` carries the generation of the run it belongs to: a cancelled run's late events are never
drawn over the next run.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from spectui.core.events import StreamEvent
from spectui.core.figures import SideRecorder
from spectui.core.runner import PromptResult
from spectui.core.types import ServerInfo
from spectui.run.events import RunEvent


@dataclass(frozen=True, slots=True)
class TokensArrived:
    """One frame's stream events of each side (tokens, start, finish, failure), in arrival order."""

    events: dict[str, list[StreamEvent]]


@dataclass(frozen=True, slots=True)
class RunCancelled:
    """The run was cancelled (Esc) before it ended."""


@dataclass(frozen=True, slots=True)
class RunEnded:
    """The run's worker ended (done, cancelled or failed): whatever it posted before is drawn first.
    `results`: the whole set's, where it ran to its end (its figure goes under the verdict)."""

    results: list[PromptResult] | None


ScreenEvent = RunEvent | TokensArrived | RunCancelled | RunEnded


class RunPosted(Message):
    """One event of run `generation`, with the recorders the session fed when it was posted."""

    def __init__(self, generation: int, event: ScreenEvent, recorders: dict[str, SideRecorder]) -> None:
        super().__init__()
        self.generation, self.event, self.recorders = generation, event, recorders


class SideChanged(Message):
    """A side's server changed state (connecting, starting, failed …): its pane says so."""

    def __init__(self, side: str, state: str, note: str = "") -> None:
        super().__init__()
        self.side, self.state, self.note = side, state, note


class SideConnected(Message):
    """A side's server answered who it is. `ready`: the pane says ready (else it keeps its state: a side up
    alone for a run streams at once)."""

    def __init__(self, side: str, info: ServerInfo, ready: bool = True) -> None:
        super().__init__()
        self.side, self.info, self.ready = side, info, ready


class PairStarted(Message):
    """Both launched servers are up (their backends made): the screen connects them."""


class PairFailed(Message):
    """The launched pair did not come up: `failed` the sides whose server exited or is named in `why`."""

    def __init__(self, why: str, failed: set[str]) -> None:
        super().__init__()
        self.why, self.failed = why, failed


class ProbeSampled(Message):
    """A live-panel sample; a newer one replaces an older one still in the queue."""

    def __init__(self, gpus, host, procs, gpu_note) -> None:
        super().__init__()
        self.gpus, self.host, self.procs, self.gpu_note = gpus, host, procs, gpu_note

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ProbeSampled)
