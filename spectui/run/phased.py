"""One server at a time: when a GPU cannot hold both servers (labs.memplan says so), run every prompt on
the baseline, stop it, start the candidate and run the same prompts, then judge each pair.

The verdicts, labels and acceptance are the same as side by side (core.verdict.judge on the same two
streams); the session file records both sides of each prompt as if they had run together, each side's
times from its own start, so replay plays the baseline's recording in step with the candidate's.
Repeats alternate whole phases, B C | C B | B C …, and adjacent phases of one side share a launch
(B C C B is three launches), so a drifting GPU clock falls on both sides alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

from spectui.core.errors import describe
from spectui.core.events import StreamEvent, StreamFailed
from spectui.core.figures import SideRecorder
from spectui.core.runner import SIDES, PromptResult, Source, render_prompt, run_side, same_tokenizer
from spectui.core.types import GenerationParams, Prompt, ServerInfo
from spectui.core.verdict import judge
from spectui.run.events import PromptFinished, PromptStarted, RunEvent

ORDER = "one-at-a-time"
# a side that is up: the backend to stream from; leaving the context stops the server
OpenSide = Callable[[str], AbstractAsyncContextManager[Source]]


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
class _Side:
    rec: SideRecorder
    events: list[StreamEvent] = field(default_factory=list)
    rendered: str | None = None


class PhasedRun:
    """Runs a prompt set one server at a time; `open_side(side)` starts a side and stops it on exit."""

    def __init__(
        self,
        open_side: OpenSide,
        params: GenerationParams,
        repeat: int = 1,
        *,
        writer=None,
        emit: Callable[[RunEvent], None] | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.open_side = open_side
        self.params = params
        self.repeat = repeat
        self.writer = writer
        self.emit = emit or (lambda ev: None)
        self.say = say or (lambda line: None)
        self.infos: dict[str, ServerInfo] = {}
        self.schedule = phases(repeat)

    async def run(self, prompts: list[Prompt]) -> list[PromptResult]:
        done: dict[tuple[int, int, str], _Side] = {}
        for phase in self.schedule:
            runs = ", ".join(map(str, phase.runs))
            self.say(f"{phase.side}: starting it alone (run{'s' if len(phase.runs) > 1 else ''} {runs})")
            try:
                async with self.open_side(phase.side) as backend:
                    if backend.info is not None:
                        self.infos[phase.side] = backend.info
                    for k in phase.runs:
                        for i, prompt in enumerate(prompts):
                            done[(i, k, phase.side)] = await self._one(phase.side, backend, prompt)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a side that would not start fails every prompt of its phase
                why = describe(exc)
                for k in phase.runs:
                    for i in range(len(prompts)):
                        if (i, k, phase.side) not in done:
                            side = _Side(SideRecorder(phase.side))
                            failed = StreamFailed(0, f"{phase.side} server: {why}")
                            side.rec.feed(failed)
                            side.events.append(failed)
                            done[(i, k, phase.side)] = side
            self.say(f"{phase.side}: stopped")
        return self._results(prompts, done)

    async def _one(self, name: str, backend: Source, prompt: Prompt) -> _Side:
        side = _Side(SideRecorder(name))
        try:
            side.rendered = await render_prompt(backend, prompt)
            await run_side(name, backend, side.rendered, self.params, lambda _s, ev: side.events.append(ev), side.rec)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            ev = StreamFailed(0, describe(exc))
            side.rec.feed(ev)
            side.events.append(ev)
        return side

    def _results(self, prompts: list[Prompt], done: dict[tuple[int, int, str], _Side]) -> list[PromptResult]:
        ids = same_tokenizer(self.infos.get("baseline"), self.infos.get("candidate"))
        out = []
        for i, prompt in enumerate(prompts):
            for k in range(1, self.repeat + 1):
                b, c = done[(i, k, "baseline")], done[(i, k, "candidate")]
                rendered = {s: x.rendered for s, x in (("baseline", b), ("candidate", c)) if x.rendered is not None}
                r = PromptResult(prompt, b.rec, c.rec, rendered=rendered, run=k, runs=self.repeat)
                r.verdict = judge(b.rec, c.rec, ids)  # THE verdict, exactly as side by side
                self.emit(PromptStarted(prompt, self.params, ORDER))
                self._record(r, b, c)
                self.emit(PromptFinished(r))
                out.append(r)
        return out

    def _record(self, r: PromptResult, b: _Side, c: _Side) -> None:
        w = self.writer
        if w is None:
            return
        w.servers({s: self.infos.get(s) or ServerInfo("?") for s in SIDES})
        w.prompt_started(r.prompt, self.params, ORDER)
        for name, side in (("baseline", b), ("candidate", c)):
            start = side.rec.started_ns if side.rec.started_ns is not None else None
            for ev in side.events:
                w.event(name, ev, base_ns=start)  # each side's times from its own start
        w.prompt_finished(r)
