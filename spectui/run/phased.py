"""One server at a time: when a GPU cannot hold both servers (labs.memory.plan says so), run every prompt on
the baseline alone, stop it, start the candidate alone and run the same prompts — with the baseline's
recording played beside the candidate's live stream, in step, so a driver draws both panes as it does
side by side. Each pair is then judged by core.verdict.judge exactly as side by side.

Repeats alternate whole phases, B C | C B | B C …, and adjacent phases of one side share a launch (B C
C B is three launches), so a drifting GPU clock falls on both sides alike. In each run the side that
goes second streams live and the first is played from its recording. The session file records each
side timed from its own start, so replay plays them in step too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from spectui.core.errors import describe
from spectui.core.events import StreamEvent, StreamFailed
from spectui.core.figures import SideRecorder
from spectui.core.findings import ProbeResult, Triage
from spectui.core.runner import SIDES, PromptResult, Source, compare_prompt, render_prompt, run_side
from spectui.core.types import GenerationParams, Prompt, ServerCounters, ServerInfo
from spectui.core.verdict import Verdict
from spectui.run.alone import OpenSide
from spectui.run.events import PromptFinished, PromptStarted, RunEvent

ORDER = "one-at-a-time"
# what a side measured that the stream does not carry: the /metrics cross-check
CROSS_CHECK = ("metrics_drafted", "metrics_accepted", "metrics_steps", "metrics_check", "accepted_per_position")


@dataclass
class Phase:
    side: str
    runs: list[int] = field(default_factory=list)


def phases(repeat: int) -> list[Phase]:
    """The launch schedule for `repeat` runs: B C, then C B, … with adjacent phases of one side merged."""
    out: list[Phase] = []
    for k in range(1, repeat + 1):
        for side in SIDES if k % 2 else SIDES[::-1]:
            if out and out[-1].side == side:
                out[-1].runs.append(k)
            else:
                out.append(Phase(side, [k]))
    return out


@dataclass
class Recorded:
    """One side's stream of one prompt, run alone: its events, the figures they made, its prompt text."""

    rec: SideRecorder
    info: ServerInfo | None
    events: list[StreamEvent] = field(default_factory=list)
    rendered: str | None = None


class RecordedSide:
    """A side that already ran, played as a source at its recorded pace (the original events and their
    times: the figures it makes are the ones measured when it ran)."""

    kind = "recorded"

    def __init__(self, name: str, recorded: Recorded) -> None:
        self.recorded = recorded
        self.info = recorded.info
        self.url = recorded.info.url if recorded.info is not None else f"recorded:{name}"

    async def render_chat(self, messages: list[dict]) -> str:
        return self.recorded.rendered or ""

    async def stream(self, prompt: str, params: GenerationParams) -> AsyncIterator[StreamEvent]:
        events = self.recorded.events
        t0 = events[0].t_ns if events else 0
        wall0 = time.perf_counter_ns()
        for ev in events:
            due = max(0, ev.t_ns - t0) if ev.t_ns else 0
            left = due - (time.perf_counter_ns() - wall0)
            if left > 0:
                await asyncio.sleep(left / 1e9)
            yield ev

    async def counters(self) -> ServerCounters | None:
        return None  # its cross-check was made when it ran (copied onto the result)

    def recorded_verdict(self) -> Verdict | None:
        return None

    def recorded_findings(self) -> tuple[Triage | None, ProbeResult | None]:
        return None, None


@dataclass
class Pass:
    """One run over prompts, each with its own generation parameters (`prove`'s sampled pass gives every
    seed its own), recorded by its own writer; `run`/`runs` label its results."""

    items: list[tuple[Prompt, GenerationParams]]
    run: int = 1
    runs: int = 1
    writer: Any = None  # a store.session_writer.SessionWriter, or None: not recorded
    emit: Callable[[RunEvent], None] | None = None
    label: str = ""  # how progress lines name it (default "run N")

    def name(self) -> str:
        return self.label or f"run {self.run}"


class PhasedRun:
    """Runs a prompt set one server at a time; `open_side(side)` starts a side and stops it on exit.

    `on_stream` gets each stream event of the paired runs (the live side and the played one), as the run
    session's does; `say` a line at each phase. `run_passes` runs passes of their own (prove's greedy runs
    and its sampled pass) on one schedule, so a side's adjacent phases share a launch across them too.
    """

    def __init__(
        self,
        open_side: OpenSide,
        params: GenerationParams,
        repeat: int = 1,
        *,
        writer=None,
        emit: Callable[[RunEvent], None] | None = None,
        on_stream: Callable[[str, StreamEvent], None] | None = None,
        recorders: Callable[[], dict[str, SideRecorder]] | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.open_side = open_side
        self.params = params
        self.repeat = repeat
        self.writer = writer
        self.emit = emit or (lambda ev: None)
        self.on_stream = on_stream
        self.recorders = recorders
        self.say = say or (lambda line: None)
        self.seen: dict[str, ServerInfo] = {}  # each side's server as it answered when it was up
        self.launches: list[str] = []  # the sides in the order they were started

    order = ORDER  # the order its report states (run.pair.Run)

    def infos(self) -> dict[str, ServerInfo]:
        """Both sides' identities as each answered when it was up (run.pair.Run)."""
        return dict(self.seen)

    async def run(self, prompts: list[Prompt]) -> list[PromptResult]:
        passes = [
            Pass([(p, self.params) for p in prompts], k, self.repeat, self.writer, self.emit)
            for k in range(1, self.repeat + 1)
        ]
        done = await self.run_passes(passes)
        return [done[k][i] for i in range(len(prompts)) for k in range(self.repeat)]

    async def run_passes(self, passes: list[Pass]) -> list[list[PromptResult]]:
        """Each pass's results in its items' order; the passes alternate whole phases, B C | C B | …"""
        alone: dict[tuple[int, int, str], Recorded] = {}
        paired: dict[tuple[int, int], PromptResult] = {}
        for phase in phases(len(passes)):
            side, other = phase.side, ("candidate" if phase.side == "baseline" else "baseline")
            names = [passes[k - 1].name() for k in phase.runs]
            if all(n.startswith("run ") for n in names):
                names = [f"run{'s' if len(names) > 1 else ''} " + ", ".join(n[4:] for n in names)]
            self.say(f"{side}: starting it alone ({', '.join(names)})")
            self.launches.append(side)
            try:
                async with self.open_side(side) as backend:
                    if backend.info is not None:
                        self.seen[side] = backend.info
                    for k in phase.runs:
                        ps = passes[k - 1]
                        for i, (prompt, params) in enumerate(ps.items):
                            first = alone.get((i, k, other))
                            if first is None:
                                self.say(f"{side} alone: {prompt.id} ({ps.name()})")
                                alone[(i, k, side)] = await self._alone(side, backend, prompt, params)
                            else:
                                paired[(i, k)] = await self._pair(ps, prompt, params, side, backend, other, first)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a side that would not start (or went away) fails what it had left
                why = f"{side} server: {describe(exc)}"
                for k in phase.runs:
                    ps = passes[k - 1]
                    for i, (prompt, params) in enumerate(ps.items):
                        if (i, k) in paired or (i, k, side) in alone:
                            continue
                        failed = Recorded(SideRecorder(side), self.seen.get(side))
                        failed.rec.feed(StreamFailed(0, why))
                        failed.events.append(StreamFailed(0, why))
                        first = alone.get((i, k, other))
                        if first is None:
                            alone[(i, k, side)] = failed
                        else:
                            played = RecordedSide(side, failed)
                            paired[(i, k)] = await self._pair(ps, prompt, params, side, played, other, first)
            self.say(f"{side}: stopped")
        return [[paired[(i, k)] for i in range(len(ps.items))] for k, ps in enumerate(passes, 1)]

    async def _alone(self, name: str, backend: Source, prompt: Prompt, params: GenerationParams) -> Recorded:
        side = Recorded(SideRecorder(name), backend.info)
        try:
            side.rendered = await render_prompt(backend, prompt)
            await run_side(name, backend, side.rendered, params, lambda _s, ev: side.events.append(ev), side.rec)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            ev = StreamFailed(0, describe(exc))
            side.rec.feed(ev)
            side.events.append(ev)
        return side

    async def _pair(
        self,
        ps: Pass,
        prompt: Prompt,
        params: GenerationParams,
        live_side: str,
        live: Source,
        played_side: str,
        played: Recorded,
    ) -> PromptResult:
        """The live side's stream beside the played side's recording, judged as side by side."""
        sources = {live_side: live, played_side: RecordedSide(played_side, played)}
        w, emit = ps.writer, ps.emit or self.emit
        emit(PromptStarted(prompt, params, ORDER))
        if w is not None:
            w.servers({s: self.seen.get(s) or ServerInfo("?") for s in SIDES})
            w.prompt_started(prompt, params, ORDER)
        played_start = played.rec.started_ns

        def sink(side: str, ev: StreamEvent) -> None:
            if w is not None:  # each side timed from its own start
                w.event(side, ev, base_ns=played_start if side == played_side else None)
            if self.on_stream is not None:
                self.on_stream(side, ev)

        r = await compare_prompt(
            sources["baseline"],
            sources["candidate"],
            prompt,
            params,
            "concurrent",
            sink,
            self.recorders() if self.recorders is not None else None,
        )
        for key in CROSS_CHECK:  # what the played side's server counters said when it ran
            setattr(getattr(r, played_side).figures, key, getattr(played.rec.figures, key))
        r.run, r.runs = ps.run, ps.runs
        if w is not None:  # identities learnt during the streams (the speculation type used), as run.session does
            w.servers({s: self.seen.get(s) or ServerInfo("?") for s in SIDES})
            w.prompt_finished(r)
        emit(PromptFinished(r))
        return r
