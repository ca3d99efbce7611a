"""What the comparison screen keeps: the session it records, the notebook, exported reports, screenshots, and
the replay of a saved session (its clock and the recorded probe samples).

The keeper holds the session writer and the replay's control; each of its keys gets the data it writes and
answers with what the user is told (`Said`: a line and its severity), which the screen shows. It touches no
widget and no attribute of the app.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.notifications import SeverityLevel

from spectui.core.errors import describe, redact_credentials, register_url
from spectui.core.report import json_report, markdown_report
from spectui.store.locations import atomic_write
from spectui.store.replay import ReplayControl, SessionBackend
from spectui.store.session import Session, autosave_path, default_session_dir, load_session
from spectui.store.session_writer import SessionWriter
from spectui.tui.config import AppConfig

if TYPE_CHECKING:
    from spectui.core.runner import PromptResult
    from spectui.core.types import GenerationParams, ServerInfo

Said = tuple[str, SeverityLevel]  # (the line the user is told, its severity: information | warning | error)


class SessionKeeper:
    def __init__(self, config: AppConfig) -> None:
        self.config = config
        self.folder: Path | None = Path(str(config.session_dir)) if config.session_dir else None
        self.writer: SessionWriter | None = None
        self.replay: ReplayControl | None = config.replay_control

    @property
    def replaying(self) -> bool:
        return self.replay is not None

    def session_dir(self) -> Path:
        return self.folder or default_session_dir()

    def writer_for_run(self) -> tuple[SessionWriter | None, Said | None]:
        """The writer every run records into (autosaved unless turned off; None while replaying)."""
        said: Said | None = None
        if self.writer is None and not self.replaying:
            path = self.session_dir() / autosave_path().name if self.config.autosave else None
            try:
                self.writer = SessionWriter(path)
            except Exception as exc:  # a read-only data dir must not stop a run
                said = (f"autosave off: {describe(exc)}", "warning")
                self.writer = SessionWriter(None)
        return (None if self.replaying else self.writer), said

    def record_probe(self, gpus, host) -> None:
        if self.writer is not None and not self.replaying:
            self.writer.probe(gpus, host)  # the live panel's samples go into the session too

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

    # -- keys -----------------------------------------------------------------------------------------
    def save(self, results: list[PromptResult]) -> Said:
        if self.writer is None or not results:
            return "nothing to save yet: run a prompt first", "warning"
        if self.writer.path is not None:
            return f"session saved (autosave) to {self.writer.path}", "information"
        dest = self.writer.save_as(self.session_dir() / autosave_path().name)
        return f"session saved to {dest}", "information"

    def append_notebook(
        self, results: list[PromptResult], infos: dict[str, ServerInfo], profile: str | None
    ) -> Said | None:
        from spectui.store import notebook  # lazy: ~10 ms before the first frame, only when one is written

        if not results:
            return None
        path = notebook.notebook_path(self.config.notebook)
        try:
            where, warning = notebook.append(path, [notebook.measurement(r, infos, profile) for r in results])
        except Exception as exc:
            return f"notebook not written: {describe(exc)}", "error"
        if warning:
            return warning, "warning"
        return f"appended {len(results)} measurement(s) to {where}", "information"

    def export(
        self, infos: dict[str, ServerInfo], results: list[PromptResult], params: GenerationParams, order: str
    ) -> Said:
        stem = self.writer.path.stem if self.writer and self.writer.path else autosave_path().stem
        folder = self.session_dir()
        md, js = folder / f"{stem}.md", folder / f"{stem}.json"
        source = str(self.writer.path) if self.writer and self.writer.path else None
        atomic_write(md, markdown_report(infos, results, params, order, source))
        atomic_write(js, json.dumps(json_report(infos, results, params, order), indent=2) + "\n")
        return f"report written: {md} and {js.name}", "information"

    def screenshot(self, svg: str) -> Said:
        for url in (self.config.baseline_url, self.config.candidate_url):
            register_url(url)  # whatever drew a URL, its user:password does not reach the image
        path = self.session_dir() / f"screenshot-{dt.datetime.now():%Y%m%d-%H%M%S-%f}.svg"
        try:
            atomic_write(path, redact_credentials(svg))
        except OSError as exc:
            return f"screenshot not saved: {describe(exc)}", "error"
        return f"screenshot saved to {path}", "information"

    # -- replay -------------------------------------------------------------------------------------
    def open_session(self, path) -> tuple[Session | None, list[Said]]:
        """A saved session to replay on this screen (same panes, another event source), with what to say."""
        try:
            session = load_session(path)
        except Exception as exc:
            return None, [(describe(exc), "error")]
        said: list[Said] = [(w, "warning") for w in session.warnings]
        if not session.prompts:
            return None, [*said, (f"{path} holds no prompts", "error")]
        self.replay = ReplayControl(1.0)
        return session, said

    def backends_for(self, session: Session) -> dict[str, Any]:
        assert self.replay is not None
        return {s: SessionBackend(s, session, 1.0, self.replay) for s in ("baseline", "candidate")}

    @staticmethod
    async def replay_probes(backend: Any, show: Callable[[Any, Any], None]) -> None:
        """A replay draws the live panel from the samples recorded with the session."""
        await asyncio.sleep(0.05)  # the first side's stream has started the replay clock
        if isinstance(backend, SessionBackend):
            await backend.play_probes(show)

    def note(self) -> str:
        c = self.replay
        assert c is not None
        speed = "max" if c.speed is None else f"×{c.speed:g}"
        state = "paused" if c.paused else "playing"
        return f"replay {state} {speed} at {c.position_ns / 1e9:.2f} s"

    def control(self, what: str) -> None:
        """F5–F8, F10: pause, one token, slower, faster, seek +2 s (F9's seek back is the screen's: it reruns)."""
        c = self.replay
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

    def rewind_to(self, backends: dict[str, Any], index: int | None) -> None:
        """Seeking back: each played side rewound to the record on screen, the clock 2 s back."""
        c = self.replay
        assert c is not None
        target = max(0, c.position_ns - 2_000_000_000)
        for b in backends.values():
            if not isinstance(b, SessionBackend):
                continue
            b.rewind()
            # back to the prompt on screen, not before it: a side that had not begun it (the second side of a
            # sequential prompt) was one record behind the other (SessionBackend has no public seek)
            while index is not None and b._cursor < index:
                b._cursor += 1
        c.restart(target)
        c.steps = 0  # a step pressed before the seek (one nothing was waiting for) does not carry past it
        c.prompt = -2  # keep the clock at the target when the prompt restarts
