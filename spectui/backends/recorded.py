"""A recorded llama-server stream played back as a backend: same events, no server.

Used by the keep-up benchmark, the snapshot tests and anything that needs a stream at a chosen pace.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path

from spectui.backends.base import Backend, Capabilities
from spectui.backends.labeller import LlamaCppLabeller
from spectui.backends.sse import iter_payloads
from spectui.core.events import StreamEvent, StreamFailed, StreamStarted
from spectui.core.types import GenerationParams, ServerInfo


def load_payloads(path: Path) -> list[dict]:
    return [p for p in iter_payloads(path.read_text(encoding="utf-8").splitlines()) if isinstance(p, dict)]


def repeat_stream(payloads: list[dict], n_tokens: int) -> list[dict]:
    """A long stream made by repeating a recorded one's token events, with counters kept cumulative."""
    body = [p for p in payloads if not p.get("stop")]
    final = next(p for p in payloads if p.get("stop"))
    out, predicted, d_off, a_off = [], 0, 0, 0
    last_d = last_a = 0
    while predicted < n_tokens:
        for i, p in enumerate(body):
            q = dict(p)
            t = dict(q.get("timings") or {})
            if "draft_n" in t:
                last_d, last_a = t["draft_n"] + d_off, t["draft_n_accepted"] + a_off
                t["draft_n"], t["draft_n_accepted"] = last_d, last_a
            q["timings"] = t
            step = int(p.get("tokens_predicted", 1)) - (int(body[i - 1].get("tokens_predicted", 0)) if i else 0)
            predicted += max(step, len(q.get("tokens") or []))
            q["tokens_predicted"] = predicted
            out.append(q)
            if predicted >= n_tokens:
                break
        d_off, a_off = last_d, last_a
    fin = dict(final)
    ft = dict(fin.get("timings") or {})
    if "draft_n" in ft:
        ft["draft_n"], ft["draft_n_accepted"] = last_d, last_a
    fin["timings"] = ft
    fin["tokens_predicted"] = predicted
    out.append(fin)
    return out


class ReplayBackend(Backend):
    """Recorded llama.cpp payloads played at `tokens_per_s` (None: as fast as possible), through the real
    labeller: tests, snapshots and benchmarks drive the same code a live llama-server does."""

    kind = "replay"
    capabilities = Capabilities(per_step_counts=True, token_ids=True, recorded=True)

    def __init__(
        self,
        url: str,
        payloads: list[dict],
        info: ServerInfo | None = None,
        tokens_per_s: float | None = None,
        fail_after: int | None = None,
        virtual_ms_per_event: float | None = None,
        pace: str = "recorded",
    ) -> None:
        self.url = url
        self.payloads = payloads
        self.info = info or ServerInfo(
            url=url, backend="replay", build="b11434-pypi", model="SmolLM2-135M-Instruct.Q4_1.gguf"
        )
        self.tokens_per_s = tokens_per_s
        self.fail_after = fail_after
        # a virtual clock: events stamped start + k·interval, so figures are the same every run (snapshots)
        self.virtual_ms_per_event = virtual_ms_per_event
        # on the virtual clock: "recorded" (each payload when the recording's own timings say, so arrivals and
        # timings agree as a live server's do; verify checks they do) or "fixed" (every payload one interval
        # after the last, from 0: the same picture every time, for screenshots)
        self.pace = pace

    async def wait_ready(self, timeout: float = 0, on_wait=None) -> None:
        return None

    async def identify(self) -> ServerInfo:
        assert self.info is not None  # set in __init__
        return self.info

    async def render_chat(self, messages: list[dict]) -> str:
        return messages[-1]["content"]

    async def kv_usage(self) -> tuple[int, int] | None:
        return (117, 2048)

    async def stream(self, prompt: str, params: GenerationParams) -> AsyncIterator[StreamEvent]:
        lab = LlamaCppLabeller()
        clock = time.perf_counter_ns
        pace = None
        if self.virtual_ms_per_event is not None and self.pace == "fixed":
            ticks = iter(range(10**9))
            step = int(self.virtual_ms_per_event * 1e6)
            clock = lambda: next(ticks) * step  # noqa: E731
        elif self.virtual_ms_per_event is not None:
            pace = _RecordedPace(int(self.virtual_ms_per_event * 1e6))
            clock = pace.now
        start = clock()
        yield StreamStarted(start, prompt)
        interval = 1e9 / self.tokens_per_s if self.tokens_per_s else 0
        sent = 0
        for obj in self.payloads:
            if self.fail_after is not None and sent >= self.fail_after:
                yield StreamFailed(clock(), f"connection to {self.url} lost after {sent} tokens (replayed failure)")
                return
            if interval:
                due = start + int(sent * interval)
                now = clock()
                if due > now:
                    await asyncio.sleep((due - now) / 1e9)
            elif sent % 64 == 0:
                await asyncio.sleep(0)  # let the UI breathe, as a network read would
            if pace is not None:
                pace.advance(obj)
                if isinstance(obj.get("generation_settings"), dict):  # the request's own length, as a server says it
                    obj = {**obj, "generation_settings": {**obj["generation_settings"], "n_predict": params.max_tokens}}
            for ev in lab.feed(obj, clock()):
                yield ev
            sent += len(obj.get("tokens") or [])


class _RecordedPace:
    """A virtual clock for a replay: the first event one `step` after the start (the prompt's time), each
    later one when the recording's own cumulative `timings.predicted_ms` says its tokens were made (one
    `step` on where a payload has no timing), so the arrivals agree with the timings the stream reports, as a
    live server's do. Streams follow one another on it (never overlapping, never before the process's
    clock), so sequential sides replayed in turn do not overlap either."""

    floor = 0  # where the last stream replayed on a virtual clock ended
    streams = 0  # streams replayed so far: each one's arrivals get their own sub-microsecond jitter

    def __init__(self, step: int) -> None:
        self.step = max(step, 1)
        _RecordedPace.streams += 1
        # a live stream's gaps never repeat to the nanosecond; a replay's would (verify takes two runs with
        # equal gaps for one run recorded twice): a deterministic jitter below a microsecond per event
        self.jitter = random.Random(_RecordedPace.streams)
        self.t = max(time.perf_counter_ns(), _RecordedPace.floor)
        self.generation: int | None = None  # when the first payload arrived
        self.last_ms = -1.0

    def now(self) -> int:
        _RecordedPace.floor = max(_RecordedPace.floor, self.t + self.step)
        return self.t

    def advance(self, payload: dict) -> None:
        ms = (payload.get("timings") or {}).get("predicted_ms") if isinstance(payload, dict) else None
        if self.generation is None:
            self.t += self.step
            self.generation = self.t
        elif isinstance(ms, (int, float)) and not isinstance(ms, bool) and ms > self.last_ms:
            self.t = max(self.t + 1, self.generation + int(ms * 1e6))
        else:
            self.t += self.step
        if isinstance(ms, (int, float)) and not isinstance(ms, bool):
            self.last_ms = max(self.last_ms, float(ms))
        self.t += self.jitter.randrange(1, 1000)
