"""The comparison screen: watch the baseline and the candidate answer the same prompt, side by side.

It owns its run, as posting's MainScreen does: the layout, the keys and their actions, the run's worker and
the handlers that draw what the run posts. Its state is three parts, each posting messages rather than
writing the screen: `runs` (tui.run_state: the runs on screen and the run session's sink), `servers`
(tui.supervisor: the client, the backends, a launched pair, the live probes) and `recording`
(tui.recording: the session file, the notebook, reports, a replay's clock). Configuration from outside
(tui.config.AppConfig) is frozen; what changes while it runs (the generation parameters, the order, the
prompt set) is the screen's own.

A run event reaches the panes in one step: the session's sink posts it (`RunPosted`) and `_run_posted`
draws it by name (`match`). Worker errors reach the user through one `@on(Worker.StateChanged)`.
"""

from __future__ import annotations

import asyncio
import importlib
from dataclasses import replace

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Header, Input, Label, Select
from textual.worker import Worker, WorkerState

from spectui.backends.launchspec import LaunchSpec
from spectui.core import headline
from spectui.core.compare import LiveComparer
from spectui.core.errors import InputError, describe
from spectui.core.events import StreamFailed, StreamFinished, StreamStarted, TokenEvent
from spectui.core.figures import SideRecorder
from spectui.core.findings import ProbeResult
from spectui.core.report import CONCURRENT_CAVEAT, CONCURRENT_SHORT, speedup_text
from spectui.core.runner import SIDES, PromptResult
from spectui.core.tokens import TokenLog
from spectui.core.types import GenerationParams, Prompt, ServerInfo
from spectui.run import events
from spectui.run.nodrafts import explain
from spectui.run.pair import LaunchedPair
from spectui.run.session import RunOptions, RunSession
from spectui.store import prompts as prompt_sets
from spectui.store.config import load as load_settings
from spectui.store.config import remember
from spectui.tui.config import AppConfig
from spectui.tui.context import LabContext
from spectui.tui.messages import (
    PairFailed,
    PairStarted,
    ProbeSampled,
    RunCancelled,
    RunEnded,
    RunPosted,
    SideChanged,
    SideConnected,
    TokensArrived,
)
from spectui.tui.recording import Said, SessionKeeper
from spectui.tui.repeats import recorded_runs, replayed_session, runs_line, whole_set_line
from spectui.tui.run_state import FLUSH_S, RunState
from spectui.tui.screens.diff import DiffScreen
from spectui.tui.supervisor import ServerSupervisor
from spectui.tui.themes import legend_text
from spectui.tui.widgets.fit import FitLabel, fit_main_screen, order_cache_words
from spectui.tui.widgets.footer import KeysFooter
from spectui.tui.widgets.panes import DEFAULT_MARKS, Banner, LivePanel, ServerLogs, SidePane
from spectui.tui.widgets.token_view import MARK_MODES

CACHE_TIP = (
    "order: ctrl+o switches sequential/concurrent · prompt cache: what each request asks for "
    "(spectui tui --cache-prompt off|on|server; off by default, as spectui compare and sweep)"
)
LABS = {  # a lab's action name -> its screen (module, class); each opens with `open(LabContext)`
    "theory": ("spectui.tui.screens.theory_screen", "TheoryScreen"),
    "prefix_lab": ("spectui.tui.screens.lab_screens", "PrefixScreen"),
    "sweep": ("spectui.tui.screens.lab_screens", "SweepScreen"),
    "sampling": ("spectui.tui.screens.sampling_screen", "SamplingScreen"),
    "drafts_cost": ("spectui.tui.screens.drafts_screen", "DraftsScreen"),
    "prove": ("spectui.tui.screens.prove_screen", "ProveScreen"),
}
QUANTISED_KV_NOTE = "expected: the candidate runs a quantised KV cache, which is not lossless"
# what a failed worker of each group was doing, for the one line the user is told
WORKER_WORDS = {"run": "run stopped", "connect": "connecting stopped", "launch": "launch stopped"}


class CompareScreen(Screen):
    CSS = """
    #prompt-row { height: 3; }
    #prompt { width: 1fr; }
    #prompt.-textual-compact { margin-right: 1; }  /* one line, no border: a gap before the set picker */
    #prompt-set { width: 36; }
    #set-picker { width: 26; }
    #prompt-row.-narrow #set-picker { width: 18; }
    #prompt-row.-narrow #prompt-set { width: 22; }
    #settings { height: 1; padding: 0 1; color: $text-muted; }
    #settings Input { width: 8; height: 1; border: none; padding: 0; }
    #settings #repeat { width: 4; }
    #settings Label { padding: 0 1 0 2; }
    #panes { height: 1fr; layout: horizontal; }
    #panes.-narrow { layout: vertical; }
    #legend { height: 1; padding: 0 1; }
    """

    BINDINGS = [
        Binding("enter", "run", "Run", id="run", show=True, priority=False),
        Binding("escape", "cancel", "Cancel", id="cancel"),
        # priority: these must work while the prompt input has focus
        Binding("ctrl+r", "rerun", "Rerun", id="rerun", priority=True),
        Binding("ctrl+g", "run_all", "Run set", id="run_all", priority=True),
        Binding("ctrl+o", "switch('order')", "Order", id="toggle_order", priority=True),
        Binding("ctrl+t", "switch('boundaries')", "Tokens", id="toggle_boundaries", priority=True),
        Binding("alt+k", "switch('marks')", "Marks", id="toggle_marks", priority=True),
        Binding("ctrl+d", "diff", "Diff", id="diff", priority=True),
        Binding("ctrl+x", "triage", "Triage", id="triage", priority=True),
        Binding("alt+d", "drafts", "Drafts", id="drafts", priority=True),  # ctrl+b is tmux's prefix (tui.keys)
        Binding("ctrl+s", "keep('save')", "Save", id="save_session", priority=True),
        Binding("ctrl+n", "keep('notebook')", "Notebook", id="notebook", priority=True),
        Binding("ctrl+e", "keep('export')", "Export", id="export", priority=True),
        Binding("ctrl+l", "sessions", "Sessions", id="sessions", priority=True),
        Binding("alt+p", "profiles", "Profiles", id="profiles", priority=True),  # ctrl+k/u/w edit the prompt
        Binding("ctrl+y", "lab('theory')", "Theory", id="theory", priority=True),
        Binding("ctrl+f", "lab('prefix_lab')", "Cache lab", id="prefix_lab", priority=True),
        Binding("alt+s", "lab('sweep')", "Sweep", id="sweep", priority=True),
        Binding("f2", "lab('sampling')", "Sampling", id="sampling", priority=True),
        Binding("f3", "lab('drafts_cost')", "Draft cost", id="drafts_cost", show=False, priority=True),
        Binding("f4", "lab('prove')", "Prove", id="prove", priority=True),
        Binding("alt+l", "switch('logs')", "Logs", id="toggle_logs", priority=True),
        Binding("alt+m", "toggle_live", "Live", id="toggle_live", priority=True),
        # replay: pause, one token, slower/faster, seek
        Binding("f5", "replay('pause')", "Pause", id="replay_pause"),
        Binding("f6", "replay('step')", "Step", id="replay_step"),
        Binding("f7", "replay('slower')", "Slower", id="replay_slower"),
        Binding("f8", "replay('faster')", "Faster", id="replay_faster"),
        Binding("f9", "replay('back')", "Seek −2 s", id="replay_back"),
        Binding("f10", "replay('forward')", "Seek +2 s", id="replay_forward"),
    ]

    def __init__(self, config: AppConfig, theme_marks: dict[str, dict[str, str]] | None = None) -> None:
        super().__init__()
        self.config = config
        self.theme_marks = theme_marks or {}
        self.params: GenerationParams = config.params  # the settings row's, as last run
        self.order = config.order
        if config.prompts is not None:
            self.prompt_set_name, self.prompt_list = "session", list(config.prompts)
        else:
            self.prompt_set_name, self.prompt_list = prompt_sets.load_set(config.prompt_set)
        self.runs = RunState(self.post_message)
        self.servers = ServerSupervisor(config, self.post_message)  # connecting, launching, logs, probes
        self.recording = SessionKeeper(config)  # session, notebook, export, replay

    @property
    def replaying(self) -> bool:
        return self.recording.replaying

    @property
    def marks(self) -> dict[str, str]:
        return {**DEFAULT_MARKS, **self.theme_marks.get(self.app.theme, {})}

    # -- layout ------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="prompt-row"):
            yield Input(placeholder="type a prompt and press Enter (↑/↓ history)", id="prompt")
            yield Select(
                prompt_sets.available_sets() if self.config.prompts is None else [("session", "session")],
                prompt=f"set: {self.prompt_set_name}",
                id="set-picker",
                allow_blank=True,
            )
            yield Select(
                [(f"{p.id} · {p.category}", p.id) for p in self.prompt_list],
                prompt=f"prompt ({len(self.prompt_list)})",
                id="prompt-set",
            )
        with Horizontal(id="settings"):
            yield FitLabel("max tokens", "max")
            yield Input(str(self.params.max_tokens), id="max-tokens", type="integer")
            yield FitLabel("temperature", "temp")
            yield Input(str(self.params.temperature), id="temperature", type="number")
            yield Label("seed")
            yield Input(str(self.params.seed), id="seed", type="integer")
            yield Label("runs")
            yield Input("1", id="repeat", type="integer", tooltip="runs per side, interleaved: the speed-up's spread")
            yield FitLabel(*order_cache_words(self.order, self.params.cache_prompt), id="order", tooltip=CACHE_TIP)
        yield Label(legend_text(self.marks), id="legend")
        with Container(id="panes"):
            yield SidePane("baseline", self.config.baseline_url)
            yield SidePane("candidate", self.config.candidate_url)
        yield Banner("waiting for a prompt", id="banner")
        yield ServerLogs(id="logs")
        yield LivePanel()
        yield KeysFooter()

    def on_mount(self) -> None:
        # the HTTP client (httpx, an SSL context), the backends and the probe thread come after the first
        # frame, which needs none of them (they were 0.1 s of a 0.87 s first frame)
        self.call_after_refresh(self.open_backends)
        self.set_interval(FLUSH_S, self.runs.flush)
        self.set_interval(self.config.probe_interval, self.poll_kv)
        self.fit(self.app.size.width)
        self.set_interval(1.0, self.refresh_logs)
        self.show_launch_notes()
        if self.config.pick_profile:
            self.call_after_refresh(self.action_profiles)
        if self.config.initial_prompt:
            self.query_one("#prompt", Input).value = self.config.initial_prompt
        self.query_one("#prompt", Input).focus()

    def pane(self, side: str) -> SidePane:
        return self.query_one(f"#pane-{side}", SidePane)

    def banner(self) -> Banner:
        return self.query_one(Banner)

    def on_resize(self, event) -> None:
        self.fit(event.size.width)

    def fit(self, width: int) -> None:
        fit_main_screen(self, width, self.app.size.height)  # a short terminal folds what it can

    def redraw_marks(self) -> None:
        """The theme changed: the panes' marks and the legend in its colours."""
        for side in SIDES:
            self.pane(side).view.marks = self.marks
            self.pane(side).view.rebuild()
        self.query_one("#legend", Label).update(legend_text(self.marks, self.pane("candidate").view.mark_mode))

    def show_launch_notes(self) -> None:
        for side, server in self.servers.launched.items():
            self.pane(side).launch_note = LaunchSpec.from_argv(server.argv).note()

    def say(self, said: Said | None, timeout: float | None = None) -> None:
        if said is not None:
            self.notify(said[0], severity=said[1], timeout=timeout)

    def check_action(self, action: str, parameters) -> bool | None:
        # True: shown; None: shown greyed out; False: hidden (Textual's convention)
        if action == "replay":
            return True if self.replaying else False
        if action == "triage":
            last = self.runs.last
            return None if self.replaying or last is None or last.divergence is None else True
        if action == "keep" and parameters[:1] in (("notebook",), ("export",)) and not self.runs.results:
            return None
        return True

    # -- the servers (tui.supervisor posts; these handlers show) --------------------------------------
    def open_backends(self) -> None:
        if (warning := self.servers.open_backends()) is not None:
            self.notify(warning, severity="warning")
        if self.servers.one_at_a_time:
            self.wait_alone()
        else:
            self.connect_all()
        self.run_worker(self.servers.probe_loop, thread=True, group="probe", exit_on_error=False)

    def connect_all(self) -> None:
        for side in SIDES:
            self.run_worker(self.servers.connect_side(side), group="connect", exit_on_error=False)

    def wait_alone(self) -> None:
        """One at a time: nothing starts until a run needs a side; the panes say so, and autorun goes."""
        for side in SIDES:
            self.pane(side).set_state("ready", "one at a time: started when a run needs it")
        # after the first refresh: on_mount fills the prompt box after this
        if self.config.autorun_all:
            self.call_after_refresh(self.action_run_all)
        elif self.config.autorun:
            self.call_after_refresh(self.action_run)

    @on(SideChanged)
    def _side_changed(self, message: SideChanged) -> None:
        self.pane(message.side).set_state(message.state, message.note)

    @on(SideConnected)
    async def _side_connected(self, message: SideConnected) -> None:
        pane = self.pane(message.side)
        pane.set_info(message.info)
        if not message.ready:
            return
        pane.set_state("ready")
        if all(self.pane(s).state == "ready" for s in SIDES) and not self.runs.running:
            if self.config.autorun_lab:  # a lesson a plain compare does not answer (prefix caching: cold vs warm)
                await self.run_action(f"lab('{self.config.autorun_lab}')")
                self.app.call_after_refresh(lambda: self.app.screen.run_action("run"))
            elif self.config.autorun_all:
                self.action_run_all()
            elif self.config.autorun:
                self.action_run()

    @on(PairStarted)
    def _pair_started(self) -> None:
        self.servers.pair_started()
        self.connect_all()

    @on(PairFailed)
    def _pair_failed(self, message: PairFailed) -> None:
        for side in self.servers.launched:
            failed = side in message.failed
            self.pane(side).set_state("failed" if failed else "stopped", message.why if failed else "")
        self.show_logs_now()

    def launch(self, profile, comparison) -> None:
        """Start a comparison's two servers (bound to 127.0.0.1 unless the profile says otherwise)."""
        try:
            # the memory plan first (run.pair): explicit shares where both fit, one at a time where they do not
            pair = LaunchedPair.from_profile(
                profile, comparison, say=lambda line: self.notify(line, severity="warning", timeout=12)
            )
        except InputError as exc:  # the two do not fit even one at a time
            self.notify(exc.one_line(), severity="error", timeout=15)
            return
        except Exception as exc:
            self.notify(describe(exc), severity="error", timeout=12)
            return
        self.workers.cancel_group(self, "run")
        self.servers.adopt(profile.name, pair)
        for side, server in self.servers.launched.items():
            pane = self.pane(side)
            pane.url = server.url
            pane.info = None
            pane.border_title = f"{side} · {server.url}"
            pane.set_state("starting", f"{profile.name} · {comparison.title}")
        self.show_launch_notes()
        if pair.alone is not None:
            self.notify(f"{comparison.title}: {pair.plan.reason}; one server at a time", timeout=12)
            self.wait_alone()
            return
        self.run_worker(self.servers.start_pair, thread=True, group="launch", exclusive=True, exit_on_error=False)

    async def poll_kv(self) -> None:
        try:
            connected = {s for s in SIDES if self.pane(s).info is not None}
        except NoMatches:
            return
        await self.servers.poll_kv(connected)

    @on(ProbeSampled)
    def _probe_sampled(self, msg: ProbeSampled) -> None:
        if self.runs.running:
            self.recording.record_probe(msg.gpus, msg.host)
        try:
            self.query_one(LivePanel).show(msg.gpus, msg.host, msg.procs, self.servers.kv, msg.gpu_note)
        except NoMatches:  # closing
            pass

    # -- logs ---------------------------------------------------------------------------------------
    def show_logs_now(self) -> None:
        self.query_one(ServerLogs).display = True
        self.refresh_logs()

    def refresh_logs(self) -> None:
        try:
            logs = self.query_one(ServerLogs)
        except NoMatches:
            return
        if logs.display:
            logs.show(*self.servers.log_tails())

    # -- worker errors: one place turns them into what the user sees ----------------------------------------
    @on(Worker.StateChanged)
    def _worker_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if event.state == WorkerState.ERROR and worker.error is not None:
            words = WORKER_WORDS.get(worker.group, f"{worker.group} stopped")
            self.notify(f"{words}: {describe(worker.error)}", severity="error", timeout=12)

    # -- a lab, the profiles, the sessions ----------------------------------------------------------------
    def infos(self) -> dict[str, ServerInfo]:
        """What each pane knows of its server (its URL at least)."""
        return {s: (self.pane(s).info or ServerInfo(url=self.pane(s).url)) for s in SIDES}

    def lab_context(self) -> LabContext:
        """What a lab screen gets, read now (tui.context): never the screen itself."""
        alone = self.servers.alone if self.servers.runs_alone() else None
        typed = self.query_one("#prompt", Input).value
        info = self.pane("baseline").info
        return LabContext(
            dict(self.servers.backends),
            self.params,
            list(self.prompt_list),
            self.prompt_set_name,
            prompt=self.runs.last_prompt or (prompt_sets.single(typed) if typed.strip() else None),
            results=list(self.runs.results),
            refusal=self.servers.lab_refusal(all(self.pane(s).info is not None for s in SIDES)),
            open_alone=self.servers.open_alone if alone else None,
            alone_why=alone.why if alone else "",
            client=self.servers.client,
            launched=dict(self.servers.launched),
            notebook=self.config.notebook,
            model_path=info.model_path if info is not None else None,
            profile=load_settings()[0].get("profile"),
        )

    def action_lab(self, name: str) -> None:
        """A lab's key: its screen opened one way, `open(context)`, or the notice why it cannot open now."""
        module, cls = LABS[name]  # imported when opened: the first frame needs none of them
        opened = getattr(importlib.import_module(module), cls).open(self.lab_context())
        if isinstance(opened, str):
            self.notify(opened, severity="warning")
        else:
            self.app.push_screen(opened)

    def action_profiles(self) -> None:
        from spectui.store.profiles import detect, load_profiles, preselect  # lazy: httpx, ~0.2 s, first frame
        from spectui.tui.screens.profiles_screen import ProfilePicker  # lazy: httpx, ~0.3 s, first frame

        profiles, problems = load_profiles()
        hw = detect(self.servers.gpu_probe)
        remembered = load_settings()[0].get("profile")
        pre = preselect(profiles, hw)
        chosen = remembered if remembered in profiles else (pre.name if pre is not None else None)

        def picked(result) -> None:
            if result is None:
                return
            profile, cid = result
            try:
                remember(profile=profile.name)
            except OSError:
                pass
            self.launch(profile, profile.comparison(cid))

        self.app.push_screen(ProfilePicker(profiles, hw, chosen, problems), picked)

    def action_sessions(self) -> None:
        from spectui.tui.screens.sessions_screen import SessionBrowser  # lazy: 7 modules, ~50 ms, first frame

        self.app.push_screen(SessionBrowser(self.recording.session_dir()), self.open_session)

    # -- the prompt row ---------------------------------------------------------------------------------
    @on(Input.Submitted, "#prompt, #max-tokens, #temperature, #seed, #repeat")
    def _prompt_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_run()

    @on(Select.Changed, "#set-picker")
    def _set_picked(self, event: Select.Changed) -> None:
        if event.value in (Select.BLANK, "session") or self.replaying:
            return
        try:
            name, items = prompt_sets.load_set(str(event.value))
        except Exception as exc:
            self.notify(describe(exc), severity="error", timeout=10)
            return
        self.prompt_set_name, self.prompt_list = name, items
        picker = self.query_one("#prompt-set", Select)
        picker.set_options([(f"{p.id} · {p.category}", p.id) for p in items])
        picker.prompt = f"prompt ({len(items)})"
        self.notify(f"prompt set {name}: {len(items)} prompts (ctrl+g runs them all)")

    @on(Select.Changed, "#prompt-set")
    def _prompt_picked(self, event: Select.Changed) -> None:
        chosen = next((p for p in self.prompt_list if p.id == event.value), None)
        if chosen is None:
            return
        self.runs.last_prompt = chosen
        self.query_one("#prompt", Input).value = (
            chosen.messages[-1]["content"] if chosen.messages else (chosen.raw or "")
        )
        self.runs.picked = chosen

    def on_key(self, event) -> None:
        focused = self.focused
        if isinstance(focused, Input) and focused.id == "prompt" and event.key in ("up", "down"):
            typed = self.runs.recall(-1 if event.key == "up" else 1)
            if typed is not None:
                focused.value = typed
                focused.cursor_position = len(typed)
                event.stop()

    # -- actions (each binding's id names one) --------------------------------------------------------
    def action_run(self) -> None:
        text = self._input("#prompt")
        picked = self.runs.picked
        if picked is not None and (picked.messages and picked.messages[-1]["content"] == text or picked.raw == text):
            prompt = picked
        else:
            if not text.strip():
                self.notify("type a prompt first, or pick one from the set", severity="warning")
                return
            prompt = prompt_sets.single(text)
        self.runs.remember(text)
        self.start([prompt])

    def action_rerun(self) -> None:
        if self.runs.last_prompt is None:
            self.notify("nothing to rerun yet", severity="warning")
            return
        self.start([self.runs.last_prompt])

    def action_run_all(self) -> None:
        self.start(list(self.prompt_list))

    def action_cancel(self) -> None:
        if self.runs.running:
            self.workers.cancel_group(self, "run")

    def action_switch(self, what: str) -> None:
        """ctrl+o the order, ctrl+t the token boundaries, alt+k the marks, alt+l the server logs."""
        if what == "order":
            self.order = "concurrent" if self.order == "sequential" else "sequential"
            self.query_one("#order", FitLabel).say(*order_cache_words(self.order, self.params.cache_prompt))
            if self.order == "concurrent":  # it changes the speed-up: said when chosen, and beside the figure
                self.notify(CONCURRENT_CAVEAT, title="order: concurrent")
        elif what == "boundaries":
            for side in SIDES:
                v = self.pane(side).view
                v.boundaries = not v.boundaries
                v.rebuild()
        elif what == "marks":
            self.cycle_marks()
        elif what == "logs":
            logs = self.query_one(ServerLogs)
            logs.display = not logs.display
            if logs.display and not self.servers.launched:
                logs.show({}, {})
            self.refresh_logs()

    def cycle_marks(self) -> None:
        """alt+k: the candidate's inline marks, all of them, their colours only (the text as sent), or none."""
        view = self.pane("candidate").view
        mode = MARK_MODES[(MARK_MODES.index(view.mark_mode) + 1) % len(MARK_MODES)]
        for side in SIDES:
            v = self.pane(side).view
            v.mark_mode = mode
            v.rebuild()
        legend = self.query_one("#legend", Label)
        legend.update(legend_text(self.marks, mode))
        if not legend.display:  # a short terminal hides the legend: the switch is said, not silent
            self.notify(legend_text(self.marks, mode), title="marks", markup=True)

    def action_toggle_live(self) -> None:
        self.query_one(LivePanel).toggle()
        fit_main_screen(self, self.app.size.width, self.app.size.height)

    def action_diff(self) -> None:
        last = self.runs.last
        self.app.push_screen(
            DiffScreen(
                self.runs.recorders["baseline"].output(),
                self.runs.recorders["candidate"].output(),
                last.verdict if last is not None and not self.runs.running else None,
                last.triage if last is not None else None,
                last.drafts if last is not None else None,
                live=self.runs.comparer.divergence,
            )
        )

    def action_keep(self, what: str) -> None:
        """ctrl+s the session, ctrl+n the notebook, ctrl+e the reports, F12 a screenshot."""
        if what == "save":
            self.say(self.recording.save(self.runs.results))
        elif what == "notebook":
            self.say(self.recording.append_notebook(self.runs.results[-1:], self.infos(), self.servers.profile), 12)
        elif what == "export":
            self.say(self.recording.export(self.infos(), self.runs.results, self.params, self.order))
        elif what == "screenshot":
            self.say(self.recording.screenshot(self.app.export_screenshot()))

    def action_replay(self, what: str) -> None:
        """F5–F10: pause, one token, slower, faster, seek ±2 s."""
        if not self.replaying:
            return
        self.recording.control(what)
        if what == "back":
            self.seek_back()
        self.sub_title_is(self.recording.note())

    def sub_title_is(self, text: str) -> None:
        self.app.sub_title = text

    # -- replay -------------------------------------------------------------------------------------
    def open_session(self, path) -> None:
        """Replay a saved session on this screen: same panes, another event source."""
        if path is None:
            return
        session, said = self.recording.open_session(path)
        for line in said:
            self.say(line, 10)
        if session is None:
            return
        self.workers.cancel_group(self, "run")
        self.servers.replaying = True
        self.servers.backends = self.recording.backends_for(session)
        self.prompt_list = [sp.prompt for sp in session.prompts]
        for s in SIDES:
            self.pane(s).set_info(session.infos[s])
            self.pane(s).set_state("ready")
        self.sub_title_is(f"replay · {session.path.name}")
        self.runs.results.clear()  # the figures over runs and prompts are this session's alone
        self.runs.records.clear()
        self.refresh_bindings()
        self.start(list(self.prompt_list))

    def seek_back(self) -> None:
        """Seeking back replays the prompt from its start, as fast as possible, to the new position."""
        prompt = self.runs.last_prompt
        played = replayed_session(self.servers.backends)
        records = [sp.prompt for sp in played.prompts] if played is not None else []
        self.recording.rewind_to(self.servers.backends, next((i for i, p in enumerate(records) if p is prompt), None))
        self.workers.cancel_group(self, "run")
        if prompt is not None:  # that prompt again, then the ones after it: the replay goes on to its end
            at = next((i for i, p in enumerate(self.prompt_list) if p is prompt), None)
            rest = [prompt] if at is None else self.prompt_list[at:]
            self.call_later(lambda: self.start(rest))

    # -- starting a run -----------------------------------------------------------------------------
    def _input(self, widget_id: str, set_to: str | None = None) -> str:
        box = self.query_one(widget_id, Input)
        if set_to is not None:  # a replay's settings row shows what its session recorded
            box.value = set_to
        return box.value

    def read_params(self) -> GenerationParams | None:
        session = replayed_session(self.servers.backends) if self.replaying else None
        if session is not None:  # the settings row says the runs the session recorded (each record plays once)
            self._input("#repeat", set_to=str(recorded_runs(session)))
        try:
            mt = int(self._input("#max-tokens"))
            temp = float(self._input("#temperature"))
            seed = int(self._input("#seed"))
            repeat = int(self._input("#repeat") or "1")
        except ValueError:
            self.notify("max tokens, temperature, seed and runs must be numbers", severity="error")
            return None
        if repeat < 1:
            self.notify("runs must be at least 1", severity="error")
            return None
        self.runs.repeat = repeat
        if mt < 1 or not temp >= 0 or temp == float("inf"):
            self.notify("max tokens must be ≥ 1 and temperature a finite number ≥ 0", severity="error")
            return None
        # the settings row's fields over the launch's params: --idle-timeout, --deadline and the rest kept
        return replace(self.params, max_tokens=mt, temperature=temp, seed=seed)

    def start(self, prompts: list[Prompt]) -> None:
        params = self.read_params()
        if params is None:
            return
        if any(self.pane(s).state in ("connecting", "loading", "starting") for s in SIDES):
            self.notify("the servers are not ready yet", severity="warning")
            return
        self.params = params
        self.workers.cancel_group(self, "run")
        generation = self.runs.begin()
        self.run_worker(
            self._run(prompts, params, self.order, generation), group="run", exclusive=True, exit_on_error=False
        )

    def _writer(self):
        writer, said = self.recording.writer_for_run()
        self.say(said)
        return writer

    def _session(self, params: GenerationParams, order: str) -> RunSession:
        emit, on_stream = self.runs.sink(self.runs.generation)
        launched = {s: LaunchSpec.from_argv(p.argv) for s, p in self.servers.launched.items()}
        return RunSession(
            self.servers.backends["baseline"],
            self.servers.backends["candidate"],
            params,
            # the TUI triages the first prompt that differs (Ctrl+X any other), never in replay
            # a replay plays each recorded run once: its records are already the runs
            RunOptions(
                order,
                1 if self.replaying else self.runs.repeat,
                bool(self.config.triage) and not self.replaying,
                1,
                launched=launched,
            ),
            writer=self._writer(),
            emit=emit,
            on_stream=on_stream,
            recorders=lambda: self.runs.recorders,
            client=self.servers.client,
            infos=self.infos,
        )

    async def _run(self, prompts: list[Prompt], params: GenerationParams, order: str, generation: int) -> None:
        runs = self.runs
        runs.running = True
        runs.replayed = replayed_session(self.servers.backends) if self.replaying else None
        probes = None
        whole: list[PromptResult] | None = None  # the results of the whole set, once it ran to its end
        try:
            runs.session = self._session(params, order)
            if self.replaying:

                def show(gpus, host) -> None:
                    self.post_message(ProbeSampled(gpus, host, {}, "recorded with the session" if not gpus else None))

                probes = asyncio.create_task(self.recording.replay_probes(self.servers.backends["baseline"], show))
            if self.servers.one_at_a_time:
                await self._run_alone(prompts, params)
            else:
                await runs.session.run(prompts)
            writer = self.recording.writer
            if writer is not None and writer.error and not runs.said_save_error:
                runs.said_save_error = True  # once: the session file keeps what it had
                self.notify(
                    f"autosave stopped: {writer.error}; the session file keeps what it had",
                    severity="error",
                    timeout=15,
                )
            if self.config.auto_notebook and not self.replaying:
                done = runs.results[-len(prompts) * runs.repeat :]
                self.say(self.recording.append_notebook(done, self.infos(), self.servers.profile), 12)
            whole = runs.results if self.replaying else runs.results[-len(prompts) * runs.repeat :]
        except asyncio.CancelledError:
            if generation != runs.generation:  # a newer run (a seek back, a rerun) owns the panes now
                raise
            runs.flush()
            runs.say(generation, RunCancelled())
            raise
        finally:  # an error goes on to _worker_changed, which says what broke
            if probes is not None:
                probes.cancel()
            if generation == runs.generation:  # a run cancelled for a newer one leaves that one running
                runs.running = False
                runs.flush()
                runs.say(generation, RunEnded(whole))  # run_done once all is drawn

    async def _run_alone(self, prompts: list[Prompt], params: GenerationParams) -> None:
        """One server at a time (run.phased): each side started alone; the second side of each run streams
        live beside the first's recording, and the verdict is judged as side by side."""
        from spectui.run.phased import PhasedRun  # lazy: ~10 ms before the first frame, one at a time only

        emit, on_stream = self.runs.sink(self.runs.generation)
        run = PhasedRun(
            self.servers.open_alone,
            params,
            self.runs.repeat,
            writer=self._writer(),
            emit=emit,
            on_stream=on_stream,
            recorders=lambda: self.runs.recorders,
            say=lambda line: self.sub_title_is(f"one server at a time, measured one after the other · {line}"),
        )
        await run.run(prompts)

    def _session_for_more(self) -> RunSession:
        """The session of the run on screen, for triage or the probe after it (one for the screen's params)."""
        if self.runs.session is None:
            self.runs.session = self._session(self.params, self.order)
        return self.runs.session

    def action_triage(self) -> None:
        """Ctrl+X: triage the prompt on screen (when its outputs differ)."""
        last = self.runs.last
        if last is None or last.verdict is None or last.verdict.status != "differs" or self.replaying:
            self.notify("nothing to triage: the outputs on screen do not differ", severity="warning")
            return
        self.run_worker(self._session_for_more().triage(last), group="run", exclusive=True, exit_on_error=False)

    def action_drafts(self) -> None:
        """alt+d: what the draft proposed where the target said no; probed first if not yet done."""
        last = self.runs.last
        view = self.pane("candidate").view
        if last is None:
            self.notify("run a prompt first: the probe rebuilds the drafts of the prompt on screen", severity="warning")
            return
        if last.drafts is not None or view.show_rejected:
            self.show_drafts(last.drafts, not view.show_rejected)
            return
        if self.replaying:
            self.notify("this recording holds no draft probe for the prompt", severity="warning")
            return
        from spectui.tui.screens.confirm import ConfirmScreen, draft_server_question  # lazy: httpx, ~0.3 s

        session = self._session_for_more()
        backend = self.servers.backends.get("candidate")
        question = draft_server_question(session, backend.info if backend is not None else None)

        def probe() -> None:
            self.run_worker(session.probe(last), group="run", exclusive=True, exit_on_error=False)

        if question is None:  # no server to start (an n-gram drafter): the probe runs now
            probe()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                probe()

        self.app.push_screen(ConfirmScreen("start a third llama-server?", question), answered)

    # -- what the run posts, drawn by name ----------------------------------------------------------
    @on(RunPosted)
    def _run_posted(self, message: RunPosted) -> None:
        """One event of the run on screen, in the order the session posted it."""
        if message.generation != self.runs.generation:
            return  # a cancelled run's late events never reach the next run's panes
        try:
            self.draw(message.event, message.recorders)
        except NoMatches:  # the app is closing and its widgets are gone
            return

    def draw(self, event, recorders: dict[str, SideRecorder]) -> None:
        runs = self.runs
        match event:
            case TokensArrived(events=batches):
                self.draw_tokens(batches, recorders)
            case events.PromptStarted(prompt=prompt):
                self.prompt_started(prompt, recorders)
            case events.PromptFinished(result=result):
                self.prompt_finished(result)
            case events.TriageStarted():
                self.banner().show_cause("triage: rerunning both sides and asking for log-probabilities…")
            case events.TriageFound(result=result, triage=triage) if result is runs.last:
                self.banner().show_cause(triage.line())
            case events.ProbeStarted(what=what):
                self.banner().show_cause(f"draft probe: {what}")
            case events.ProbeFound(result=result, drafts=drafts) if result is runs.last:
                self.show_drafts(drafts)
            case events.StepStopped(step=step, message=text):
                self.banner().show_cause(f"{step} stopped: {text}")
            case RunCancelled():
                for s in SIDES:
                    if not runs.recorders[s].done and self.pane(s).state != "failed":
                        self.pane(s).set_state("cancelled")
                self.banner().show_running("cancelled")
            case RunEnded(results=results):
                if results is not None:
                    self.show_whole_set(results)
                runs.run_done.set()

    def prompt_started(self, prompt: Prompt, recorders: dict[str, SideRecorder]) -> None:
        self.runs.on_screen = prompt
        self.runs.comparer = LiveComparer()
        for s in SIDES:
            pane = self.pane(s)
            pane.view.reset()
            pane.set_class(False, "-diverged")
            pane.show_figures(recorders[s])
            pane.set_state("waiting" if self.order == "sequential" and s == "candidate" else "streaming")
        self.banner().show_running()
        if not self.replaying:
            self.sub_title_is(f"{prompt.id}: {prompt.preview}")

    def prompt_finished(self, result: PromptResult) -> None:
        for s in SIDES:
            backend = self.servers.backends[s]
            if backend.info is not None and not self.replaying:
                self.pane(s).set_info(backend.info)
        self.show_figures({"baseline": result.baseline, "candidate": result.candidate})
        self.refresh_bindings()
        banner = self.banner()
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
            banner.show_diverged(v.divergence, cached, self._kv_note())
            self._mark_divergence(v.divergence)
            if result.triage is not None and self.replaying:
                banner.show_cause(f"{result.triage.line()} (recorded)")
        elif v is not None and v.status == "identical":
            banner.show_identical(len(b.output()), cached, v.compared)
        elif v is not None and v.status == "failed":
            failed = [s for s, rec in zip(SIDES, (b, c), strict=True) if rec.failed is not None]
            agreed = min(len(self.runs.comparer.data["baseline"]), len(self.runs.comparer.data["candidate"]))
            banner.show_running(
                f"not compared: {' and '.join(failed)} failed (see its pane); "
                f"the outputs agreed for the first {agreed} bytes"
            )
        elif v is not None and v.status == "incomplete":
            banner.show_running("incomplete: the recording stops inside this prompt; no verdict")
        if v is not None and v.status != "incomplete":  # both halves of the answer, first (core.headline)
            banner.show_headline(headline.for_prompt(self.runs.results, result))
            if result.measured and not c.figures.drafted and not self.replaying:
                self._why_no_drafts(result)
        if result.drafts is not None and self.replaying:  # replay shows the recorded probe without any server
            self.show_drafts(result.drafts)

    def show_drafts(self, found: ProbeResult | None, show: bool = True) -> None:
        view = self.pane("candidate").view
        view.rejected_text = found.rejected_at() if found is not None else {}
        view.show_rejected = show and found is not None
        view.rebuild()
        if found is not None and show:
            self.banner().show_cause(found.summary())
            if view.mark_mode != "full":  # the guesses are written beside the ✗n marks, which are off now
                self.notify("the draft's rejected guesses show with all marks: press alt+k", timeout=8)

    def draw_tokens(self, batches: dict[str, list], recorders: dict[str, SideRecorder]) -> None:
        """One frame's stream events into the panes: a redraw per frame, not per token."""
        comparer = self.runs.comparer
        drew = False
        for side, batch in batches.items():
            if not batch:
                continue
            rec = recorders[side]
            pane = self.pane(side)
            tokens: list[TokenEvent] = []
            for ev in batch:
                if isinstance(ev, TokenEvent):
                    tokens.append(ev)
                    comparer.add(side, ev.data)
                elif isinstance(ev, StreamStarted):
                    pane.set_state("streaming")
                    if self.order == "sequential" and side == "baseline":
                        self.pane("candidate").set_state("waiting")
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
                    comparer.add_tail(side, ev.tail)
                    comparer.finish(side)
                    pane.set_state("done")
                elif isinstance(ev, StreamFailed):
                    # not finish(): a cut-off output is not a divergence; bytes that already differ still are
                    pane.set_state("failed", f"{ev.message}")
            if tokens:
                pane.view.add(tokens)
                drew = True
        self.show_figures(recorders)  # once a frame, for both panes
        if drew:
            self.runs.frames += 1
        self._check_divergence(recorders)

    def _build_of(self, side: str) -> str:
        info = self.pane(side).info
        return info.build if info and info.build else "?"

    def show_figures(self, recorders: dict[str, SideRecorder]) -> None:
        b, c = recorders["baseline"], recorders["candidate"]
        self.pane("baseline").show_figures(b)
        line = None
        finished = b.finished is not None and c.finished is not None  # never a speed-up for a failed side
        on_screen = self.runs.on_screen
        if b.figures.decode_tps and c.figures.decode_tps and finished and on_screen is not None:
            r = PromptResult(on_screen, b, c)
            builds = f"{self._build_of('baseline')} → {self._build_of('candidate')}"
            line = f"speed-up {speedup_text(r)} · builds {builds}"
            last = self.runs.last
            repeated = runs_line(self.runs.results) if last is not None and last.candidate is c else None
            if repeated is not None:
                # repeated runs: this run's own figure, then the prompt's over its runs (core.report's text)
                line = f"this run {speedup_text(r)}\n{repeated} · builds {builds}"
            ran = last.order if last is not None and last.candidate is c and last.order else self.order
            if ran == "concurrent":  # the order changes the figure: said beside it (core.report)
                line += f"\n{CONCURRENT_SHORT}"
        self.pane("candidate").show_figures(c, line)

    def show_whole_set(self, results: list[PromptResult]) -> None:
        """After a run over two or more prompts: the whole set's figure with its acceptance, under the verdict."""
        if (line := whole_set_line(results, self.pane("candidate").info)) is not None:
            self.banner().show_headline(headline.headline_for(results))
            self.banner().add_line(line)

    def _why_no_drafts(self, result: PromptResult) -> None:
        """A speculating candidate that drafted nothing: the likely cause from its flags, under the verdict."""
        launched = self.servers.launched.get("candidate")
        f = result.candidate.figures
        context = (f.prompt_tokens or 0) + f.tokens or None
        if why := explain(launched.argv if launched is not None else None, self.pane("candidate").url, context):
            self.banner().add_line(why)

    def _kv_note(self) -> str:
        launched = self.servers.launched.get("candidate")
        spec = LaunchSpec.from_argv(launched.argv if launched is not None else None)
        return QUANTISED_KV_NOTE if spec.quantised_kv else ""

    def _mark_divergence(self, d) -> None:
        for side, tok in (("baseline", d.baseline_token), ("candidate", d.candidate_token)):
            self.pane(side).view.mark_divergence(tok)
            self.pane(side).set_class(True, "-diverged")

    def _check_divergence(self, recorders: dict[str, SideRecorder]) -> None:
        """While the streams run, show where their bytes part the moment it is seen. The final word,
        IDENTICAL or DIFFERS, is the verdict the prompt carries (prompt_finished), never decided here."""
        d = self.runs.comparer.divergence
        banner = self.banner()
        cached = (recorders["baseline"].figures.prompt_cached, recorders["candidate"].figures.prompt_cached)
        if d is not None and not banner.has_class("-diverged"):
            banner.show_diverged(d, cached, self._kv_note())
            self._mark_divergence(d)
