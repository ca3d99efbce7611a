"""The one run loop: a prompt on the baseline and the candidate, events out, results side by side.

The CLI prints what it yields, the TUI draws it through its event sink, the sweep and the labs call the
same pieces with other parameters, and replay feeds it a saved session as another event source.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Protocol

from spectui.core.compare import Divergence, first_difference
from spectui.core.errors import describe
from spectui.core.events import StreamEvent, StreamFailed, TokenEvent
from spectui.core.figures import SideRecorder, rate_basis_note
from spectui.core.findings import ProbeResult, Triage
from spectui.core.stats import TOLERANCE, interval, ratio_interval, speed_call
from spectui.core.types import SIDES, GenerationParams, Prompt, ServerCounters, ServerInfo
from spectui.core.verdict import Verdict, judge

EventSink = Callable[[str, StreamEvent], None]


class Source(Protocol):
    """What the run loop needs of a server (backends.base.Backend is the full contract)."""

    @property
    def kind(self) -> str: ...

    url: str
    info: ServerInfo | None

    async def render_chat(self, messages: list[dict]) -> str: ...

    def stream(self, prompt: str, params: GenerationParams) -> AsyncIterator[StreamEvent]: ...

    async def counters(self) -> ServerCounters | None: ...

    def recorded_verdict(self) -> Verdict | None: ...

    def recorded_findings(self) -> tuple[Triage | None, ProbeResult | None]: ...


class RunObserver:
    """Hooks of a run over several prompts; the session writer and the UIs override what they need."""

    def prompt_started(self, prompt: Prompt, params: GenerationParams, order: str) -> None:
        pass

    def event(self, side: str, ev: StreamEvent) -> None:
        pass

    def prompt_finished(self, result: PromptResult) -> None:
        pass


@dataclass
class PromptResult:
    prompt: Prompt
    baseline: SideRecorder
    candidate: SideRecorder
    # THE verdict (core.verdict.judge), made once when the prompt finished and carried to every view;
    # None only while the prompt runs
    verdict: Verdict | None = None
    rendered: dict[str, str] = field(default_factory=dict)
    damaged: bool = False  # rebuilt from a recording with unreadable records
    run: int = 1  # which repeat of this prompt (1-based) and how many were made
    runs: int = 1
    triage: Triage | None = None  # run.triage's finding for a divergent prompt
    seed: int | None = None  # the request seed, where a lab varies it per run (sampling)
    drafts: ProbeResult | None = None  # run.probe's reconstruction of the rejected drafts
    # replay: where judging the recorded events again disagrees with the recorded verdict, or none was
    # recorded (store.session.verdict_check); every report says it beside the prompt
    rejudged: str | None = None
    # the parameters and order this prompt ran with, where a recording gives them per prompt (a session can
    # hold prompts run with different ones: every report names each prompt's own, core.report.mixed_params)
    params: GenerationParams | None = None
    order: str | None = None

    def side(self, name: str) -> SideRecorder:
        """The recorder of side `name` ("baseline" or "candidate", core.types.SIDES)."""
        if name not in SIDES:
            raise ValueError(f"no side named {name!r}: one of {', '.join(SIDES)}")
        return self.baseline if name == "baseline" else self.candidate

    @property
    def failed(self) -> bool:
        return self.baseline.failed is not None or self.candidate.failed is not None

    @property
    def incomplete(self) -> bool:
        """A side has neither finished nor failed (a cut-off recording): never a verdict."""
        if self.verdict is not None:
            return self.verdict.status == "incomplete"
        return self.damaged or not (self.baseline.done and self.candidate.done)

    @property
    def identical(self) -> bool | None:
        """The carried verdict's answer: True/False, None where there is none (failed, incomplete)."""
        return self.verdict.identical if self.verdict is not None else None

    @property
    def divergence(self) -> Divergence | None:
        return self.verdict.divergence if self.verdict is not None else None

    @property
    def compared(self) -> str:
        return self.verdict.compared if self.verdict is not None else "text"

    @property
    def measured(self) -> bool:
        """Both sides finished: only then do rates, acceptance and a speed-up exist for this prompt."""
        return self.baseline.finished is not None and self.candidate.finished is not None and not self.failed

    @property
    def speedup(self) -> float | None:
        """Candidate decode tokens/s over the baseline's, both measured by spectui; None unless both
        sides finished (a failed or cut-off side measured nothing)."""
        if not self.measured:
            return None
        b, c = self.baseline.figures.decode_tps, self.candidate.figures.decode_tps
        if b and c:
            return c / b
        return None

    @property
    def prompts_differ_at(self) -> int | None:
        """Where the two servers' rendered prompts first differ (None: the same, or not known)."""
        a, b = self.rendered.get("baseline"), self.rendered.get("candidate")
        if not a or not b or a == b:  # a side that rendered nothing (it failed first) differs in nothing
            return None

        return first_difference(a.encode("utf-8"), b.encode("utf-8"))


async def counters_or_none(source: Source) -> ServerCounters | None:
    """A counter reading, or None when the server has none or does not answer (never an error)."""
    try:
        return await source.counters()
    except Exception:
        return None


# why no counter reading came, by what the server said of its /metrics (ServerInfo.metrics_enabled)
NO_COUNTERS = {
    False: "unavailable: the server exports no counters (llama.cpp: start it with --metrics)",
    True: "unavailable: /metrics gave no reading around this request",
    None: "unavailable: no counter reading around this request",
}


def cross_check(
    rec: SideRecorder, before: ServerCounters | None, after: ServerCounters | None, enabled: bool | None = False
) -> None:
    """Compare spectui's drafted/accepted/steps with the server's own counter deltas. `enabled` is what the
    server said of its /metrics: the --metrics hint is given only where it said it has none."""
    f = rec.figures
    if before is None or after is None:
        f.metrics_check = NO_COUNTERS[enabled]
        return
    d = after.minus(before)
    f.metrics_drafted, f.metrics_accepted, f.metrics_steps = d.drafted, d.accepted, d.steps
    f.accepted_per_position = list(d.accepted_per_position) if d.accepted_per_position is not None else None
    if d.drafted is None or d.accepted is None:
        f.metrics_check = "unavailable: no speculation counters in /metrics"
        return
    if d.drafted < 0 or d.accepted < 0 or (d.steps is not None and d.steps < 0):
        f.metrics_check = "unavailable: the server's counters went backwards (restarted?)"
        return
    if rec.counts_from_metrics:  # the stream gave no per-step counts: take the server's
        f.drafted, f.accepted = int(d.drafted), int(d.accepted)
        f.steps = int(d.steps or 0)
        f.metrics_check = "ok (counts from /metrics; labels inferred from chunking)"
        return
    problems = []
    if int(d.drafted) != f.drafted:
        problems.append(f"drafted {f.drafted} vs server {int(d.drafted)}")
    if int(d.accepted) != f.accepted:
        problems.append(f"accepted {f.accepted} vs server {int(d.accepted)}")
    f.metrics_check = "ok" if not problems else "mismatch: " + ", ".join(problems)
    if not problems and d.steps is not None and int(d.steps) != f.steps:
        # not a mismatch: steps whose counter updates fell between the same two events show as one
        f.metrics_check = f"ok (steps {f.steps} in stream, {int(d.steps)} by server)"


# Tokens a server may send past max_tokens before spectui stops reading: above any draft step (llama.cpp's
# --spec-draft-n-max, vLLM's num_speculative_tokens are tens at most), so only a server that ignores
# max_tokens meets it (4,974 tokens in 30 s for max_tokens=128).
OVERRUN_MARGIN = 64


async def bounded(events: AsyncIterator[StreamEvent], params: GenerationParams) -> AsyncIterator[StreamEvent]:
    """A backend's events, ended by a StreamFailed saying so once the server has sent more than
    max_tokens + OVERRUN_MARGIN tokens; the stream below is closed (the connection dropped) there."""
    limit, n = params.max_tokens + OVERRUN_MARGIN, 0
    try:
        async for ev in events:
            if isinstance(ev, TokenEvent):
                n += 1
                if n > limit:
                    yield StreamFailed(
                        time.perf_counter_ns(),
                        f"the server overran max_tokens={params.max_tokens} (it ignores the limit): spectui stopped "
                        f"reading after {limit} tokens",
                    )
                    return
            yield ev
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


async def run_side(
    name: str,
    backend: Source,
    prompt_text: str,
    params: GenerationParams,
    sink: EventSink | None = None,
    rec: SideRecorder | None = None,
) -> SideRecorder:
    """Stream one completion, with the server's counters read before and after to cross-check the counts."""
    rec = rec if rec is not None else SideRecorder(name)
    n_max = (backend.info.speculative or {}).get("n_max") if backend.info is not None else None
    rec.n_max_hint = float(n_max) if isinstance(n_max, (int, float)) and not isinstance(n_max, bool) else None
    before = await counters_or_none(backend)
    async for ev in bounded(backend.stream(prompt_text, params), params):
        rec.feed(ev)
        if sink is not None:
            sink(name, ev)
    if rec.failed is None:
        after = await counters_or_none(backend)
        cross_check(rec, before, after, backend.info.metrics_enabled if backend.info is not None else None)
    return rec


async def render_prompt(backend: Source, prompt: Prompt) -> str:
    if prompt.raw is not None:
        return prompt.raw
    return await backend.render_chat(prompt.messages)


async def compare_prompt(
    baseline: Source,
    candidate: Source,
    prompt: Prompt,
    params: GenerationParams,
    order: str = "sequential",
    sink: EventSink | None = None,
    recorders: dict[str, SideRecorder] | None = None,
    first: str = "baseline",
) -> PromptResult:
    """Sequential by default, so two servers sharing one machine do not distort each other's timing.

    `recorders` lets a caller that draws while the run goes on (the TUI) read the same recorders the
    figures come from; one side failing never stops the other.
    """
    recs = recorders if recorders is not None else {s: SideRecorder(s) for s in SIDES}
    rendered: dict[str, str] = {}

    async def side(name: str, backend: Source) -> None:
        rec = recs[name]
        try:
            text = await render_prompt(backend, prompt)
            rendered[name] = text
            await run_side(name, backend, text, params, sink, rec)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            ev = StreamFailed(0, describe(exc))
            rec.feed(ev)
            if sink is not None:
                sink(name, ev)

    if order == "concurrent":
        await asyncio.gather(side("baseline", baseline), side("candidate", candidate))
    elif first == "candidate":  # repeats alternate which side goes first, so drift falls on both alike
        await side("candidate", candidate)
        await side("baseline", baseline)
    else:
        await side("baseline", baseline)
        await side("candidate", candidate)
    result = PromptResult(prompt, recs["baseline"], recs["candidate"], rendered=rendered)
    result.verdict = verdict_for(baseline, candidate, result)
    result.triage, result.drafts = baseline.recorded_findings()  # a replay carries what its run found
    return result


def verdict_for(baseline: Source, candidate: Source, result: PromptResult) -> Verdict:
    """The verdict a prompt carries: judged here, once; a replayed prompt carries the one its run
    recorded (replay's own recomputation is a check, made and reported by the session loader)."""
    recorded = baseline.recorded_verdict()
    if recorded is not None:
        return recorded
    return judge(result.baseline, result.candidate, same_tokenizer(baseline.info, candidate.info), result.damaged)


def same_tokenizer(a: ServerInfo | None, b: ServerInfo | None) -> bool:
    """Both servers name the same model file: their token ids can be compared."""
    return a is not None and b is not None and bool(a.model) and a.model == b.model


def compare_sides(b: SideRecorder, c: SideRecorder, ids_comparable: bool) -> tuple[Divergence | None, str]:
    """The divergence and what was compared, from THE verdict (core.verdict.judge) of two finished sides."""
    v = judge(b, c, ids_comparable)
    return v.divergence, v.compared


async def run_prompts(
    baseline: Source,
    candidate: Source,
    prompts: list[Prompt],
    params: GenerationParams,
    order: str = "sequential",
    observer: RunObserver | None = None,
    recorders: Callable[[], dict[str, SideRecorder]] | None = None,
    repeat: int = 1,
) -> list[PromptResult]:
    """Every prompt in turn through compare_prompt, `repeat` times each (B C, C B, B C, …), telling the
    observer as it goes. Each repeat is a result of its own, numbered by `run`."""
    obs = observer or RunObserver()
    results = []
    for prompt in prompts:
        for k in range(1, repeat + 1):
            obs.prompt_started(prompt, params, order)
            r = await compare_prompt(
                baseline,
                candidate,
                prompt,
                params,
                order,
                obs.event,
                recorders() if recorders is not None else None,
                first="baseline" if k % 2 else "candidate",
            )
            r.run, r.runs = k, repeat
            r.params, r.order = params, order
            obs.prompt_finished(r)
            results.append(r)
    return results


@dataclass
class Repeated:
    """The N runs of one prompt, with their spread."""

    prompt: Prompt
    runs: list[PromptResult]
    tolerance: float = TOLERANCE  # below what one machine resolves (core.stats.TOLERANCE)

    def _spread(self, values):
        vals = [v for v in values if v is not None]
        return interval(vals) if vals else None

    @property
    def speedup(self):
        """Geometric mean of the paired ratios (each run's candidate over the same run's baseline), with its
        95 % t-interval on their logs (core.stats: its coverage holds from 2 runs)."""
        vals = [r.speedup for r in self.runs if r.speedup is not None]
        return ratio_interval(vals) if vals else None

    @property
    def rate_note(self) -> str | None:
        """Where a ratio divides a server-timed rate by one spectui observed (or the reverse)."""
        return next((n for r in self.runs if (n := rate_basis_note(r.baseline.figures, r.candidate.figures))), None)

    @property
    def measured_runs(self) -> list[PromptResult]:
        """The runs where both sides finished: the only ones a rate, a TTFT or an acceptance comes from
        (a run cut off mid-stream gave the candidate's rate)."""
        return [r for r in self.runs if r.measured]

    @property
    def failed_runs(self) -> list[int]:
        """The runs (1-based) where a side failed or was cut off: counted, never measured or compared."""
        return [r.run for r in self.runs if not r.measured]

    @property
    def compared_runs(self) -> list[PromptResult]:
        """The runs with a verdict on the bytes (identical or not)."""
        return [r for r in self.runs if r.identical is not None]

    def decode(self, side: str):
        return self._spread([r.side(side).figures.decode_tps for r in self.measured_runs])

    def ttft(self, side: str):
        return self._spread([r.side(side).figures.ttft_ms for r in self.measured_runs])

    @property
    def acceptance(self) -> list[float | None]:
        return [r.candidate.figures.acceptance_rate for r in self.measured_runs]

    @property
    def acceptance_moved(self) -> bool:
        """At temperature 0 the acceptance rate should be the same every run; when it moves, that is a finding."""
        known = [a for a in self.acceptance if a is not None]
        return len(set(round(a, 6) for a in known)) > 1

    @property
    def divergent_runs(self) -> list[int]:
        return [r.run for r in self.runs if r.divergence is not None]

    @property
    def verdict(self) -> str:
        s = self.speedup
        if s is None:
            return "not measured"
        if not s.measured:
            return "1 run: no spread measured"
        return speed_call(s.low, s.high, tolerance=self.tolerance)

    def to_json(self) -> dict:
        sp = self.speedup
        # only where a run failed: the figures below then come from fewer runs than "runs" says
        failed = {"failed_runs": self.failed_runs, "compared_runs": len(self.compared_runs)} if self.failed_runs else {}
        return {
            "id": self.prompt.id,
            "runs": len(self.runs),
            **failed,
            "speedup": sp.to_json() if sp else None,
            "verdict": self.verdict,
            "tolerance": self.tolerance,
            "decode_tps": {s: (d.to_json() if (d := self.decode(s)) else None) for s in SIDES},
            "ttft_ms": {s: (d.to_json() if (d := self.ttft(s)) else None) for s in SIDES},
            "acceptance_rate": self.acceptance,
            "acceptance_moved": self.acceptance_moved,
            "divergent_runs": self.divergent_runs,
            "rate_note": self.rate_note,
        }


def grouped(results: list[PromptResult]) -> list[Repeated]:
    """Consecutive runs of the same prompt, as run_prompts made them."""
    out: list[Repeated] = []
    for r in results:
        if out and r.run > 1 and out[-1].prompt is r.prompt:
            out[-1].runs.append(r)
        else:
            out.append(Repeated(r.prompt, [r]))
    return out


async def connect(backend, ready_timeout: float, on_wait=None) -> ServerInfo:
    await backend.wait_ready(ready_timeout, on_wait)
    return await backend.identify()
