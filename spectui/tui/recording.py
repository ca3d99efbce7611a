"""What the TUI keeps: the session it records, the notebook, exported reports, and replay of saved sessions."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from spectui.core.errors import describe, redact_credentials, register_url
from spectui.core.report import json_report, markdown_report
from spectui.core.runner import SIDES
from spectui.store.locations import atomic_write
from spectui.store.replay import ReplayControl, SessionBackend
from spectui.store.session import autosave_path, default_session_dir, load_session
from spectui.store.session_writer import SessionWriter
from spectui.tui.messages import ProbeSampled

if TYPE_CHECKING:
    from spectui.backends.base import Backend
    from spectui.core.runner import PromptResult
    from spectui.core.types import GenerationParams, Prompt, ServerInfo
    from spectui.tui.config import AppConfig
    from spectui.tui.widgets.panes import SidePane


class RunsOnScreen(Protocol):
    """What the keeper reads of the runs on screen (tui.controller.RunController provides it)."""

    running: bool
    results: list[PromptResult]
    records: list[int]
    last_prompt: Prompt | None

    def start(self, prompts: list[Prompt]) -> None: ...

    def infos(self) -> dict[str, ServerInfo]: ...


class KeeperHost(Protocol):
    """What the session keeper needs of the app (SpectuiApp provides it): its typed door."""

    config: AppConfig
    backends: dict[str, Backend]
    runs: RunsOnScreen
    replay_control: Any
    params: GenerationParams
    order: str
    prompt_list: list[Prompt]
    sub_title: str

    @property
    def workers(self) -> Any: ...

    @property
    def replaying(self) -> bool: ...

    def pane(self, side: str) -> SidePane: ...

    def notify(self, message: str, *, severity: Any = "information", timeout: float | None = None) -> None: ...

    def refresh_bindings(self) -> None: ...

    def post_message(self, message: Any) -> bool: ...

    def call_later(self, callback: Any, *args: Any, **kwargs: Any) -> Any: ...

    def save_screenshot(self, *args: Any, **kwargs: Any) -> str: ...

    def export_screenshot(self, *args: Any, **kwargs: Any) -> str: ...


class SessionKeeper:
    def __init__(self, app: KeeperHost) -> None:
        self.app = app
        self.writer: SessionWriter | None = None

    def session_dir(self) -> Path:
        d = self.app.config.session_dir
        return Path(str(d)) if d else default_session_dir()

    def writer_for_run(self) -> SessionWriter | None:
        """The writer every run records into (autosaved unless turned off); None while replaying."""
        app = self.app
        if self.writer is None and not app.replaying:
            path = self.session_dir() / autosave_path().name if app.config.autosave else None
            try:
                self.writer = SessionWriter(path)
            except Exception as exc:  # a read-only data dir must not stop a run
                app.notify(f"autosave off: {describe(exc)}", severity="warning")
                self.writer = SessionWriter(None)
        return None if app.replaying else self.writer

    def record_probe(self, gpus, host) -> None:
        if self.app.runs.running and self.writer is not None and not self.app.replaying:
            self.writer.probe(gpus, host)  # the live panel's samples go into the session too

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

    # -- keys -----------------------------------------------------------------------------------------
    def save(self) -> None:
        app = self.app
        if self.writer is None or not app.runs.results:
            app.notify("nothing to save yet: run a prompt first", severity="warning")
            return
        if self.writer.path is not None:
            app.notify(f"session saved (autosave) to {self.writer.path}")
            return
        dest = self.writer.save_as(self.session_dir() / autosave_path().name)
        app.notify(f"session saved to {dest}")

    def append_notebook(self, results) -> None:
        from spectui.store import notebook  # lazy: tomli_w and the notebook only when saving

        app = self.app
        if not results:
            return
        path = notebook.notebook_path(app.config.notebook)
        try:
            where, warning = notebook.append(
                path, [notebook.measurement(r, app.runs.infos(), app.config.profile) for r in results]
            )
        except Exception as exc:
            app.notify(f"notebook not written: {describe(exc)}", severity="error")
            return
        if warning:
            app.notify(warning, severity="warning", timeout=12)
        else:
            app.notify(f"appended {len(results)} measurement(s) to {where}")

    def export(self) -> None:
        app = self.app
        stem = self.writer.path.stem if self.writer and self.writer.path else autosave_path().stem
        folder = self.session_dir()
        md, js = folder / f"{stem}.md", folder / f"{stem}.json"
        source = str(self.writer.path) if self.writer and self.writer.path else None
        atomic_write(md, markdown_report(app.runs.infos(), app.runs.results, app.params, app.order, source))
        atomic_write(
            js, json.dumps(json_report(app.runs.infos(), app.runs.results, app.params, app.order), indent=2) + "\n"
        )
        app.notify(f"report written: {md} and {js.name}")

    def screenshot(self) -> None:
        app = self.app
        for url in (app.config.baseline_url, app.config.candidate_url):
            register_url(url)  # whatever drew a URL, its user:password does not reach the image
        path = self.session_dir() / f"screenshot-{dt.datetime.now():%Y%m%d-%H%M%S-%f}.svg"
        try:
            atomic_write(path, redact_credentials(app.export_screenshot()))
        except OSError as exc:
            app.notify(f"screenshot not saved: {describe(exc)}", severity="error")
            return
        app.notify(f"screenshot saved to {path}")

    # -- replay -------------------------------------------------------------------------------------
    def open_session(self, path) -> None:
        """Replay a saved session in this app: same panes, another event source."""
        app = self.app
        try:
            session = load_session(path)
        except Exception as exc:
            app.notify(describe(exc), severity="error")
            return
        for w in session.warnings:
            app.notify(w, severity="warning", timeout=10)
        if not session.prompts:
            app.notify(f"{path} holds no prompts", severity="error")
            return
        app.workers.cancel_group(app, "run")
        app.replay_control = ReplayControl(1.0)
        app.backends = {s: SessionBackend(s, session, 1.0, app.replay_control) for s in SIDES}
        app.prompt_list = [sp.prompt for sp in session.prompts]
        for s in SIDES:
            app.pane(s).set_info(session.infos[s])
            app.pane(s).set_state("ready")
        app.sub_title = f"replay · {session.path.name}"
        app.runs.results.clear()  # the figures over runs and prompts are this session's alone
        app.runs.records.clear()
        app.refresh_bindings()
        app.runs.start(list(app.prompt_list))

    async def replay_probes(self) -> None:
        """A replay draws the live panel from the samples recorded with the session."""
        app = self.app
        await asyncio.sleep(0.05)  # the first side's stream has started the replay clock
        backend = app.backends["baseline"]
        if not isinstance(backend, SessionBackend):
            return

        def show(gpus, host):
            app.post_message(ProbeSampled(gpus, host, {}, "recorded with the session" if not gpus else None))

        await backend.play_probes(show)

    def note(self) -> None:
        c = self.app.replay_control
        speed = "max" if c.speed is None else f"×{c.speed:g}"
        state = "paused" if c.paused else "playing"
        self.app.sub_title = f"replay {state} {speed} at {c.position_ns / 1e9:.2f} s"

    def control(self, what: str) -> None:
        """F5–F10: pause, one token, slower, faster, seek ±2 s."""
        app = self.app
        c = app.replay_control
        if c is None:
            return
        if what == "pause":
            c.toggle_pause()
        elif what == "step":
            c.step()
        elif what == "slower":
            c.set_speed(max(0.25, (c.speed or 16) / 2))
        elif what == "faster":
            c.set_speed(None if (c.speed or 0) >= 16 else (c.speed or 1) * 2)
        elif what == "forward":
            c.seek(2_000_000_000)
        elif what == "back":
            self._seek_back()
            return
        self.note()

    def _seek_back(self) -> None:
        """Seeking back replays the prompt from its start, as fast as possible, to the new position."""
        app = self.app
        c = app.replay_control
        target = max(0, c.position_ns - 2_000_000_000)
        prompt = app.runs.last_prompt
        played = app.backends.get("baseline")
        records = [sp.prompt for sp in played.session.prompts] if isinstance(played, SessionBackend) else []
        index = next((i for i, p in enumerate(records) if p is prompt), None)
        for b in app.backends.values():
            if not isinstance(b, SessionBackend):
                continue
            b.rewind()
            # back to the prompt on screen, not before it: a side that had not begun it (the second side of a
            # sequential prompt) was one record behind the other (SessionBackend has no public seek)
            while index is not None and b._cursor < index:
                b._cursor += 1
        app.workers.cancel_group(app, "run")
        c.restart(target)
        c.prompt = -2  # keep the clock at the target when the prompt restarts
        if prompt is not None:  # that prompt again, then the ones after it: the replay goes on to its end
            at = next((i for i, p in enumerate(app.prompt_list) if p is prompt), None)
            rest = [prompt] if at is None else app.prompt_list[at:]
            app.call_later(lambda: app.runs.start(rest))
        self.note()
