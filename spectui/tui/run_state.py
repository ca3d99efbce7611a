"""The comparison screen's run state: plain data about the runs on screen, and the run session's sink.

The TUI drives the same RunSession as `spectui compare`: run, verdict, triage, probe and the session record
happen there. The session's two callbacks (`sink`) keep only what the session reads back (the recorders of the
prompt running, the results) and post everything else to the screen as `RunPosted` messages (tui.messages):
one `TokensArrived` a frame with every stream event that arrived since (never dropping one; a batch is also
cut before each run event, so the screen gets them in the session's order), and each run event as it is. The
screen (tui.screens.compare) draws them in its handler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from textual.message import Message

from spectui.core.compare import LiveComparer
from spectui.core.events import StreamEvent
from spectui.core.figures import SideRecorder
from spectui.core.runner import SIDES, PromptResult
from spectui.core.types import Prompt
from spectui.run import events
from spectui.run.session import RunSession
from spectui.store.session import Session
from spectui.tui.messages import RunPosted, ScreenEvent, TokensArrived
from spectui.tui.repeats import place_replayed

FLUSH_S = 0.03  # batch token updates every ~30 ms instead of one message per token


class RunState:
    """What the screen knows of its runs; `post` is the screen's post_message (thread-safe in Textual)."""

    def __init__(self, post: Callable[[Message], object]) -> None:
        self.post = post
        self.session: RunSession | None = None  # the run session of the run on screen
        self.recorders: dict[str, SideRecorder] = {s: SideRecorder(s) for s in SIDES}
        self.comparer = LiveComparer()
        self.results: list[PromptResult] = []
        self.records: list[int] = []  # replaying: the session record each result was played from
        self.replayed: Session | None = None  # the session a replay plays (None: live servers)
        self.last_prompt: Prompt | None = None
        self.picked: Prompt | None = None
        self.repeat = 1  # runs per side of each prompt (the settings row's "runs")
        self.running = False
        self.pending: dict[str, list[StreamEvent]] = {s: [] for s in SIDES}
        self.run_done = asyncio.Event()
        self.generation = 0  # which run is current: a cancelled run's cleanup must not end the next one
        self.frames = 0  # flushes (frames) that drew new tokens in either pane
        self.on_screen: Prompt | None = None  # the prompt the panes show (last_prompt runs ahead of them)
        self.said_save_error = False
        self.history: list[str] = []  # the prompts typed, for ↑/↓ in the prompt box
        self.history_pos = 0

    @property
    def last(self) -> PromptResult | None:
        return self.results[-1] if self.results else None

    # -- the prompt box's history -----------------------------------------------------------------
    def remember(self, text: str) -> None:
        if not self.history or self.history[-1] != text:
            self.history.append(text)
        self.history_pos = len(self.history)

    def recall(self, step: int) -> str | None:
        """↑ (-1) / ↓ (+1): the prompt typed before or after the one shown ("" past the newest)."""
        if not self.history:
            return None
        self.history_pos = max(0, min(len(self.history), self.history_pos + step))
        return self.history[self.history_pos] if self.history_pos < len(self.history) else ""

    # -- a new run ----------------------------------------------------------------------------------
    def begin(self) -> int:
        """A new run is current: what a cancelled run left is never drawn over it."""
        self.generation += 1
        self.pending = {s: [] for s in SIDES}
        self.run_done.clear()
        return self.generation

    def say(self, generation: int, event: ScreenEvent) -> None:
        self.post(RunPosted(generation, event, self.recorders))

    # -- the run session's events: the sink keeps what the session reads back and posts the rest ------
    def sink(self, generation: int) -> tuple[Callable[[events.RunEvent], None], Callable[[str, StreamEvent], None]]:
        """The session's two callbacks for run `generation`: a cancelled run's late events are dropped."""

        def emit(ev: events.RunEvent) -> None:
            if generation != self.generation:
                return
            self.flush()  # the stream events before it go first: the screen sees them in this order
            if isinstance(ev, events.PromptStarted):
                self.last_prompt = ev.prompt
                self.recorders = {s: SideRecorder(s) for s in SIDES}  # the session feeds these from now on
            elif isinstance(ev, events.PromptFinished):
                self.keep(ev.result)
            self.say(generation, ev)

        def on_stream(side: str, ev: StreamEvent) -> None:
            if generation == self.generation:
                self.pending[side].append(ev)

        return emit, on_stream

    def keep(self, result: PromptResult) -> None:
        if self.replayed is not None:  # numbered as recorded (run k of n), as replay --no-tui reads the file
            place_replayed(self.replayed, result, self.results, self.records)
        else:
            self.results.append(result)

    def flush(self) -> None:
        """The stream events that arrived since the last frame, as one TokensArrived (the screen's ~30 ms
        timer, and before each run event); never drops one."""
        if any(self.pending.values()):
            batch, self.pending = self.pending, {s: [] for s in SIDES}
            self.say(self.generation, TokensArrived(batch))
