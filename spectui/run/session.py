"""The run session: one owner of "run the prompts, judge each, triage what differs, probe the drafts,
record it all". `spectui compare`, the TUI and `prove` drive this one object; none has a loop of its own.

    RunSession.run(prompts)
      └─ core.runner.run_prompts      each prompt on both sides (repeats alternate B C / C B);
         └─ core.verdict.judge        THE verdict, once, carried on the PromptResult
      └─ triage(result)               the first `triage_limit` that differ (run.triage)
      └─ probe(result)                every prompt, with --probe-drafts (run.probe)
    each step → a typed event to the driver, and a record in the session file (store.session)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.backends.base import Backend
from spectui.backends.launchspec import LaunchSpec
from spectui.core import runner
from spectui.core.errors import describe
from spectui.core.events import StreamEvent
from spectui.core.figures import SideRecorder
from spectui.core.findings import NEAR_TIE_NATS, ProbeResult, Triage
from spectui.core.runner import PromptResult, RunObserver, Source
from spectui.core.types import SIDES, GenerationParams, Prompt, ServerInfo
from spectui.run import cmdline
from spectui.run import probe as drafts
from spectui.run import triage as triage_step
from spectui.run.events import (
    ProbeFound,
    ProbeStarted,
    PromptFinished,
    PromptStarted,
    RunEvent,
    StepStopped,
    TriageFound,
    TriageStarted,
)

if TYPE_CHECKING:
    from spectui.backends.base import Backend
    from spectui.store.session_writer import SessionWriter


@dataclass
class RunOptions:
    """How a run session runs: what compare's flags and the TUI's settings both set."""

    order: str = "sequential"
    repeat: int = 1
    triage: bool = True
    triage_limit: int = 3
    near_tie: float = NEAR_TIE_NATS
    probe_drafts: bool = False
    draft_model: Path | None = None  # the draft GGUF for the probe (None: the one the candidate runs)
    ngram_sizes: tuple[int, int] | None = None
    launched: dict[str, LaunchSpec] = field(default_factory=dict)  # each side's command line, where launched


class _Record(RunObserver):
    """The run loop's observer: the session file, the machine probe around each prompt, and the events."""

    def __init__(self, session: RunSession) -> None:
        self.s = session

    def prompt_started(self, prompt: Prompt, params: GenerationParams, order: str) -> None:
        s = self.s
        if s.writer is not None:
            s.writer.prompt_started(prompt, params, order)
            if s.machine is not None:
                gpus, host = s.machine()
                s.writer.probe(gpus, host)
        s.emit(PromptStarted(prompt, params, order))

    def event(self, side: str, ev: StreamEvent) -> None:
        s = self.s
        if s.writer is not None:
            s.writer.event(side, ev)
        if s.on_stream is not None:
            s.on_stream(side, ev)

    def prompt_finished(self, result: PromptResult) -> None:
        s = self.s
        if s.writer is not None:
            if s.machine is not None:
                gpus, host = s.machine()
                s.writer.probe(gpus, host)  # the machine before and after
            s.writer.servers(s.infos())  # identities learnt during the run (speculation type used)
            s.writer.prompt_finished(result)
            s.record_n[id(result)] = s.writer.n
        s.results.append(result)
        s.emit(PromptFinished(result))


class RunSession:
    """Runs prompt sets on one baseline/candidate pair and owns everything that follows a run.

    `emit` gets every RunEvent; `on_stream` (optional) every stream event as it arrives, for drivers that
    draw tokens; `machine` (optional) samples the GPUs and host around each prompt for the session file;
    `recorders` (optional) gives the recorders a prompt's events feed, for a driver that draws from them.
    """

    def __init__(
        self,
        baseline: Source,
        candidate: Source,
        params: GenerationParams,
        options: RunOptions | None = None,
        *,
        writer: SessionWriter | None = None,
        emit: Callable[[RunEvent], None] | None = None,
        on_stream: Callable[[str, StreamEvent], None] | None = None,
        machine: Callable[[], tuple[list, object]] | None = None,
        recorders: Callable[[], dict[str, SideRecorder]] | None = None,
        client: object | None = None,
        infos: Callable[[], dict[str, ServerInfo]] | None = None,
    ) -> None:
        self.baseline, self.candidate = baseline, candidate
        self.params = params
        self.options = options or RunOptions()
        self.writer = writer
        self._emit = emit
        self.on_stream = on_stream
        self.machine = machine
        self.recorders = recorders
        self.client = client  # the HTTP client a draft-model server for the probe is reached with
        self._infos = infos  # the servers' identities as the driver shows them (default: the backends')
        self.results: list[PromptResult] = []
        self.record_n: dict[int, int] = {}  # id(result) → its prompt number in the session file
        self._cmdlines: dict[str, cmdline.CommandLine] = {}

    def emit(self, ev: RunEvent) -> None:
        if self._emit is not None:
            self._emit(ev)

    @property
    def order(self) -> str:
        """The order its report states (run.pair.Run): the options' own."""
        return self.options.order

    def infos(self) -> dict[str, ServerInfo]:
        """Both sides' identities (run.pair.Run): the driver's where it shows them, else the backends'."""
        if self._infos is not None:
            infos = self._infos()
        else:
            infos = {
                "baseline": self.baseline.info or ServerInfo(self.baseline.url),
                "candidate": self.candidate.info or ServerInfo(self.candidate.url),
            }

        for side, info in infos.items():  # what no server reports, from its command line (run.cmdline)
            source = self.baseline if side == "baseline" else self.candidate
            if not (isinstance(source, Backend) and source.capabilities.recorded):  # replay keeps what it recorded
                cmdline.fill_settings(info, self.command_line(side))
        return infos

    def command_line(self, side: str) -> cmdline.CommandLine:
        """The side's command line, launched or read from its local process, read once per session."""
        if side not in self._cmdlines:
            source = self.baseline if side == "baseline" else self.candidate
            self._cmdlines[side] = cmdline.CommandLine.of(self.options.launched.get(side), source.url)
        return self._cmdlines[side]

    # -- the run ------------------------------------------------------------------------------------
    async def run(self, prompts: list[Prompt], triage: bool | None = None) -> list[PromptResult]:
        """Every prompt (× repeat), judged; then triage of the first that differ, then the probe."""
        opts = self.options
        if self.writer is not None:
            self.writer.servers(self.infos())
        results = await runner.run_prompts(
            self.baseline,
            self.candidate,
            prompts,
            self.params,
            opts.order,
            _Record(self),
            recorders=self.recorders,
            repeat=opts.repeat,
        )
        if opts.triage if triage is None else triage:
            differing = [r for r in results if r.verdict is not None and r.verdict.status == "differs"]
            for r in differing[: opts.triage_limit]:
                await self.triage(r)
        if opts.probe_drafts:
            await self.probe_all(results)
        return results

    # -- what follows a run ---------------------------------------------------------------------------
    async def triage(self, result: PromptResult) -> Triage | None:
        """Why `result`'s outputs differ (run.triage); the finding goes on the result and into the session.
        An error stops triage, never the result."""
        if result.verdict is None or result.verdict.status != "differs":
            return None
        self.emit(TriageStarted(result))
        launched = {s: spec.note() for s, spec in self.options.launched.items() if spec.launched}
        # each side's command line, launched or read from its local process (run.cmdline), with its source
        lines = {s: self.command_line(s) for s in SIDES}
        try:
            found = await triage_step.triage(
                self._backend(self.baseline),
                self._backend(self.candidate),
                result,
                self.params,
                self.options.near_tie,
                launched=launched or None,
                specs={s: c.spec for s, c in lines.items() if c.known},
                sources={s: c.words() for s, c in lines.items() if c.known},
            )
        except Exception as exc:  # a side going away during triage must not take the result with it
            self.emit(StepStopped(result, "triage", describe(exc)))
            return None
        if found is None:
            return None
        result.triage = found
        if self.writer is not None and id(result) in self.record_n:
            self.writer.triage(self.record_n[id(result)], found)
        self.emit(TriageFound(result, found))
        return found

    async def probe_all(self, results: list[PromptResult]) -> None:
        """The draft probe over every result, with one draft-model server for all of them."""
        kind = drafts.drafter_kind(self.candidate.info.speculative if self.candidate.info else {})
        launcher = drafter = None
        first = results[0] if results else None
        try:
            if kind == "draft-simple" and first is not None:
                launcher, drafter = await self._start_drafter(first)
            for r in results:
                await self._probe_one(r, drafter)
        except Exception as exc:  # the probe is extra: the run's results (and the report) stand without it
            if first is not None:
                self.emit(StepStopped(first, "draft probe", describe(exc)))
        finally:
            if launcher is not None:
                launcher.stop_all()

    async def probe(self, result: PromptResult) -> ProbeResult | None:
        """The draft probe for one result (the TUI's Ctrl+B); an error stops the probe, never the result."""
        kind = drafts.drafter_kind(self.candidate.info.speculative if self.candidate.info else {})
        launcher = drafter = None
        try:
            if kind == "draft-simple":
                launcher, drafter = await self._start_drafter(result)
            return await self._probe_one(result, drafter)
        except Exception as exc:  # the probe is extra: it never takes the run's result with it
            self.emit(StepStopped(result, "draft probe", describe(exc)))
            return None
        finally:
            if launcher is not None:
                launcher.stop_all()

    async def _start_drafter(self, result: PromptResult):
        from spectui.machine.drafter import (  # lazy: aiohttp with the launcher (~0.8 s), only for a drafter run
            candidate_draft,
            start_drafter,
        )

        # the draft the candidate runs: named, launched, the local process's command line or /props; never a
        # draft of another vocabulary (machine.drafter.candidate_draft says in one line how to name it)
        choice = candidate_draft(
            self.options.draft_model, self.launched("candidate"), self.candidate.url, self.candidate.info
        )
        self.emit(ProbeStarted(result, f"starting the draft model {choice.path.name} ({choice.which}) …"))
        return await start_drafter(self.client, choice.path, lambda line: self.emit(ProbeStarted(result, line)))

    async def _probe_one(self, result: PromptResult, drafter) -> ProbeResult:
        self.emit(ProbeStarted(result, "rebuilding the candidate's drafts …"))
        sizes = self.options.ngram_sizes or self.launched("candidate").ngram_sizes
        found = await drafts.probe_prompt(self._backend(self.candidate), result, drafter, sizes)
        result.drafts = found
        if self.writer is not None and id(result) in self.record_n:
            self.writer.drafts(self.record_n[id(result)], found)
        self.emit(ProbeFound(result, found))
        return found

    def launched(self, side: str) -> LaunchSpec:
        return self.options.launched.get(side) or LaunchSpec()

    @staticmethod
    def _backend(source: Source) -> Backend:
        if not isinstance(source, Backend):
            raise TypeError(f"{source.url} is not a server backend")
        return source
