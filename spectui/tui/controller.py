"""The TUI's run presenter: between the run session (spectui.run) and the panes.

The TUI drives the same RunSession as `spectui compare`: run, verdict, triage, probe and the session
record happen there. The session's callbacks land in the presenter's sink, which keeps only what the
session reads back (the recorders of the prompt running, the results) and posts Textual messages
(tui.messages): one `TokensArrived` a frame (~30 ms) with every stream event that arrived since (never
dropping one; a batch is also cut before each run event, so the app gets them in the session's order),
and one message per run event (PromptStarted, PromptFinished, TriageFound, ProbeFinished …). The app
hands each message to `present`, which draws it. The presenter reaches the app through `RunHost`, the
session file through `Keeper`, and starts a side alone through the `open_alone` it is given: it names
neither the recording nor the supervisor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from textual.css.query import NoMatches
from textual.widgets import Input

from spectui.backends.launchspec import LaunchSpec
from spectui.core import headline
from spectui.core.compare import LiveComparer
from spectui.core.errors import describe
from spectui.core.events import StreamEvent, StreamFailed, StreamFinished, StreamStarted, TokenEvent
from spectui.core.figures import SideRecorder
from spectui.core.findings import ProbeResult
from spectui.core.report import CONCURRENT_SHORT, speedup_text
from spectui.core.runner import SIDES, PromptResult
from spectui.core.tokens import TokenLog
from spectui.core.types import GenerationParams, Prompt, ServerInfo
from spectui.run import events
from spectui.run.nodrafts import explain
from spectui.run.session import RunOptions, RunSession
from spectui.store import prompts as prompt_sets
from spectui.tui import messages
from spectui.tui.repeats import place_replayed, recorded_runs, replayed_session, runs_line, whole_set_line
from spectui.tui.widgets.panes import Banner

if TYPE_CHECKING:
    from spectui.backends.base import Backend
    from spectui.store.session_writer import SessionWriter
    from spectui.tui.config import AppConfig
    from spectui.tui.widgets.panes import SidePane

FLUSH_S = 0.03  # batch token updates every ~30 ms instead of one message per token
QUANTISED_KV_NOTE = "expected: the candidate runs a quantised KV cache, which is not lossless"


class RunHost(Protocol):
    """What the run presenter needs of the app (SpectuiApp provides it)."""

    config: AppConfig
    backends: dict[str, Backend]
    params: GenerationParams
    order: str
    client: Any
    sub_title: str

    @property
    def replaying(self) -> bool: ...

    @property
    def workers(self) -> Any: ...

    def pane(self, side: str) -> SidePane: ...

    def q(self, selector: Any, kind: Any = None) -> Any: ...

    def notify(self, message: str, *, severity: Any = "information", timeout: float | None = None) -> None: ...

    def refresh_bindings(self) -> None: ...

    def post_message(self, message: Any) -> bool: ...

    def run_worker(self, work: Any, *args: Any, **kwargs: Any) -> Any: ...

    def push_screen(self, screen: Any, callback: Any = None) -> Any: ...


class Keeper(Protocol):
    """What the presenter needs of the session keeper (tui.recording.SessionKeeper provides it)."""

    @property
    def writer(self) -> SessionWriter | None: ...

    def writer_for_run(self) -> SessionWriter | None: ...

    async def replay_probes(self) -> None: ...

    def append_notebook(self, results: list[PromptResult]) -> None: ...


OpenAlone = Callable[[str], AbstractAsyncContextManager[Any]]


class RunController:
    def __init__(self, app: RunHost, keeper: Keeper, open_alone: OpenAlone) -> None:
        self.app = app
        self.keeper = keeper  # the session file, the notebook, a replay's recorded probes
        self.open_alone = open_alone  # one server at a time: starts one launched side for a block
        self.session: RunSession | None = None  # the run session of the run on screen
        self._said_save_error = False
        self.recorders: dict[str, SideRecorder] = {s: SideRecorder(s) for s in SIDES}
        self.comparer = LiveComparer()
        self.results: list[PromptResult] = []
        self.records: list[int] = []  # replaying: the session record each result was played from
        self.last_prompt: Prompt | None = None
        self.picked: Prompt | None = None
        self.repeat = 1  # runs per side of each prompt (the settings row's "runs")
        self.running = False
        self.pending: dict[str, list] = {s: [] for s in SIDES}
        self.run_done = asyncio.Event()
        self.generation = 0  # which run is current: a cancelled run's cleanup must not end the next one
        self.frames = 0  # flushes (frames) that drew new tokens in either pane
        self.on_screen: Prompt | None = None  # the prompt the panes show (last_prompt runs ahead of them)
        self.history: list[str] = []  # the prompts typed, for ↑/↓ in the prompt box
        self.history_pos = 0

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

    # -- the app's parts the presenter reads ------------------------------------------------------
    def _input(self, widget_id: str, set_to: str | None = None) -> str:
        box = self.app.q(widget_id, Input)
        if set_to is not None:  # a replay's settings row shows what its session recorded
            box.value = set_to
        return box.value

    def _banner(self) -> Banner:
        return self.app.q(Banner)

    def infos(self) -> dict[str, ServerInfo]:
        """What each pane knows of its server (its URL at least)."""
        return {s: (self.app.pane(s).info or ServerInfo(url=self.app.pane(s).url)) for s in SIDES}

    def build_of(self, side: str) -> str:
        info = self.app.pane(side).info
        return info.build if info and info.build else "?"

    def _start_worker(self, work: Coroutine[Any, Any, object]) -> None:
        """Run the presenter's work (a run, triage, the probe) as the app's one "run" worker."""
        self.app.run_worker(work, group="run", exclusive=True, exit_on_error=False)

    def _cancel_worker(self) -> None:
        self.app.workers.cancel_group(self.app, "run")

    # -- starting ---------------------------------------------------------------------------------
    def read_params(self) -> GenerationParams | None:
        app = self.app
        session = replayed_session(app.backends) if app.replaying else None
        if session is not None:  # the settings row says the runs the session recorded (each record plays once)
            self._input("#repeat", set_to=str(recorded_runs(session)))
        try:
            mt = int(self._input("#max-tokens"))
            temp = float(self._input("#temperature"))
            seed = int(self._input("#seed"))
            repeat = int(self._input("#repeat") or "1")
        except ValueError:
            app.notify("max tokens, temperature, seed and runs must be numbers", severity="error")
            return None
        if repeat < 1:
            app.notify("runs must be at least 1", severity="error")
            return None
        self.repeat = repeat
        if mt < 1 or not temp >= 0 or temp == float("inf"):
            app.notify("max tokens must be ≥ 1 and temperature a finite number ≥ 0", severity="error")
            return None
        # the settings row's fields over the launch's params: --idle-timeout, --deadline and the rest kept
        # (issue 40, item 4: a stream of keep-alives ran past a 20 s --idle-timeout)
        return replace(app.params, max_tokens=mt, temperature=temp, seed=seed)

    def run_typed(self) -> None:
        app = self.app
        text = self._input("#prompt")
        picked = self.picked
        if picked is not None and (picked.messages and picked.messages[-1]["content"] == text or picked.raw == text):
            prompt = picked
        else:
            if not text.strip():
                app.notify("type a prompt first, or pick one from the set", severity="warning")
                return
            prompt = prompt_sets.single(text)
        self.remember(text)
        self.start([prompt])

    def start(self, prompts: list[Prompt]) -> None:
        app = self.app
        params = self.read_params()
        if params is None:
            return
        if any(app.pane(s).state in ("connecting", "loading", "starting") for s in SIDES):
            app.notify("the servers are not ready yet", severity="warning")
            return
        app.params = params
        self._cancel_worker()
        self.generation += 1
        self.pending = {s: [] for s in SIDES}  # what a cancelled run left is never drawn over this one
        self.run_done.clear()
        self._start_worker(self._run(prompts, params, app.order, self.generation))

    def cancel(self) -> None:
        if self.running:
            self._cancel_worker()

    # -- the run ------------------------------------------------------------------------------------
    def _session(self, params: GenerationParams, order: str) -> RunSession:
        app = self.app
        emit, on_stream = self._sink(self.generation)
        launched = {s: LaunchSpec.from_argv(p.argv) for s, p in (app.config.launched or {}).items()}
        return RunSession(
            app.backends["baseline"],
            app.backends["candidate"],
            params,
            # the TUI triages the first prompt that differs (Ctrl+X any other), never in replay
            # a replay plays each recorded run once: its records are already the runs
            RunOptions(
                order,
                1 if app.replaying else self.repeat,
                bool(app.config.triage) and not app.replaying,
                1,
                launched=launched,
            ),
            writer=self.keeper.writer_for_run(),
            emit=emit,
            on_stream=on_stream,
            recorders=lambda: self.recorders,
            client=app.client,
            infos=self.infos,
        )

    async def _run(self, prompts: list[Prompt], params: GenerationParams, order: str, generation: int = 0) -> None:
        app = self.app
        self.running = True
        probes = None
        whole: list[PromptResult] | None = None  # the results of the whole set, once it ran to its end
        try:
            self.session = self._session(params, order)
            if app.replaying:
                probes = asyncio.create_task(self.keeper.replay_probes())
            if app.config.one_at_a_time:
                await self._run_alone(prompts, params)
            else:
                await self.session.run(prompts)
            writer = self.keeper.writer
            if writer is not None and writer.error and not self._said_save_error:
                self._said_save_error = True  # once: the session file keeps what it had
                app.notify(
                    f"autosave stopped: {writer.error}; the session file keeps what it had",
                    severity="error",
                    timeout=15,
                )
            if app.config.auto_notebook and not app.replaying:
                self.keeper.append_notebook(self.results[-len(prompts) * self.repeat :])
            whole = self.results if app.replaying else self.results[-len(prompts) * self.repeat :]
        except asyncio.CancelledError:
            if generation != self.generation:  # a newer run (a seek back, a rerun) owns the panes now
                raise
            self.flush()
            app.post_message(messages.RunCancelled(generation))
            raise
        except Exception as exc:  # never leave the app in "running" on a bug: say what broke
            app.notify(f"run stopped: {describe(exc)}", severity="error", timeout=12)
        finally:
            if probes is not None:
                probes.cancel()
            if generation == self.generation:  # a run cancelled for a newer one leaves that one running
                self.running = False
                self.flush()
                app.post_message(messages.RunEnded(generation, whole))  # run_done once all is drawn

    async def _run_alone(self, prompts: list[Prompt], params: GenerationParams) -> None:
        """One server at a time (run.phased): each side started alone; the second side of each run streams
        live beside the first's recording, and the verdict is judged as side by side."""
        from spectui.run.phased import PhasedRun  # lazy: one at a time only, not for the first frame

        emit, on_stream = self._sink(self.generation)
        run = PhasedRun(
            self.open_alone,
            params,
            self.repeat,
            writer=self.keeper.writer_for_run(),
            emit=emit,
            on_stream=on_stream,
            recorders=lambda: self.recorders,
            say=self._say_alone,
        )
        await run.run(prompts)

    def _say_alone(self, line: str) -> None:
        """Where a one-at-a-time run is, in the header: the banner keeps the verdict."""
        self.app.sub_title = f"one server at a time, measured one after the other · {line}"

    # -- the run session's events: the sink keeps what the session reads back and posts the rest ------
    def _sink(self, generation: int) -> tuple[Callable[[events.RunEvent], None], Callable[[str, StreamEvent], None]]:
        """The session's two callbacks for run `generation`: a cancelled run's late events are dropped."""

        def emit(ev: events.RunEvent) -> None:
            if generation != self.generation:
                return
            self.flush()  # the stream events before it go first: the app sees them in this order
            if isinstance(ev, events.PromptStarted):
                self.last_prompt = ev.prompt
                self.recorders = {s: SideRecorder(s) for s in SIDES}  # the session feeds these from now on
                self.app.post_message(messages.PromptStarted(generation, ev, self.recorders))
                return
            if isinstance(ev, events.PromptFinished):
                self._keep(ev.result)
            self.app.post_message(messages.wrap(generation, ev))

        def on_stream(side: str, ev: StreamEvent) -> None:
            if generation == self.generation:
                self.pending[side].append(ev)

        return emit, on_stream

    def _keep(self, result: PromptResult) -> None:
        session = replayed_session(self.app.backends) if self.app.replaying else None
        if session is not None:  # numbered as recorded (run k of n), as replay --no-tui reads the file
            place_replayed(session, result, self.results, self.records)
        else:
            self.results.append(result)

    def flush(self) -> None:
        """The stream events that arrived since the last frame, as one TokensArrived (the app's ~30 ms
        timer, and before each run event); never drops one."""
        if any(self.pending.values()):
            batch, self.pending = self.pending, {s: [] for s in SIDES}
            self.app.post_message(messages.TokensArrived(self.generation, batch, self.recorders))

    def present(self, message: messages.RunMessage) -> None:
        """Draw one of the run's messages, in the order the session posted them (the app hands them over)."""
        if message.generation != self.generation:
            return  # a cancelled run's late messages never reach the next run's panes
        try:
            self._present(message)
        except NoMatches:  # the app is closing and its widgets are gone
            return

    def _present(self, message: messages.RunMessage) -> None:
        m = message
        if isinstance(m, messages.TokensArrived):
            self._draw_tokens(m)
        elif isinstance(m, messages.PromptStarted):
            self.prompt_started(m.prompt, m.recorders)
        elif isinstance(m, messages.PromptFinished):
            self.prompt_finished(m.result)
        elif isinstance(m, messages.TriageStarted):
            self._banner().show_cause("triage: rerunning both sides and asking for log-probabilities…")
        elif isinstance(m, messages.TriageFound):
            if m.result is self.results[-1]:
                self._banner().show_cause(m.triage.line())
        elif isinstance(m, messages.ProbeStarted):
            self._banner().show_cause(f"draft probe: {m.what}")
        elif isinstance(m, messages.ProbeFinished):
            if m.result is self.results[-1]:
                self.show_drafts(m.drafts)
        elif isinstance(m, messages.StepStopped):
            self._banner().show_cause(f"{m.step} stopped: {m.text}")
        elif isinstance(m, messages.RunCancelled):
            for s in SIDES:
                if not self.recorders[s].done and self.app.pane(s).state != "failed":
                    self.app.pane(s).set_state("cancelled")
            self._banner().show_running("cancelled")
        elif isinstance(m, messages.RunEnded):
            if m.results is not None:
                self.show_whole_set(m.results)
            self.run_done.set()

    def _session_for_more(self) -> RunSession:
        """The session of the run on screen, for triage or the probe after it (one for the app's params)."""
        if self.session is None:
            self.session = self._session(self.app.params, self.app.order)
        return self.session

    def triage_last(self) -> None:
        """Ctrl+X: triage the prompt on screen (when its outputs differ)."""
        app = self.app
        last = self.results[-1] if self.results else None
        if last is None or last.verdict is None or last.verdict.status != "differs" or app.replaying:
            app.notify("nothing to triage: the outputs on screen do not differ", severity="warning")
            return
        self._start_worker(self._session_for_more().triage(last))

    # -- the draft probe (alt+d) ------------------------------------------------------------------
    def drafts_toggle(self) -> None:
        """Show or hide what the draft proposed where the target said no; probe it first if not yet done."""
        app = self.app
        last = self.results[-1] if self.results else None
        view = app.pane("candidate").view
        if last is None:
            app.notify("run a prompt first: the probe rebuilds the drafts of the prompt on screen", severity="warning")
            return
        if last.drafts is not None or view.show_rejected:
            self.show_drafts(last.drafts, not view.show_rejected)
            return
        if app.replaying:
            app.notify("this recording holds no draft probe for the prompt", severity="warning")
            return
        from spectui.tui.screens.confirm import ConfirmScreen, draft_server_question  # lazy: httpx, after the 1st frame

        session = self._session_for_more()
        backend = app.backends.get("candidate")
        question = draft_server_question(session, backend.info if backend is not None else None)
        if question is None:  # no server to start (an n-gram drafter): the probe runs now
            self._start_worker(session.probe(last))
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._start_worker(session.probe(last))

        self.app.push_screen(ConfirmScreen("start a third llama-server?", question), answered)

    def show_drafts(self, found: ProbeResult | None, show: bool = True) -> None:
        app = self.app
        view = app.pane("candidate").view
        view.rejected_text = found.rejected_at() if found is not None else {}
        view.show_rejected = show and found is not None
        view.rebuild()
        if found is not None and show:
            self._banner().show_cause(found.summary())
            if view.mark_mode != "full":  # the guesses are written beside the ✗n marks, which are off now
                app.notify("the draft's rejected guesses show with all marks: press alt+k", timeout=8)

    def prompt_started(self, prompt: Prompt, recorders: dict[str, SideRecorder]) -> None:
        app = self.app
        self.on_screen = prompt
        self.comparer = LiveComparer()
        for s in SIDES:
            pane = app.pane(s)
            pane.view.reset()
            pane.set_class(False, "-diverged")
            pane.show_figures(recorders[s])
            pane.set_state("waiting" if app.order == "sequential" and s == "candidate" else "streaming")
        self._banner().show_running()
        if not app.replaying:
            app.sub_title = f"{prompt.id}: {prompt.preview}"

    def prompt_finished(self, result: PromptResult) -> None:
        app = self.app
        for s in SIDES:
            backend = app.backends[s]
            if backend.info is not None and not app.replaying:
                app.pane(s).set_info(backend.info)
        self.show_figures({"baseline": result.baseline, "candidate": result.candidate})
        app.refresh_bindings()
        banner = self._banner()
        b, c = result.baseline, result.candidate
        if result.prompts_differ_at is not None:
            banner.show_running(
                f"prompts differ: the two servers rendered the chat template differently at byte "
                f"{result.prompts_differ_at}; a difference in the output may come from the prompt"
            )
        v = result.verdict
        cached = (b.figures.prompt_cached, c.figures.prompt_cached)
        if v is not None and v.status == "differs" and v.divergence is not None:
            # THE verdict, carried from core: it may say DIFFERS where the bytes agree (token ids, count)
            d = v.divergence
            banner.show_diverged(d, cached, self._kv_note())
            for side, tok in (("baseline", d.baseline_token), ("candidate", d.candidate_token)):
                app.pane(side).view.mark_divergence(tok)
                app.pane(side).set_class(True, "-diverged")
            if result.triage is not None and app.replaying:
                banner.show_cause(f"{result.triage.line()} (recorded)")
        elif v is not None and v.status == "identical":
            banner.show_identical(len(b.output()), cached, v.compared)
        elif v is not None and v.status == "failed":
            failed = [s for s, rec in zip(SIDES, (b, c), strict=True) if rec.failed is not None]
            agreed = min(len(self.comparer.data["baseline"]), len(self.comparer.data["candidate"]))
            banner.show_running(
                f"not compared: {' and '.join(failed)} failed (see its pane); "
                f"the outputs agreed for the first {agreed} bytes"
            )
        elif v is not None and v.status == "incomplete":
            banner.show_running("incomplete: the recording stops inside this prompt; no verdict")
        if v is not None and v.status != "incomplete":  # both halves of the answer, first (core.headline)
            banner.show_headline(headline.for_prompt(self.results, result))
            if result.measured and not c.figures.drafted and not app.replaying:
                self._why_no_drafts(result)
        if result.drafts is not None and app.replaying:  # replay shows the recorded probe without any server
            self.show_drafts(result.drafts)

    # -- drawing ------------------------------------------------------------------------------------
    def _draw_tokens(self, message: messages.TokensArrived) -> None:
        """One frame's stream events into the panes: a redraw per frame, not per token."""
        app = self.app
        drew = False
        for side, batch in message.events.items():
            if not batch:
                continue
            rec = message.recorders[side]
            pane = app.pane(side)
            tokens: list[TokenEvent] = []
            for ev in batch:
                if isinstance(ev, TokenEvent):
                    tokens.append(ev)
                    self.comparer.add(side, ev.data)
                elif isinstance(ev, StreamStarted):
                    pane.set_state("streaming")
                    other = "candidate" if side == "baseline" else "baseline"
                    if app.order == "sequential" and side == "baseline":
                        app.pane(other).set_state("waiting")
                elif isinstance(ev, StreamFinished):
                    if tokens:
                        pane.view.add(tokens)
                        tokens = []
                        drew = True
                    pane.view.add_tail(ev.tail)
                    if rec.relabelled:  # labels were made exact at the end (vLLM, llama.cpp tail): redraw
                        pane.view.tokens = (
                            rec.tokens.copy() if isinstance(rec.tokens, TokenLog) else TokenLog(rec.tokens)
                        )
                        pane.view.rebuild()
                    self.comparer.add_tail(side, ev.tail)
                    self.comparer.finish(side)
                    pane.set_state("done")
                elif isinstance(ev, StreamFailed):
                    # not finish(): a cut-off output is not a divergence; bytes that already differ still are
                    pane.set_state("failed", f"{ev.message}")
            if tokens:
                pane.view.add(tokens)
                drew = True
        self.show_figures(message.recorders)  # once a frame, for both panes
        if drew:
            self.frames += 1
        self._check_divergence(message.recorders)

    def show_figures(self, recorders: dict[str, SideRecorder]) -> None:
        app = self.app
        b, c = recorders["baseline"], recorders["candidate"]
        app.pane("baseline").show_figures(b)
        line = None
        finished = b.finished is not None and c.finished is not None  # never a speed-up for a failed side
        if b.figures.decode_tps and c.figures.decode_tps and finished and self.on_screen is not None:
            r = PromptResult(self.on_screen, b, c)
            builds = f"{self.build_of('baseline')} → {self.build_of('candidate')}"
            line = f"speed-up {speedup_text(r)} · builds {builds}"
            last = self.results[-1] if self.results else None
            repeated = runs_line(self.results) if last is not None and last.candidate is c else None
            if repeated is not None:
                # repeated runs: this run's own figure, then the prompt's over its runs (core.report's text)
                line = f"this run {speedup_text(r)}\n{repeated} · builds {builds}"
            ran = last.order if last is not None and last.candidate is c and last.order else self.app.order
            if ran == "concurrent":  # the order changes the figure: said beside it (core.report)
                line += f"\n{CONCURRENT_SHORT}"
        app.pane("candidate").show_figures(c, line)

    def show_whole_set(self, results: list[PromptResult]) -> None:
        """After a run over two or more prompts: the whole set's figure with its acceptance, under the verdict."""
        if (line := whole_set_line(results, self.app.pane("candidate").info)) is not None:  # + a drafter's warm passes
            self._banner().show_headline(headline.headline_for(results))
            self._banner().add_line(line)

    def _why_no_drafts(self, result: PromptResult) -> None:
        """A speculating candidate that drafted nothing: the likely cause from its flags, under the verdict."""
        launched = (self.app.config.launched or {}).get("candidate")
        f = result.candidate.figures
        context = (f.prompt_tokens or 0) + f.tokens or None
        if why := explain(launched.argv if launched is not None else None, self.app.pane("candidate").url, context):
            self._banner().add_line(why)

    def _kv_note(self) -> str:
        launched = (self.app.config.launched or {}).get("candidate")
        spec = LaunchSpec.from_argv(launched.argv if launched is not None else None)
        return QUANTISED_KV_NOTE if spec.quantised_kv else ""

    def _check_divergence(self, recorders: dict[str, SideRecorder]) -> None:
        """While the streams run, show where their bytes part the moment it is seen. The final word,
        IDENTICAL or DIFFERS, is the verdict the prompt carries (prompt_finished), never decided here."""
        app = self.app
        d = self.comparer.divergence
        banner = self._banner()
        cached = (recorders["baseline"].figures.prompt_cached, recorders["candidate"].figures.prompt_cached)
        if d is not None and not banner.has_class("-diverged"):
            banner.show_diverged(d, cached, self._kv_note())
            for side, tok in (("baseline", d.baseline_token), ("candidate", d.candidate_token)):
                app.pane(side).view.mark_divergence(tok)
                app.pane(side).set_class(True, "-diverged")
