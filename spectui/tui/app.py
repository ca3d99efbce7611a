"""The two-pane Textual app: watch the baseline and the candidate answer the same prompt."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal
from textual.css.query import NoMatches
from textual.message import Message
from textual.theme import Theme
from textual.widgets import Footer, Header, Input, Label, Select

from spectui.engine import prompts as prompt_sets
from spectui.engine.compare import LiveComparer
from spectui.engine.events import StepEvent, StreamFailed, StreamFinished, StreamStarted, TokenEvent
from spectui.engine.figures import SideRecorder
from spectui.engine.llamacpp import GenerationParams, LlamaCppBackend
from spectui.engine.probes import GPUProbe, ProcessProbe, host_sample
from spectui.engine.report import speedup_text
from spectui.engine.errors import describe
from spectui.engine.runner import PromptResult, cross_check, metrics_or_none, render_prompt
from spectui.engine.themes import load_themes
from spectui.tui.diff import DiffScreen
from spectui.tui.widgets import Banner, LivePanel, ServerLogs, SidePane

SIDES = ("baseline", "candidate")
FLUSH_S = 0.03  # batch token updates every ~30 ms instead of one message per token


@dataclass
class AppConfig:
    """Everything from outside the app, injected in one place (CLI, tests, replay and bench alike)."""

    baseline_url: str
    candidate_url: str
    prompt_set: str = "default"
    params: GenerationParams = field(default_factory=GenerationParams)
    order: str = "sequential"
    backend_factory: Callable[[str, httpx.AsyncClient], LlamaCppBackend] | None = None
    gpu_probe: GPUProbe | None = None
    pids: dict[str, int] = field(default_factory=dict)  # local server processes, by side
    ready_timeout: float = 120.0
    probe_interval: float = 1.0
    host_probe: Callable[[], object] = host_sample
    initial_prompt: str | None = None
    autorun: bool = False
    prompts: list | None = None  # a fixed prompt list (replay) instead of a prompt set
    autorun_all: bool = False
    title: str | None = None
    backends: dict | None = None  # ready-made backends by side (replay), instead of backend_factory
    replay_control: object | None = None  # a ReplayControl when replaying
    autosave: bool = True  # record every run into session_dir
    session_dir: object | None = None  # default: the user data dir's sessions/
    notebook: str | None = None  # notebook path (None: $SPECTUI_NOTEBOOK or the default)
    auto_notebook: bool = False
    launched: dict = field(default_factory=dict)  # side → ServerProcess, for servers spectui started
    profile: str | None = None  # the hardware profile in use (recorded in the notebook)
    pick_profile: bool = False  # open the profile picker on start
    backend_kind: str = "auto"
    api_key: str | None = None  # from the environment variable the user named; never written anywhere


class ProbeSampled(Message):
    """A live-panel sample; a newer one replaces an older one still in the queue."""

    def __init__(self, gpus, host, procs, gpu_note) -> None:
        super().__init__()
        self.gpus, self.host, self.procs, self.gpu_note = gpus, host, procs, gpu_note

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ProbeSampled)


class SpectuiApp(App):
    TITLE = "spectui"
    SUB_TITLE = "is the candidate faster, and are the bytes the same?"
    CSS = """
    #prompt-row { height: 3; }
    #prompt { width: 1fr; }
    #prompt-set { width: 36; }
    #set-picker { width: 26; }
    #prompt-row.-narrow #set-picker { width: 18; }
    #prompt-row.-narrow #prompt-set { width: 22; }
    #settings { height: 1; padding: 0 1; color: $text-muted; }
    #settings Input { width: 10; height: 1; border: none; padding: 0; }
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
        Binding("ctrl+o", "toggle_order", "Order", id="toggle_order", priority=True),
        Binding("ctrl+t", "toggle_boundaries", "Tokens", id="toggle_boundaries", priority=True),
        Binding("ctrl+d", "diff", "Diff", id="diff", priority=True),
        Binding("ctrl+s", "save_session", "Save", id="save_session", priority=True),
        Binding("ctrl+n", "notebook", "Notebook", id="notebook", priority=True),
        Binding("ctrl+e", "export", "Export", id="export", priority=True),
        Binding("ctrl+l", "sessions", "Sessions", id="sessions", priority=True),
        Binding("f12", "screenshot_svg", "Screenshot", id="screenshot", show=False),
        Binding("ctrl+k", "profiles", "Profiles", id="profiles", priority=True),
        Binding("ctrl+y", "theory", "Theory", id="theory", priority=True),
        Binding("ctrl+f", "prefix_lab", "Cache lab", id="prefix_lab", priority=True),
        Binding("ctrl+u", "sweep", "Sweep", id="sweep", priority=True),
        Binding("ctrl+w", "toggle_logs", "Logs", id="toggle_logs", priority=True),
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
        # replay: pause, one token, slower/faster, seek
        Binding("f5", "replay_pause", "Pause", id="replay_pause"),
        Binding("f6", "replay_step", "Step", id="replay_step"),
        Binding("f7", "replay_slower", "Slower", id="replay_slower"),
        Binding("f8", "replay_faster", "Faster", id="replay_faster"),
        Binding("f9", "replay_back", "Seek −2 s", id="replay_back"),
        Binding("f10", "replay_forward", "Seek +2 s", id="replay_forward"),
    ]

    def __init__(self, config: AppConfig) -> None:
        super().__init__()
        self.config = config
        self.params = config.params
        self.order = config.order
        self.history: list[str] = []
        self._history_pos = 0
        self.recorders: dict[str, SideRecorder] = {s: SideRecorder(s) for s in SIDES}
        self.comparer = LiveComparer()
        self.results: list[PromptResult] = []
        self.last_prompt: prompt_sets.Prompt | None = None
        self.running = False
        self._pending: dict[str, list] = {s: [] for s in SIDES}
        self._client: httpx.AsyncClient | None = None
        self.backends: dict[str, LlamaCppBackend] = {}
        self.kv: dict[str, tuple[int, int] | None] = {}
        self.gpu_probe = config.gpu_probe or GPUProbe()
        self.proc_probe = ProcessProbe()
        if config.prompts is not None:
            self.prompt_set_name, self.prompt_list = "session", list(config.prompts)
        else:
            self.prompt_set_name, self.prompt_list = prompt_sets.load_set(config.prompt_set)
        if config.title:
            self.title = config.title
        self.theme_marks: dict[str, dict[str, str]] = {}
        self.run_done = asyncio.Event()
        self.frames = 0  # flushes that drew new tokens (the keep-up benchmark reads it)
        self.writer = None  # the SessionWriter recording this app's runs
        self.replay_control = config.replay_control

    # -- layout ------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="prompt-row"):
            yield Input(placeholder="type a prompt and press Enter (↑/↓ history)", id="prompt")
            yield Select(prompt_sets.available_sets() if self.config.prompts is None else [("session", "session")],
                         prompt=f"set: {self.prompt_set_name}", id="set-picker", allow_blank=True)
            yield Select([(f"{p.id} · {p.category}", p.id) for p in self.prompt_list],
                         prompt=f"prompt ({len(self.prompt_list)})", id="prompt-set")
        with Horizontal(id="settings"):
            yield Label("max tokens")
            yield Input(str(self.params.max_tokens), id="max-tokens", type="integer")
            yield Label("temperature")
            yield Input(str(self.params.temperature), id="temperature", type="number")
            yield Label("seed")
            yield Input(str(self.params.seed), id="seed", type="integer")
            yield Label(f"order: {self.order}", id="order")
        yield Label(self._legend(), id="legend")
        with Container(id="panes"):
            yield SidePane("baseline", self.config.baseline_url)
            yield SidePane("candidate", self.config.candidate_url)
        yield Banner("waiting for a prompt", id="banner")
        yield ServerLogs(id="logs")
        yield LivePanel()
        yield Footer()

    def _legend(self) -> str:
        m = self.marks
        return (f"candidate marks: [{m['accepted']} underline]accepted draft[/] · [{m['target']}]target's own[/] · "
                f"[bold {m['rejected']}]✗n[/] drafts rejected · [bold reverse {m['diverge']}]first difference[/]")

    @property
    def marks(self) -> dict[str, str]:
        from spectui.tui.widgets import DEFAULT_MARKS

        return {**DEFAULT_MARKS, **self.theme_marks.get(self.theme, {})}

    def on_mount(self) -> None:
        self._register_themes()
        self._client = httpx.AsyncClient()
        factory = self.config.backend_factory or (lambda url, client: LlamaCppBackend(url, client))
        if self.config.backends:
            self.backends = dict(self.config.backends)
        else:
            self.backends = {s: factory(getattr(self.config, f"{s}_url"), self._client) for s in SIDES}
        for side in SIDES:
            self.connect_side(side)
        self.set_interval(FLUSH_S, self._flush)
        self.probe_loop()
        self.set_interval(self.config.probe_interval, self._poll_kv)
        self._apply_width(self.size.width)
        self.launcher = None
        self.set_interval(1.0, self._refresh_logs)
        self._apply_launch_notes()
        if self.config.pick_profile:
            self.call_after_refresh(self.action_profiles)
        if self.config.initial_prompt:
            self.q("#prompt", Input).value = self.config.initial_prompt
        self.q("#prompt", Input).focus()

    def _register_themes(self) -> None:
        loaded = load_themes()
        for spec in loaded.themes:
            self.register_theme(Theme(name=spec.name, dark=spec.dark, **spec.colors))
            self.theme_marks[spec.name] = spec.marks
        for problem in loaded.problems:
            self.notify(problem, severity="warning", timeout=8)
        from spectui.engine.config import load as load_settings

        settings, warnings = load_settings()
        for w in warnings:
            self.notify(w, severity="warning", timeout=8)
        remembered = settings.get("theme")
        if remembered in self.available_themes:
            self.theme = remembered
        elif "spectui-dark" in self.available_themes:
            self.theme = "spectui-dark"
        self._theme_ready = True

    def watch_theme(self, theme: str) -> None:
        if getattr(self, "_theme_ready", False):
            from spectui.engine.config import remember

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
            self.q("#legend", Label).update(self._legend())
        except Exception:
            pass

    def on_resize(self, event) -> None:
        self._apply_width(event.size.width)

    def _apply_width(self, width: int) -> None:
        self.q("#panes").set_class(width < 100, "-narrow")
        self.q("#prompt-row").set_class(width < 100, "-narrow")

    def _apply_launch_notes(self) -> None:
        for side, server in self.config.launched.items():
            self.pane(side).launch_note = launch_note(server.argv)

    def _refresh_logs(self) -> None:
        try:
            logs = self.q(ServerLogs)
        except NoMatches:
            return
        if not logs.display:
            return
        logs.show({side: server.tail(6) for side, server in self.config.launched.items()},
                  {side: server.exited() for side, server in self.config.launched.items()})

    def action_theory(self) -> None:
        from spectui.engine import theory
        from spectui.tui.theory_screen import TheoryScreen

        measured = None
        if self.results:
            r = self.results[-1]
            b, c = r.baseline.figures, r.candidate.figures
            steps = int(c.metrics_steps) if c.metrics_steps else c.steps
            measured = theory.from_measurement(b.decode_tps, c.decode_tps, c.drafted, c.accepted, steps)
        if measured:
            self.push_screen(TheoryScreen(min(measured["alpha"], 0.999), max(1, round(measured["gamma"])),
                                          round(measured["implied_cost"], 3), measured))
        else:
            self.push_screen(TheoryScreen())

    def _live_backends(self):
        if self.replaying or any(self.pane(s).info is None for s in SIDES):
            self.notify("both servers must be connected (live, not a replay)", severity="warning")
            return None
        return self.backends

    def action_prefix_lab(self) -> None:
        from spectui.tui.lab_screens import PrefixScreen

        backends = self._live_backends()
        if backends:
            self.push_screen(PrefixScreen(backends, self.params))

    def action_sweep(self) -> None:
        from spectui.tui.lab_screens import SweepScreen

        backends = self._live_backends()
        if backends:
            self.push_screen(SweepScreen(backends, self.prompt_list, self.params))

    def action_toggle_logs(self) -> None:
        logs = self.q(ServerLogs)
        logs.display = not logs.display
        if logs.display and not self.config.launched:
            logs.show({}, {})
        self._refresh_logs()

    def action_profiles(self) -> None:
        from spectui.engine.config import load as load_settings
        from spectui.engine.profiles import detect, load_profiles, preselect
        from spectui.tui.profiles_screen import ProfilePicker

        profiles, problems = load_profiles()
        hw = detect(self.gpu_probe)
        remembered = load_settings()[0].get("profile")
        chosen = remembered if remembered in profiles else (preselect(profiles, hw).name if preselect(profiles, hw) else None)

        def picked(result) -> None:
            if result is None:
                return
            profile, cid = result
            from spectui.engine.config import remember

            try:
                remember(profile=profile.name)
            except OSError:
                pass
            self.launch(profile, profile.comparison(cid))

        self.push_screen(ProfilePicker(profiles, hw, chosen, problems), picked)

    def launch(self, profile, comparison) -> None:
        """Start a comparison's two servers (bound to 127.0.0.1 unless the profile says otherwise)."""
        from spectui.engine.profiles import servers_for

        try:
            base, cand = servers_for(profile, comparison)
        except Exception as exc:
            self.notify(describe(exc), severity="error", timeout=12)
            return
        self.workers.cancel_group(self, "run")
        if self.launcher is not None:
            self.launcher.stop_all()
        self.config.profile = profile.name
        self.config.launched = {"baseline": base, "candidate": cand}
        for side, server in self.config.launched.items():
            pane = self.pane(side)
            pane.url = server.url
            pane.info = None
            pane.border_title = f"{side} · {server.url}"
            pane.set_state("starting", f"{profile.name} · {comparison.title}")
        self._apply_launch_notes()
        self.start_servers()

    @work(thread=True, group="launch", exclusive=True, exit_on_error=False)
    def start_servers(self) -> None:
        from spectui.engine.launcher import Launcher

        launcher = Launcher()
        self.launcher = launcher
        servers = self.config.launched
        for server in servers.values():
            launcher.add(server)

        def progress(name, state, left):
            self.call_from_thread(self.pane(name).set_state, state, f"waiting for /health, {left:.0f} s left")

        try:
            launcher.start_all(on_progress=progress)
        except Exception as exc:
            msg = describe(exc)
            for side, server in servers.items():
                failed = server.exited() is not None or server.name in msg
                self.call_from_thread(self.pane(side).set_state, "failed" if failed else "stopped", msg if failed else "")
            self.call_from_thread(self._show_logs_now)
            return
        self.call_from_thread(self._servers_ready)

    def _show_logs_now(self) -> None:
        self.q(ServerLogs).display = True
        self._refresh_logs()

    def _servers_ready(self) -> None:
        factory = self.config.backend_factory or (lambda url, client: LlamaCppBackend(url, client))
        self.backends = {s: factory(self.config.launched[s].url, self._client) for s in SIDES}
        self.config.pids = {s: self.config.launched[s].pid for s in SIDES}
        for side in SIDES:
            self.connect_side(side)

    async def on_unmount(self) -> None:
        if getattr(self, "launcher", None) is not None:
            self.launcher.stop_all()  # only the servers this app started
        if self.writer is not None:
            self.writer.close()
        if self._client is not None:
            await self._client.aclose()
        self.gpu_probe.close()

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
        from textual.app import SystemCommand

        yield from super().get_system_commands(screen)
        for b in self.BINDINGS:
            if b.action.startswith("replay_") and not self.replaying:
                continue
            if b.action in ("quit",):
                continue
            yield SystemCommand(f"{b.description} ({b.key})", f"spectui: {b.description.lower()}",
                                lambda a=b.action: self.run_action(a))

    # -- recording, notebook, export -------------------------------------------------------------------
    @property
    def replaying(self) -> bool:
        return self.replay_control is not None

    def check_action(self, action: str, parameters) -> bool | None:
        # True: shown; None: shown greyed out; False: hidden (Textual's convention)
        if action.startswith("replay_"):
            return True if self.replaying else False
        if action in ("notebook", "export") and not self.results:
            return None
        return True

    def _session_dir(self):
        from pathlib import Path

        from spectui.engine.session import default_session_dir

        return Path(self.config.session_dir) if self.config.session_dir else default_session_dir()

    def _ensure_writer(self):
        if self.writer is None and not self.replaying:
            from spectui.engine.session import SessionWriter, autosave_path

            path = None
            if self.config.autosave:
                path = self._session_dir() / autosave_path().name
            try:
                self.writer = SessionWriter(path)
            except Exception as exc:  # a read-only data dir must not stop a run
                self.notify(f"autosave off: {describe(exc)}", severity="warning")
                self.writer = SessionWriter(None)
        return self.writer

    def _infos(self) -> dict:
        from spectui.engine.llamacpp import ServerInfo

        return {s: (self.pane(s).info or ServerInfo(url=self.pane(s).url)) for s in SIDES}

    def action_save_session(self) -> None:
        if self.writer is None or not self.results:
            self.notify("nothing to save yet: run a prompt first", severity="warning")
            return
        if self.writer.path is not None:
            self.notify(f"session saved (autosave) to {self.writer.path}")
            return
        from spectui.engine.session import autosave_path

        dest = self.writer.save_as(self._session_dir() / autosave_path().name)
        self.notify(f"session saved to {dest}")

    def action_notebook(self) -> None:
        self._append_notebook(self.results[-1:])

    def _append_notebook(self, results) -> None:
        from spectui.engine import notebook

        if not results:
            return
        path = notebook.notebook_path(self.config.notebook)
        try:
            where, warning = notebook.append(path, [notebook.measurement(r, self._infos()) for r in results])
        except OSError as exc:
            self.notify(f"notebook not written: {exc}", severity="error")
            return
        if warning:
            self.notify(warning, severity="warning", timeout=12)
        else:
            self.notify(f"appended {len(results)} measurement(s) to {where}")

    def action_export(self) -> None:
        import json as _json

        from spectui.engine.notebook import atomic_write
        from spectui.engine.report import json_report, markdown_report
        from spectui.engine.session import autosave_path

        stem = (self.writer.path.stem if self.writer and self.writer.path else autosave_path().stem)
        folder = self._session_dir()
        md = folder / f"{stem}.md"
        js = folder / f"{stem}.json"
        atomic_write(md, markdown_report(self._infos(), self.results, self.params, self.order,
                                          str(self.writer.path) if self.writer and self.writer.path else None))
        atomic_write(js, _json.dumps(json_report(self._infos(), self.results, self.params, self.order), indent=2) + "\n")
        self.notify(f"report written: {md} and {js.name}")

    def action_screenshot_svg(self) -> None:
        folder = self._session_dir()
        folder.mkdir(parents=True, exist_ok=True)
        path = self.save_screenshot(path=str(folder))
        self.notify(f"screenshot saved to {path}")

    def action_sessions(self) -> None:
        from spectui.tui.sessions_screen import SessionBrowser

        self.push_screen(SessionBrowser(self._session_dir()))

    def open_session(self, path) -> None:
        """Replay a saved session in this app: same panes, another event source."""
        from spectui.engine.session import ReplayControl, SessionBackend, load_session

        try:
            session = load_session(path)
        except Exception as exc:
            self.notify(describe(exc), severity="error")
            return
        for w in session.warnings:
            self.notify(w, severity="warning", timeout=10)
        if not session.prompts:
            self.notify(f"{path} holds no prompts", severity="error")
            return
        self.workers.cancel_group(self, "run")
        self.replay_control = ReplayControl(1.0)
        self.backends = {s: SessionBackend(s, session, 1.0, self.replay_control) for s in SIDES}
        self.prompt_list = [sp.prompt for sp in session.prompts]
        for s in SIDES:
            self.pane(s).set_info(session.infos[s])
            self.pane(s).set_state("ready")
        self.sub_title = f"replay · {session.path.name}"
        self.refresh_bindings()
        self.start_prompts(list(self.prompt_list))

    # replay controls
    def _replay_note(self) -> None:
        c = self.replay_control
        speed = "max" if c.speed is None else f"×{c.speed:g}"
        state = "paused" if c.paused else "playing"
        self.sub_title = f"replay {state} {speed} at {c.position_ns / 1e9:.2f} s"

    def action_replay_pause(self) -> None:
        self.replay_control.toggle_pause()
        self._replay_note()

    def action_replay_step(self) -> None:
        self.replay_control.step()
        self._replay_note()

    def action_replay_slower(self) -> None:
        c = self.replay_control
        c.set_speed(max(0.25, (c.speed or 16) / 2))
        self._replay_note()

    def action_replay_faster(self) -> None:
        c = self.replay_control
        c.set_speed(None if (c.speed or 0) >= 16 else (c.speed or 1) * 2)
        self._replay_note()

    def action_replay_forward(self) -> None:
        self.replay_control.seek(2_000_000_000)
        self._replay_note()

    def action_replay_back(self) -> None:
        """Seeking back replays the prompt from its start, as fast as possible, to the new position."""
        c = self.replay_control
        target = max(0, c.position_ns - 2_000_000_000)
        for b in self.backends.values():
            b.rewind()
        prompt = self.last_prompt
        self.workers.cancel_group(self, "run")
        c.restart(target)
        c.prompt = -2  # keep the clock at the target when the prompt restarts

        def go():
            self.start_prompts([prompt])

        self.call_later(go)
        self._replay_note()

    # -- connecting ---------------------------------------------------------------------------------
    @work(group="connect", exit_on_error=False)
    async def connect_side(self, side: str) -> None:
        pane = self.pane(side)
        backend = self.backends[side]
        if not backend.url.startswith(("http://", "https://", "replay://")) and not hasattr(backend, "session"):
            pane.set_state("not started", "pick a profile and a comparison (ctrl+k)")
            return
        if self.config.backend_factory is None and not self.config.backends and isinstance(backend, LlamaCppBackend):
            # --backend auto: llama.cpp, vLLM, SGLang or OpenAI-compatible, told apart by their endpoints
            from spectui.engine.backends import resolve

            try:
                backend, kind = await resolve(self.config.backend_kind, backend.url, self._client, self.config.api_key)
            except Exception as exc:
                pane.set_state("failed", describe(exc))
                return
            self.backends[side] = backend
        pane.set_state("connecting")
        try:
            await backend.wait_ready(self.config.ready_timeout, lambda state, left: pane.set_state(state))
            info = await backend.identify()
        except Exception as exc:  # one server failing never stops the other pane
            pane.set_state("failed", describe(exc))
            return
        pane.set_info(info)
        pane.set_state("ready")
        if all(self.pane(s).state == "ready" for s in SIDES) and not self.running:
            if self.config.autorun_all:
                self.action_run_all()
            elif self.config.autorun:
                self.action_run()

    # -- running ------------------------------------------------------------------------------------
    def _read_params(self) -> GenerationParams | None:
        try:
            mt = int(self.q("#max-tokens", Input).value)
            temp = float(self.q("#temperature", Input).value)
            seed = int(self.q("#seed", Input).value)
        except ValueError:
            self.notify("max tokens, temperature and seed must be numbers", severity="error")
            return None
        if mt < 1 or temp < 0:
            self.notify("max tokens must be ≥ 1 and temperature ≥ 0", severity="error")
            return None
        return GenerationParams(max_tokens=mt, temperature=temp, seed=seed, cache_prompt=self.params.cache_prompt)

    @on(Input.Submitted, "#prompt")
    def _prompt_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_run()

    @on(Input.Submitted, "#max-tokens, #temperature, #seed")
    def _setting_submitted(self, event: Input.Submitted) -> None:
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
        self.last_prompt = chosen
        self.q("#prompt", Input).value = chosen.messages[-1]["content"] if chosen.messages else (chosen.raw or "")
        self._picked = chosen

    def on_key(self, event) -> None:
        focused = self.focused
        if isinstance(focused, Input) and focused.id == "prompt" and event.key in ("up", "down") and self.history:
            step = -1 if event.key == "up" else 1
            self._history_pos = max(0, min(len(self.history), self._history_pos + step))
            focused.value = self.history[self._history_pos] if self._history_pos < len(self.history) else ""
            focused.cursor_position = len(focused.value)
            event.stop()

    def action_run(self) -> None:
        text = self.q("#prompt", Input).value
        picked = getattr(self, "_picked", None)
        if picked is not None and (picked.messages and picked.messages[-1]["content"] == text or picked.raw == text):
            prompt = picked
        else:
            if not text.strip():
                self.notify("type a prompt first, or pick one from the set", severity="warning")
                return
            prompt = prompt_sets.single(text)
        if not self.history or self.history[-1] != text:
            self.history.append(text)
        self._history_pos = len(self.history)
        self.start_prompts([prompt])

    def action_rerun(self) -> None:
        if self.last_prompt is None:
            self.notify("nothing to rerun yet", severity="warning")
            return
        self.start_prompts([self.last_prompt])

    def action_run_all(self) -> None:
        self.start_prompts(list(self.prompt_list))

    def action_cancel(self) -> None:
        if not self.running:
            return
        self.workers.cancel_group(self, "run")

    def action_toggle_order(self) -> None:
        self.order = "concurrent" if self.order == "sequential" else "sequential"
        self.q("#order", Label).update(f"order: {self.order}")

    def action_toggle_boundaries(self) -> None:
        for side in SIDES:
            v = self.pane(side).view
            v.boundaries = not v.boundaries
            v.rebuild()

    def action_diff(self) -> None:
        self.push_screen(DiffScreen(self.recorders["baseline"].output(), self.recorders["candidate"].output(),
                                    self.comparer.divergence))

    def start_prompts(self, prompts: list[prompt_sets.Prompt]) -> None:
        params = self._read_params()
        if params is None:
            return
        if any(self.pane(s).state in ("connecting", "loading") for s in SIDES):
            self.notify("the servers are not ready yet", severity="warning")
            return
        self.params = params
        self.workers.cancel_group(self, "run")
        self.run_done.clear()
        self.run_prompts(prompts, params, self.order)

    def _reset(self) -> None:
        self._flush()
        self.recorders = {s: SideRecorder(s) for s in SIDES}
        self.comparer = LiveComparer()
        for s in SIDES:
            self._pending[s].clear()
            pane = self.pane(s)
            pane.view.reset()
            pane.set_class(False, "-diverged")
            pane.show_figures(self.recorders[s])
        self.q(Banner).show_running()

    @work(group="run", exclusive=True, exit_on_error=False)
    async def run_prompts(self, prompts: list[prompt_sets.Prompt], params: GenerationParams, order: str) -> None:
        self.running = True
        try:
            writer = self._ensure_writer()
            if writer is not None:
                writer.servers(self._infos())
            for prompt in prompts:
                self.last_prompt = prompt
                self._reset()
                if not self.replaying:
                    self.sub_title = f"{prompt.id}: {prompt.preview}"
                if writer is not None:
                    writer.prompt(prompt, params, order)
                probes = None
                if self.replaying and hasattr(self.backends["baseline"], "play_probes"):
                    probes = asyncio.create_task(self._replay_probes())
                try:
                    if order == "concurrent":
                        await asyncio.gather(*(self._run_side(s, prompt, params) for s in SIDES))
                    else:
                        for s in SIDES:
                            await self._run_side(s, prompt, params)
                finally:
                    if probes is not None:
                        probes.cancel()
                self._flush()
                self._finish_prompt(prompt)
                if writer is not None:
                    r = self.results[-1]
                    writer.servers(self._infos())
                    writer.result(r.baseline, r.candidate, r.divergence, r.speedup)
            if self.config.auto_notebook and not self.replaying:
                self._append_notebook(self.results[-len(prompts):])
        except asyncio.CancelledError:
            self._flush()
            for s in SIDES:
                if not self.recorders[s].done and self.pane(s).state != "failed":
                    self.pane(s).set_state("cancelled")
            self.q(Banner).show_running("cancelled")
            raise
        finally:
            self.running = False
            self.run_done.set()

    async def _run_side(self, side: str, prompt: prompt_sets.Prompt, params: GenerationParams) -> None:
        pane = self.pane(side)
        backend = self.backends[side]
        if pane.state == "failed" and pane.info is None:
            return
        other = "candidate" if side == "baseline" else "baseline"
        if self.order == "sequential" and side == "baseline":
            self.pane(other).set_state("waiting")
        pane.set_state("streaming")
        try:
            text = await render_prompt(backend, prompt)
            before = await metrics_or_none(backend)
            async for ev in backend.stream(text, params):
                self._pending[side].append(ev)
            self._flush()
            if self.recorders[side].failed is None:
                saved = getattr(backend, "saved_figures", None)
                if saved is not None:  # a replayed session: the cross-check made when it was recorded
                    for key in ("metrics_drafted", "metrics_accepted", "metrics_steps", "metrics_check"):
                        if key in saved():
                            setattr(self.recorders[side].figures, key, saved()[key])
                else:
                    after = await metrics_or_none(backend)
                    from spectui.engine.runner import LLAMACPP_SPEC

                    cross_check(self.recorders[side], before, after, getattr(backend, "spec_metric_names", LLAMACPP_SPEC))
                if backend.info is not None:
                    pane.set_info(backend.info)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._pending[side].append(StreamFailed(time.perf_counter_ns(), describe(exc)))
            self._flush()

    def _flush(self) -> None:
        """Drain the events that arrived since the last frame into the panes; never drops one."""
        try:
            self._drain()
        except NoMatches:  # the app is closing and its widgets are gone
            return

    def _drain(self) -> None:
        for side in SIDES:
            pending = self._pending[side]
            if not pending:
                continue
            batch = pending[:]
            pending.clear()
            rec = self.recorders[side]
            pane = self.pane(side)
            tokens: list[TokenEvent] = []
            writer = self.writer if not self.replaying else None
            for ev in batch:
                rec.feed(ev)
                if writer is not None:
                    writer.event(side, ev)
                if isinstance(ev, TokenEvent):
                    tokens.append(ev)
                    self.comparer.add(side, ev.data)
                elif isinstance(ev, StreamFinished):
                    if tokens:
                        pane.view.add(tokens)
                        tokens = []
                    pane.view.add_tail(ev.tail)
                    if rec.relabelled:  # exact labels arrived with the final chunk (vLLM): redraw them
                        pane.view.tokens = list(rec.tokens)
                        pane.view.rebuild()
                    self.comparer.add_tail(side, ev.tail)
                    self.comparer.finish(side)
                    pane.set_state("done")
                elif isinstance(ev, StreamFailed):
                    # not finish(): a cut-off output is not a divergence; bytes that already differ still are
                    pane.set_state("failed", f"{ev.message}")
                elif isinstance(ev, (StepEvent, StreamStarted)):
                    pass
            if tokens:
                pane.view.add(tokens)
                self.frames += 1
            self._show_figures()
        self._check_divergence()

    def _show_figures(self) -> None:
        b, c = self.recorders["baseline"], self.recorders["candidate"]
        self.pane("baseline").show_figures(b)
        line = None
        if b.figures.decode_tps and c.figures.decode_tps and c.done:
            r = PromptResult(self.last_prompt, b, c)  # type: ignore[arg-type]
            builds = f"{_build(self.pane('baseline'))} → {_build(self.pane('candidate'))}"
            line = f"speed-up {speedup_text(r)} · builds {builds}"
        self.pane("candidate").show_figures(c, line)

    def _check_divergence(self) -> None:
        d = self.comparer.divergence
        banner = self.q(Banner)
        cached = (self.recorders["baseline"].figures.prompt_cached, self.recorders["candidate"].figures.prompt_cached)
        if d is not None:
            if not banner.has_class("-diverged"):
                note = ""
                launched = self.pane("candidate").launch_note
                if any(k in launched for k in ("K=", "V=", "kv=")):
                    note = "expected: the candidate runs a quantised KV cache, which is not lossless"
                banner.show_diverged(d, cached, note)
                for side, tok in (("baseline", d.baseline_token), ("candidate", d.candidate_token)):
                    self.pane(side).view.mark_divergence(tok)
                    self.pane(side).set_class(True, "-diverged")
            return
        if self.comparer.identical and not banner.has_class("-identical"):
            if all(self.recorders[s].finished is not None for s in SIDES):
                banner.show_identical(len(self.comparer.data["baseline"]), cached)

    def _finish_prompt(self, prompt: prompt_sets.Prompt) -> None:
        b, c = self.recorders["baseline"], self.recorders["candidate"]
        result = PromptResult(prompt, b, c, divergence=self.comparer.divergence)
        self.results.append(result)
        self._show_figures()
        self.refresh_bindings()
        if result.divergence is not None:
            # the banner went up mid-stream; now both sides' cache reuse is known, say it
            cached = (b.figures.prompt_cached, c.figures.prompt_cached)
            launched = self.pane("candidate").launch_note
            note = ("expected: the candidate runs a quantised KV cache, which is not lossless"
                    if any(k in launched for k in ("K=", "V=", "kv=")) else "")
            self.q(Banner).show_diverged(result.divergence, cached, note)
        if result.failed and result.divergence is None:
            failed = [s for s in SIDES if self.recorders[s].failed is not None]
            agreed = min(len(self.comparer.data["baseline"]), len(self.comparer.data["candidate"]))
            self.q(Banner).show_running(f"not compared: {' and '.join(failed)} failed (see its pane); "
                                        f"the outputs agreed for the first {agreed} bytes")

    async def _replay_probes(self) -> None:
        """A replay draws the live panel from the samples recorded with the session."""
        await asyncio.sleep(0.05)  # the first side's stream has started the replay clock
        backend = self.backends["baseline"]

        def show(gpus, host):
            self.post_message(ProbeSampled(gpus, host, {}, "recorded with the session" if not gpus else None))

        await backend.play_probes(show)

    # -- live panel ---------------------------------------------------------------------------------
    @work(thread=True, group="probe", exit_on_error=False)
    def probe_loop(self) -> None:
        """Blocking NVML and psutil calls, in a thread; posts one sample a second."""
        from textual.worker import get_current_worker

        me = get_current_worker()
        self.config.host_probe()  # prime psutil's CPU percent
        while not me.is_cancelled:
            if self.replaying:  # the replay shows the recorded samples instead
                time.sleep(0.2)
                continue
            gpus = self.gpu_probe.sample()
            host = self.config.host_probe()
            procs = {side: self.proc_probe.sample(pid) for side, pid in self.config.pids.items()}
            self.post_message(ProbeSampled(gpus, host, procs, self.gpu_probe.error))
            for _ in range(int(self.config.probe_interval * 10)):
                if me.is_cancelled:
                    return
                time.sleep(0.1)

    def on_probe_sampled(self, msg: ProbeSampled) -> None:
        if self.running and self.writer is not None and not self.replaying:
            self.writer.probe(msg.gpus, msg.host)  # the live panel's samples go into the session too
        try:
            self.q(LivePanel).show(msg.gpus, msg.host, msg.procs, self.kv, msg.gpu_note)
        except NoMatches:  # closing
            pass

    async def _poll_kv(self) -> None:
        for side, backend in self.backends.items():
            try:
                if self.pane(side).info is None:
                    continue
            except NoMatches:
                return
            try:
                self.kv[side] = await asyncio.wait_for(backend.kv_usage(), timeout=0.8)
            except Exception:
                self.kv[side] = None



def _build(pane: SidePane) -> str:
    return (pane.info.build if pane.info and pane.info.build else "?")




def launch_note(argv: list[str]) -> str:
    """The speed-up configuration as launched, read from the server's argv (llama.cpp, vLLM, SGLang)."""
    notes = []
    flags = {"--spec-type": "spec", "-md": "draft", "--spec-draft-model": "draft", "--spec-draft-n-max": "n_max",
             "-ctk": "K", "-ctv": "V", "--kv-cache-dtype": "kv", "--speculative-algorithm": "spec",
             "--speculative-config": "spec-config"}
    for i, a in enumerate(argv):
        if a in flags and i + 1 < len(argv):
            v = argv[i + 1]
            notes.append(f"{flags[a]}={v.rsplit('/', 1)[-1] if flags[a] == 'draft' else v}")
        elif a in ("--no-cache-prompt", "--disable-radix-cache", "--no-enable-prefix-caching"):
            notes.append("prefix cache off")
        elif a in ("--cache-prompt", "--enable-prefix-caching"):
            notes.append("prefix cache on")
    return "as launched: " + (" ".join(notes) if notes else "defaults")


def make_app(config: AppConfig) -> SpectuiApp:
    return SpectuiApp(config)


def run_replay(session, speed: str) -> int:
    from spectui.engine.errors import InputError
    from spectui.engine.session import ReplayControl, SessionBackend

    try:
        rate = None if speed == "max" else float(speed.rstrip("x"))
    except ValueError:
        raise InputError(f"--speed must be a number (1, 2, 10, …) or max, not {speed!r}") from None
    if rate is not None and rate <= 0:
        raise InputError("--speed must be positive")
    first = session.prompts[0]
    control = ReplayControl(rate)
    config = AppConfig(session.infos["baseline"].url, session.infos["candidate"].url,
                       params=first.params, order=first.order, prompts=[sp.prompt for sp in session.prompts],
                       backends={s: SessionBackend(s, session, rate, control) for s in SIDES},
                       replay_control=control, autorun_all=True, title=f"spectui replay · {session.path.name}")
    make_app(config).run()
    return 0


def run_tui(args) -> int:
    from spectui.cli import _params

    import signal

    if bool(args.baseline) != bool(args.candidate):
        from spectui.engine.errors import InputError

        raise InputError("give both --baseline URL and --candidate URL, or neither (to pick a profile)")
    pick = not args.baseline
    from spectui.engine.backends import api_key_from
    from spectui.engine.config import load as load_settings

    settings, _ = load_settings()  # autosave = false, auto_notebook = true, notebook = "…" in config.toml
    config = AppConfig(args.baseline or "not started", args.candidate or "not started", prompt_set=args.prompts,
                       params=_params(args), order=args.order, ready_timeout=args.ready_timeout, pick_profile=pick,
                       backend_kind=args.backend, api_key=api_key_from(args.api_key_env),
                       autosave=bool(settings.get("autosave", True)) and not args.no_autosave,
                       auto_notebook=bool(settings.get("auto_notebook", False)),
                       notebook=args.notebook or settings.get("notebook"))
    app = make_app(config)

    def on_term(signum, frame):  # a `kill` of spectui still stops the servers it started
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        app.run()
    finally:
        if getattr(app, "launcher", None) is not None:
            app.launcher.stop_all()
    return 0
