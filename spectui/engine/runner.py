"""Run one prompt on the baseline and the candidate, and put the two results side by side."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from spectui.engine import metrics as M
from spectui.engine.compare import Divergence, compare_tokens
from spectui.engine.errors import describe
from spectui.engine.events import StreamEvent, StreamFailed
from spectui.engine.figures import SideRecorder
from spectui.engine.llamacpp import GenerationParams, LlamaCppBackend, ServerInfo
from spectui.engine.prompts import Prompt

EventSink = Callable[[str, StreamEvent], None]


@dataclass
class PromptResult:
    prompt: Prompt
    baseline: SideRecorder
    candidate: SideRecorder
    divergence: Divergence | None = None
    rendered: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.baseline.failed is not None or self.candidate.failed is not None

    @property
    def identical(self) -> bool | None:
        if self.failed:
            return None
        return self.divergence is None

    @property
    def speedup(self) -> float | None:
        """Candidate decode tokens/s over the baseline's, both measured by spectui."""
        b, c = self.baseline.figures.decode_tps, self.candidate.figures.decode_tps
        if b and c:
            return c / b
        return None


async def run_side(
    name: str,
    backend: LlamaCppBackend,
    prompt_text: str,
    params: GenerationParams,
    sink: EventSink | None = None,
) -> SideRecorder:
    """Stream one completion, with /metrics scraped before and after to cross-check the counts."""
    rec = SideRecorder(name)
    before = await metrics_or_none(backend)
    async for ev in backend.stream(prompt_text, params):
        rec.feed(ev)
        if sink is not None:
            sink(name, ev)
    if rec.failed is None:
        after = await metrics_or_none(backend)
        cross_check(rec, before, after, getattr(backend, "spec_metric_names", LLAMACPP_SPEC))
    return rec


async def metrics_or_none(backend) -> dict[str, float] | None:
    """A /metrics scrape, or None when the server has none or does not answer (never an error)."""
    try:
        return await backend.metrics()
    except Exception:
        return None


LLAMACPP_SPEC = (M.SPEC_DRAFTED, M.SPEC_ACCEPTED, M.SPEC_STEPS, "llamacpp:spec_decode_num_accepted_tokens_per_pos_total")


def cross_check(rec: SideRecorder, before: dict | None, after: dict | None, names: tuple = LLAMACPP_SPEC) -> None:
    """Compare spectui's drafted/accepted/steps with the server's own /metrics deltas."""
    f = rec.figures
    if before is None or after is None:
        f.metrics_check = "unavailable: server runs without --metrics"
        return
    drafted, accepted, steps, per_pos = names
    f.metrics_drafted = M.delta(before, after, drafted)
    f.metrics_accepted = M.delta(before, after, accepted)
    f.metrics_steps = M.delta(before, after, steps)
    f.accepted_per_position = M.per_position(before, after, per_pos)
    if f.metrics_drafted is None or f.metrics_accepted is None:
        f.metrics_check = "unavailable: no spec_decode counters in /metrics"
        return
    if getattr(rec, "counts_from_metrics", False):  # the stream gave no per-step counts: take the server's
        f.drafted, f.accepted = int(f.metrics_drafted), int(f.metrics_accepted)
        f.steps = int(f.metrics_steps or 0)
        f.metrics_check = "ok (counts from /metrics; labels inferred from chunking)"
        return
    problems = []
    if int(f.metrics_drafted) != f.drafted:
        problems.append(f"drafted {f.drafted} vs server {int(f.metrics_drafted)}")
    if int(f.metrics_accepted) != f.accepted:
        problems.append(f"accepted {f.accepted} vs server {int(f.metrics_accepted)}")
    f.metrics_check = "ok" if not problems else "mismatch: " + ", ".join(problems)
    if not problems and f.metrics_steps is not None and int(f.metrics_steps) != f.steps:
        # not a mismatch: steps whose bytes were withheld together show as one in the stream
        f.metrics_check = f"ok (steps {f.steps} in stream, {int(f.metrics_steps)} by server)"


async def render_prompt(backend: LlamaCppBackend, prompt: Prompt) -> str:
    if prompt.raw is not None:
        return prompt.raw
    return await backend.render_chat(prompt.messages)


async def compare_prompt(
    baseline: LlamaCppBackend,
    candidate: LlamaCppBackend,
    prompt: Prompt,
    params: GenerationParams,
    order: str = "sequential",
    sink: EventSink | None = None,
) -> PromptResult:
    """Sequential by default, so two servers sharing one machine do not distort each other's timing."""
    rendered: dict[str, str] = {}
    recs: dict[str, SideRecorder] = {}

    async def side(name: str, backend: LlamaCppBackend) -> None:
        try:
            text = await render_prompt(backend, prompt)
        except Exception as exc:  # one side failing never stops the other
            rec = SideRecorder(name)
            ev = StreamFailed(0, describe(exc))
            rec.feed(ev)
            if sink is not None:
                sink(name, ev)
            recs[name] = rec
            return
        rendered[name] = text
        recs[name] = await run_side(name, backend, text, params, sink)

    if order == "concurrent":
        await asyncio.gather(side("baseline", baseline), side("candidate", candidate))
    else:
        await side("baseline", baseline)
        await side("candidate", candidate)
    result = PromptResult(prompt, recs["baseline"], recs["candidate"], rendered=rendered)
    if not result.failed:
        result.divergence = compare_tokens(result.baseline.token_bytes(), result.candidate.token_bytes())
    return result




async def connect(backend: LlamaCppBackend, ready_timeout: float, on_wait=None) -> ServerInfo:
    await backend.wait_ready(ready_timeout, on_wait)
    return await backend.identify()
