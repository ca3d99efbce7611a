"""Replay: one side of a saved session played as a backend, on a clock shared by both sides."""

from __future__ import annotations

import asyncio
import time

from spectui.backends.base import Backend, Capabilities
from spectui.core.events import StreamFailed, TokenEvent
from spectui.core.findings import ProbeResult, Triage
from spectui.core.types import GenerationParams, ServerCounters, ServerInfo
from spectui.core.verdict import Verdict
from spectui.store.session import Session, recorded_verdict


class ReplayControl:
    """The replay's clock, shared by both sides: speed, pause, single steps and seeking.

    Virtual time (ns since the prompt began, in recorded time) advances with the wall clock × speed
    while playing; a step releases the next token; a seek moves virtual time forward (seeking back
    replays the prompt from its start up to the target, as fast as possible).
    """

    def __init__(self, speed: float | None = 1.0) -> None:
        self.speed = speed  # None: as fast as possible
        self.paused = False
        self.steps = 0  # tokens to release while paused
        self.prompt = -1  # the prompt the clock is running for
        self._virtual = 0
        self._wall = time.perf_counter_ns()

    def restart(self, at: int = 0) -> None:
        self._virtual, self._wall = at, time.perf_counter_ns()

    def now(self) -> float:
        if self.speed is None:
            return float("inf")
        if self.paused:
            return self._virtual
        wall = time.perf_counter_ns()
        self._virtual += int((wall - self._wall) * self.speed)
        self._wall = wall
        return self._virtual

    def set_speed(self, speed: float | None) -> None:
        self.now()
        self.speed = speed

    def toggle_pause(self) -> None:
        self.now()
        self.paused = not self.paused
        self._wall = time.perf_counter_ns()

    def step(self) -> None:
        self.paused = True
        self.steps += 1

    def seek(self, delta_ns: int) -> None:
        self.now()
        self._virtual = max(0, self._virtual + delta_ns)

    @property
    def position_ns(self) -> int:
        return int(self._virtual)


def _saved_counts(session: Session, index: int, side: str) -> tuple[float, float, float] | None:
    """The /metrics deltas a side's live run recorded for prompt `index` (None: none recorded)."""
    if not 0 <= index < len(session.prompts):
        return None
    saved = (session.prompts[index].result or {}).get(side) or {}
    if not isinstance(saved, dict) or saved.get("metrics_drafted") is None:
        return None
    try:
        return (
            float(saved["metrics_drafted"]),
            float(saved.get("metrics_accepted") or 0),
            float(saved.get("metrics_steps") or 0),
        )
    except (TypeError, ValueError):
        return None


def _metrics_state(session: Session, side: str) -> bool | None:
    """Whether the side's server had /metrics, as its live run recorded it: True where a prompt recorded
    counters or a check that read them, False where the run said the server exports none, else None."""
    state = None
    for sp in session.prompts:
        saved = (sp.result or {}).get(side)
        if not isinstance(saved, dict):
            continue
        check = saved.get("metrics_check")
        if saved.get("metrics_drafted") is not None or str(check).startswith(("ok", "mismatch")):
            return True
        if isinstance(check, str) and "exports no counters" in check:
            state = False
    return state


class SessionBackend(Backend):
    """Plays one side of a saved session as a backend: the recorded events at the recorded pace × speed.

    Its counters are the recorded cross-check deltas, summed over the prompts played so far, so the run
    loop's before/after reading gives each prompt the deltas its live run saw.
    """

    kind = "session"
    capabilities = Capabilities(recorded=True, counters=True)

    def __init__(self, side: str, session: Session, speed: float | None, control: ReplayControl | None = None) -> None:
        self.side = side
        self.session = session
        self.control = control or ReplayControl(speed)
        self.info = session.infos[side]
        self.url = self.info.url
        self._cursor = 0
        self._played = False  # a prompt was streamed since the last counter reading (the next one is "after")
        if self.info.metrics_enabled is None:  # what the live run learnt of /metrics, from what it recorded
            self.info.metrics_enabled = _metrics_state(session, side)

    async def wait_ready(self, timeout: float = 0, on_wait=None) -> None:
        return None

    async def identify(self) -> ServerInfo:
        return self.session.infos[self.side]

    async def render_chat(self, messages: list[dict]) -> str:
        return messages[-1]["content"] if messages else ""

    async def counters(self) -> ServerCounters | None:
        """The recorded deltas summed over the prompts played so far; None only where the prompt this reading
        is for (the one about to play, or the one just played) recorded no counters, so the first prompt's
        "before" is a zero reading, not a missing one."""
        index = self._cursor - 1 if self._played else self._cursor
        self._played = False
        if _saved_counts(self.session, index, self.side) is None:
            return None
        drafted = accepted = steps = 0.0
        for k in range(self._cursor):
            counts = _saved_counts(self.session, k, self.side)
            if counts is not None:
                drafted, accepted, steps = drafted + counts[0], accepted + counts[1], steps + counts[2]
        return ServerCounters(drafted, accepted, steps)

    async def stream(self, prompt: str, params: GenerationParams):
        if self._cursor >= len(self.session.prompts):
            yield StreamFailed(time.perf_counter_ns(), "no more recorded prompts in this session")
            return
        sp = self.session.prompts[self._cursor]
        ctl = self.control
        if ctl.prompt == -2:  # a seek back: the clock already holds the target position
            ctl.prompt = self._cursor
        elif ctl.prompt != self._cursor:  # the first side to start a prompt starts its clock
            ctl.prompt = self._cursor
            ctl.restart()
        self._cursor += 1
        self._played = True
        events = sp.events[self.side]
        for i, ev in enumerate(events):
            # wait for the replay clock; a single step releases one token while paused
            while ctl.now() < ev.t_ns:
                if ctl.paused and ctl.steps > 0 and isinstance(ev, TokenEvent):
                    ctl.steps -= 1
                    ctl._virtual = max(ctl._virtual, ev.t_ns)
                    break
                await asyncio.sleep(0.005)
            if ctl.speed is None and i % 64 == 0:
                await asyncio.sleep(0)
            # keep the recorded offsets so figures (TTFT, tokens/s) are the recorded ones at any speed
            yield ev

    async def play_probes(self, on_sample) -> None:
        """The recorded live-panel samples of the prompt now playing, on the replay clock."""
        if self._cursor == 0:
            return
        for t, gpus, host in self.session.prompts[self._cursor - 1].probes:
            while self.control.now() < t:
                await asyncio.sleep(0.02)
            on_sample(gpus, host)

    def rewind(self) -> None:
        """Back to the start of the prompt last played (for seeking backwards)."""
        self._cursor = max(0, self._cursor - 1)
        self.control.prompt = -1

    def recorded_verdict(self) -> Verdict | None:
        """The verdict the run recorded for the prompt just played: replay shows it, never its own."""
        if not self._cursor or self.session.prompts[self._cursor - 1].damaged:
            return None
        return recorded_verdict(self.session.prompts[self._cursor - 1])

    def recorded_findings(self) -> tuple[Triage | None, ProbeResult | None]:
        return self.saved_triage(), self.saved_drafts()

    def saved_drafts(self) -> ProbeResult | None:
        """The draft probe's reconstruction recorded for the prompt just replayed, if any."""
        return self.session.prompts[self._cursor - 1].drafts if self._cursor else None

    def saved_triage(self) -> Triage | None:
        """Triage's finding recorded with the prompt last played (replay shows it without any server)."""
        return self.session.prompts[self._cursor - 1].triage if self._cursor else None
