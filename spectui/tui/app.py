"""The Textual app: the themes, the keys that work on every screen, and the comparison screen it opens on
(tui.screens.compare, which owns the run). Everything from outside comes in one frozen AppConfig."""

from __future__ import annotations

from textual.actions import parse
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches

from spectui.store.config import load as load_settings
from spectui.store.config import remember
from spectui.tui.config import AppConfig
from spectui.tui.keys import greyed_reason, sentence
from spectui.tui.screens.compare import CompareScreen
from spectui.tui.screens.keys_screen import KeysScreen
from spectui.tui.themes import user_themes


class SpectuiApp(App):
    TITLE = "spectui"
    SUB_TITLE = "is the candidate faster, and are the bytes the same?"
    # the app opens on the comparison screen, installed under this name: mounted before the app is ready
    MODES = {"compare": "compare"}
    DEFAULT_MODE = "compare"

    BINDINGS = [  # the keys of every screen; the comparison's own are CompareScreen.BINDINGS
        Binding("f12", "keep('screenshot')", "Screenshot", id="screenshot", show=False),
        Binding("f1", "show_keys", "Keys", id="show_keys", priority=True),
        Binding("question_mark", "show_keys", "Keys", id="show_keys_plain", show=False),
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
    ]

    def __init__(self, config: AppConfig) -> None:
        super().__init__()
        self.config = config
        if config.title:
            self.title = config.title
        # the theme is chosen before the first compose: set after mount, it re-parses and re-applies the
        # whole stylesheet (0.49 s of a 2.0 s first frame, profiled)
        themes, theme_marks, self._theme_notes = user_themes()
        self.compare = CompareScreen(config, theme_marks)
        self.install_screen(self.compare, "compare")
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

    def on_mount(self) -> None:
        for note in self._theme_notes:
            self.notify(note, severity="warning", timeout=8)

    def watch_theme(self, theme: str) -> None:
        if self._theme_ready:
            try:
                remember(theme=theme)  # switched from the command palette: remembered for next time
            except OSError:
                pass
        if self.compare.is_attached:
            try:
                self.compare.redraw_marks()
            except NoMatches:  # closing
                pass

    async def on_unmount(self) -> None:
        self.compare.recording.close()
        await self.compare.servers.close()

    # -- the keys of every screen ---------------------------------------------------------------------
    async def run_action(self, action, default_namespace=None, namespaces=None) -> bool:
        """Textual's, and where the action is greyed out (check_action None) a notice saying why."""
        done: bool = await super().run_action(action, default_namespace, namespaces)
        if not done and isinstance(action, str):
            _, name, params = parse(action)
            target = default_namespace if default_namespace is not None else self
            if target.check_action(name, params) is None:
                self.notify(greyed_reason(target, name), severity="warning", timeout=6)
        return done

    def action_show_keys(self) -> None:
        if isinstance(self.screen, KeysScreen):
            self.screen.dismiss()
            return
        self.push_screen(KeysScreen.of(self.screen))

    def action_keep(self, what: str) -> None:
        """F12 on any screen: its picture, kept where the comparison keeps its sessions."""
        if what == "screenshot":
            self.compare.action_keep(what)

    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        nodes = [(screen, type(screen).BINDINGS), (self, self.BINDINGS)]
        for node, bindings in nodes:
            for b in bindings:
                if not isinstance(b, Binding) or b.action in ("quit",):
                    continue
                if node.check_action(*parse(b.action)[1:]) is False:  # hidden now (replay keys outside a replay)
                    continue
                # the palette's help line is the action's one sentence (tui.keys.SENTENCES), as on the `?` screen
                yield SystemCommand(
                    f"{b.description} ({b.key})",
                    sentence(b.action, b.description),
                    lambda a=b.action, n=node: self.run_action(a, n),
                )

    # -- what the tests and the benchmarks read: the comparison screen's state ----------------------------
    @property
    def runs(self):
        return self.compare.runs

    @property
    def servers(self):
        return self.compare.servers

    @property
    def recording(self):
        return self.compare.recording

    @property
    def results(self):
        return self.compare.runs.results

    @property
    def recorders(self):
        return self.compare.runs.recorders

    @property
    def run_done(self):
        return self.compare.runs.run_done

    @property
    def running(self) -> bool:
        return self.compare.runs.running

    @property
    def launcher(self):
        return self.compare.servers.launcher

    @property
    def backends(self):
        return self.compare.servers.backends

    @property
    def client(self):
        return self.compare.servers.client

    @property
    def prompt_list(self):
        return self.compare.prompt_list

    @property
    def order(self) -> str:
        return self.compare.order

    @property
    def params(self):
        return self.compare.params

    def pane(self, side: str):
        return self.compare.pane(side)

    def q(self, selector, kind=None):
        return self.compare.query_one(selector, kind) if kind else self.compare.query_one(selector)

    def action_run(self) -> None:
        self.compare.action_run()


def make_app(config: AppConfig) -> SpectuiApp:
    return SpectuiApp(config)
