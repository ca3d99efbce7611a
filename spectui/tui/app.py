"""The two-pane Textual app: watch the baseline and the candidate answer the same prompt."""

from __future__ import annotations

import asyncio
import importlib
from typing import TYPE_CHECKING

from textual import on
from textual.actions import parse
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Container, Horizontal
from textual.css.query import NoMatches
from textual.widgets import Header, Input, Label, Select

from spectui.backends.launchspec import LaunchSpec
from spectui.core.errors import describe
from spectui.core.report import CONCURRENT_CAVEAT
from spectui.core.runner import SIDES
from spectui.machine.probes import GPUProbe
from spectui.store import prompts as prompt_sets
from spectui.store.config import load as load_settings
from spectui.store.config import remember
from spectui.tui.config import AppConfig
from spectui.tui.context import LabContext
from spectui.tui.controller import FLUSH_S, RunController
from spectui.tui.key_actions import KeysMixin
from spectui.tui.keys import main_screen_only, sentence
from spectui.tui.messages import ProbeSampled, RunMessage
from spectui.tui.recording import SessionKeeper
from spectui.tui.screens.diff import DiffScreen
from spectui.tui.supervisor import ServerSupervisor
from spectui.tui.themes import legend_text, user_themes
from spectui.tui.widgets.fit import FitLabel, fit_main_screen, order_cache_words
from spectui.tui.widgets.footer import KeysFooter
from spectui.tui.widgets.panes import DEFAULT_MARKS, Banner, LivePanel, ServerLogs, SidePane

if TYPE_CHECKING:  # httpx and the backends load when the app opens its client, not before its first frame
    import httpx

    from spectui.backends.base import Backend

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


class SpectuiApp(KeysMixin, App):
    TITLE = "spectui"
    SUB_TITLE = "is the candidate faster, and are the bytes the same?"
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
        Binding("f12", "keep('screenshot')", "Screenshot", id="screenshot", show=False),
        Binding("alt+p", "profiles", "Profiles", id="profiles", priority=True),  # ctrl+k/u/w edit the prompt
        Binding("ctrl+y", "lab('theory')", "Theory", id="theory", priority=True),
        Binding("ctrl+f", "lab('prefix_lab')", "Cache lab", id="prefix_lab", priority=True),
        Binding("alt+s", "lab('sweep')", "Sweep", id="sweep", priority=True),
        Binding("f2", "lab('sampling')", "Sampling", id="sampling", priority=True),
        Binding("f3", "lab('drafts_cost')", "Draft cost", id="drafts_cost", show=False, priority=True),
        Binding("f4", "lab('prove')", "Prove", id="prove", priority=True),
        Binding("alt+l", "switch('logs')", "Logs", id="toggle_logs", priority=True),
        Binding("alt+m", "toggle_live", "Live", id="toggle_live", priority=True),
        Binding("f1", "show_keys", "Keys", id="show_keys", priority=True),
        Binding("question_mark", "show_keys", "Keys", id="show_keys_plain", show=False),
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
        # replay: pause, one token, slower/faster, seek
        Binding("f5", "replay('pause')", "Pause", id="replay_pause"),
        Binding("f6", "replay('step')", "Step", id="replay_step"),
        Binding("f7", "replay('slower')", "Slower", id="replay_slower"),
        Binding("f8", "replay('faster')", "Faster", id="replay_faster"),
        Binding("f9", "replay('back')", "Seek −2 s", id="replay_back"),
        Binding("f10", "replay('forward')", "Seek +2 s", id="replay_forward"),
    ]

    def __init__(self, config: AppConfig) -> None:
        super().__init__()
        self.config = config
        self.params = config.params
        self.order = config.order
        self.client: httpx.AsyncClient | None = None
        self.backends: dict[str, Backend] = {}
        self.gpu_probe = config.gpu_probe or GPUProbe()
        if config.prompts is not None:
            self.prompt_set_name, self.prompt_list = "session", list(config.prompts)
        else:
            self.prompt_set_name, self.prompt_list = prompt_sets.load_set(config.prompt_set)
        if config.title:
            self.title = config.title
        # the theme is chosen before the first compose: set after mount, it re-parses and re-applies the
        # whole stylesheet (0.49 s of a 2.0 s first frame, profiled for issue 32)
        themes, self.theme_marks, self._theme_notes = user_themes()
        for theme in themes:
            self.register_theme(theme)
        settings, warnings = load_settings()
        self._theme_notes += warnings
        remembered = settings.get("theme")
        self._theme_ready = False  # the remembered theme is picked, not switched to: not remembered again
        if remembered in self.available_themes:
            self.theme = remembered
        elif "spectui-dark" in self.available_themes:
            self.theme = "spectui-dark"
        self._theme_ready = True
        self.replay_control = config.replay_control
        self.servers = ServerSupervisor(self)  # connecting, launching, logs, probes
        self.recording = SessionKeeper(self)  # session, notebook, export, replay
        # the run loop's presenter: its messages (tui.messages) drawn into the panes and the banner
        self.runs = RunController(self, self.recording, self.servers.open_alone)

    # state the tests and benchmarks read
    @property
    def results(self):
        return self.runs.results

    @property
    def recorders(self):
        return self.runs.recorders

    @property
    def run_done(self):
        return self.runs.run_done

    @property
    def running(self) -> bool:
        return self.runs.running

    @property
    def launcher(self):
        return self.servers.launcher

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

    @property
    def marks(self) -> dict[str, str]:
        return {**DEFAULT_MARKS, **self.theme_marks.get(self.theme, {})}

    def on_mount(self) -> None:
        for note in self._theme_notes:
            self.notify(note, severity="warning", timeout=8)
        # the HTTP client (httpx, an SSL context), the backends and the probe thread come after the first
        # frame, which needs none of them (they were 0.1 s of a 0.87 s first frame; issue 32)
        self.call_after_refresh(self.servers.open_backends)
        self.set_interval(FLUSH_S, self.runs.flush)
        self.set_interval(self.config.probe_interval, self.servers.poll_kv)
        self._apply_width(self.size.width)
        self.set_interval(1.0, self.servers.refresh_logs)
        self.apply_launch_notes()
        if self.config.pick_profile:
            self.call_after_refresh(self.action_profiles)
        if self.config.initial_prompt:
            self.q("#prompt", Input).value = self.config.initial_prompt
        self.q("#prompt", Input).focus()

    def watch_theme(self, theme: str) -> None:
        if self._theme_ready:
            try:
                remember(theme=theme)  # switched from the command palette: remembered for next time
            except OSError:
                pass
        for side in SIDES:
            try:
                pane = self.pane(side)
            except Exception:
                return
            pane.view.marks = self.marks
            pane.view.rebuild()
        try:
            self.q("#legend", Label).update(legend_text(self.marks, self.pane("candidate").view.mark_mode))
        except Exception:
            pass

    def on_resize(self, event) -> None:
        self._apply_width(event.size.width)

    def _apply_width(self, width: int) -> None:
        fit_main_screen(self.main_screen, width, self.size.height)  # a short terminal folds what it can

    def apply_launch_notes(self) -> None:
        for side, server in self.config.launched.items():
            self.pane(side).launch_note = LaunchSpec.from_argv(server.argv).note()

    def lab_context(self) -> LabContext:
        """What a lab screen gets of the app, read now (tui.context): never the app itself."""
        alone = self.servers.alone()
        typed = self.q("#prompt", Input).value
        info = self.pane("baseline").info
        return LabContext(
            dict(self.backends),
            self.params,
            list(self.prompt_list),
            self.prompt_set_name,
            prompt=self.runs.last_prompt or (prompt_sets.single(typed) if typed.strip() else None),
            results=list(self.runs.results),
            refusal=self.servers.lab_refusal(),
            open_alone=self.servers.open_alone if alone else None,
            alone_why=self.servers.alone_why if alone else "",
            client=self.client,
            launched=dict(self.config.launched),
            notebook=self.config.notebook,
            model_path=info.model_path if info is not None else None,
            profile=load_settings()[0].get("profile"),
        )

    def action_lab(self, name: str) -> None:
        """A lab's key: its screen opened one way, `open(context)`, or the notice why it cannot open now."""
        module, cls = LABS[name]  # imported when opened: the first frame needs none of them (issue 32)
        opened = getattr(importlib.import_module(module), cls).open(self.lab_context())
        if isinstance(opened, str):
            self.notify(opened, severity="warning")
        else:
            self.push_screen(opened)

    def action_profiles(self) -> None:
        from spectui.store.profiles import detect, load_profiles, preselect  # lazy: after the first frame
        from spectui.tui.screens.profiles_screen import ProfilePicker  # lazy: httpx, after the 1st frame

        profiles, problems = load_profiles()
        hw = detect(self.gpu_probe)
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
            self.servers.launch(profile, profile.comparison(cid))

        self.push_screen(ProfilePicker(profiles, hw, chosen, problems), picked)

    def pane(self, side: str) -> SidePane:
        # the main screen's widgets, also while a modal (the diff view) is on top
        return self.main_screen.query_one(f"#pane-{side}", SidePane)

    @property
    def main_screen(self):
        stack = self.screen_stack
        if not stack:  # the app is shutting down: timers may still tick once
            raise NoMatches("the app has no screens left")
        return stack[0]

    def q(self, selector, kind=None):
        return self.main_screen.query_one(selector, kind) if kind else self.main_screen.query_one(selector)

    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        for b in self.BINDINGS:
            if b.action.startswith("replay(") and not self.replaying:
                continue
            if b.action in ("quit",) or self.check_action(*parse(b.action)[1:]) is False:  # not on this screen
                continue
            # the palette's help line is the action's one sentence (tui.keys.SENTENCES), as on the `?` screen
            yield SystemCommand(
                f"{b.description} ({b.key})", sentence(b.action, b.description), lambda a=b.action: self.run_action(a)
            )

    # -- recording, notebook, export -------------------------------------------------------------------
    @property
    def replaying(self) -> bool:
        return self.replay_control is not None

    def check_action(self, action: str, parameters) -> bool | None:
        # True: shown; None: shown greyed out; False: hidden (Textual's convention)
        if main_screen_only(self, action, parameters):  # a lab's footer and `?`: its own keys (Ctrl+D: its DIFFERS)
            return False
        if action == "replay":
            return True if self.replaying else False
        if action == "triage":
            last = self.runs.results[-1] if self.runs.results else None
            return None if self.replaying or last is None or last.divergence is None else True
        if action == "keep" and parameters[:1] in (("notebook",), ("export",)) and not self.runs.results:
            return None
        return True

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
        picker = self.q("#prompt-set", Select)
        picker.set_options([(f"{p.id} · {p.category}", p.id) for p in items])
        picker.prompt = f"prompt ({len(items)})"
        self.notify(f"prompt set {name}: {len(items)} prompts (ctrl+g runs them all)")

    @on(Select.Changed, "#prompt-set")
    def _prompt_picked(self, event: Select.Changed) -> None:
        chosen = next((p for p in self.prompt_list if p.id == event.value), None)
        if chosen is None:
            return
        self.runs.last_prompt = chosen
        self.q("#prompt", Input).value = chosen.messages[-1]["content"] if chosen.messages else (chosen.raw or "")
        self.runs.picked = chosen

    def on_key(self, event) -> None:
        focused = self.focused
        if isinstance(focused, Input) and focused.id == "prompt" and event.key in ("up", "down"):
            typed = self.runs.recall(-1 if event.key == "up" else 1)
            if typed is not None:
                focused.value = typed
                focused.cursor_position = len(typed)
                event.stop()

    async def on_unmount(self) -> None:
        self.servers.stop()
        self.recording.close()
        if self.client is not None:  # quitting never waits on a connection that will not close; asyncio.wait,
            closing = asyncio.ensure_future(self.client.aclose())  # as 3.11's wait_for awaits the cancelled close
            closing.add_done_callback(lambda task: task.cancelled() or task.exception())
            await asyncio.wait({closing}, timeout=3.0)
        self.gpu_probe.close()

    @on(RunMessage)
    def _run_message(self, message: RunMessage) -> None:
        """The run session's events, as messages (tui.messages): the presenter draws them, in order."""
        self.runs.present(message)

    def on_probe_sampled(self, msg: ProbeSampled) -> None:
        self.recording.record_probe(msg.gpus, msg.host)
        try:
            self.q(LivePanel).show(msg.gpus, msg.host, msg.procs, self.servers.kv, msg.gpu_note)
        except NoMatches:  # closing
            pass

    # -- actions (each binding's id names one) --------------------------------------------------------
    def action_run(self) -> None:
        self.runs.run_typed()

    def action_rerun(self) -> None:
        if self.runs.last_prompt is None:
            self.notify("nothing to rerun yet", severity="warning")
            return
        self.runs.start([self.runs.last_prompt])

    def action_run_all(self) -> None:
        self.runs.start(list(self.prompt_list))

    def action_cancel(self) -> None:
        self.runs.cancel()

    def action_switch(self, what: str) -> None:
        """ctrl+o the order, ctrl+t the token boundaries, alt+k the marks, alt+l the server logs."""
        if what == "order":
            self.order = "concurrent" if self.order == "sequential" else "sequential"
            self.q("#order", FitLabel).say(*order_cache_words(self.order, self.params.cache_prompt))
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
            self.servers.toggle_logs()

    def action_diff(self) -> None:
        last = self.runs.results[-1] if self.runs.results else None
        self.push_screen(
            DiffScreen(
                self.runs.recorders["baseline"].output(),
                self.runs.recorders["candidate"].output(),
                last.verdict if last is not None and not self.runs.running else None,
                last.triage if last is not None else None,
                last.drafts if last is not None else None,
                live=self.runs.comparer.divergence,
            )
        )

    def action_triage(self) -> None:
        self.runs.triage_last()

    def action_drafts(self) -> None:
        self.runs.drafts_toggle()

    def action_keep(self, what: str) -> None:
        """ctrl+s the session, ctrl+n the notebook, ctrl+e the reports, F12 a screenshot."""
        if what == "save":
            self.recording.save()
        elif what == "notebook":
            self.recording.append_notebook(self.runs.results[-1:])
        elif what == "export":
            self.recording.export()
        elif what == "screenshot":
            self.recording.screenshot()

    def action_sessions(self) -> None:
        from spectui.tui.screens.sessions_screen import SessionBrowser  # lazy: not needed for the first frame

        self.push_screen(SessionBrowser(self.recording.session_dir()), self.recording.open_session)

    def action_replay(self, what: str) -> None:
        """F5–F10: pause, one token, slower, faster, seek ±2 s."""
        self.recording.control(what)


def make_app(config: AppConfig) -> SpectuiApp:
    return SpectuiApp(config)
