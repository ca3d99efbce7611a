"""The session browser: saved sessions with date, servers, prompt, verdict and speed-up (with acceptance)."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Input, Label

from spectui.store.session_list import list_sessions
from spectui.tui.widgets.fit_table import FitTable
from spectui.tui.widgets.footer import KeysFooter


class RenameScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "dismiss_none", "Cancel", id="rename_cancel")]
    DEFAULT_CSS = "RenameScreen { align: center middle; } RenameScreen > Vertical { width: 60; height: 5; border: round $primary; }"

    def __init__(self, name: str) -> None:
        super().__init__()
        self.old = name

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"rename {self.old} to:")
            yield Input(self.old, id="new-name")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class SessionBrowser(Screen):
    BINDINGS = [
        Binding("enter", "open", "Replay", id="browser_open"),
        Binding("r", "rename", "Rename", id="browser_rename"),
        Binding("delete,x", "delete", "Delete", id="browser_delete"),
        Binding("escape", "app.pop_screen", "Back", id="browser_back"),
    ]
    DEFAULT_CSS = (
        "SessionBrowser DataTable { height: 1fr; } SessionBrowser #where { padding: 0 1; color: $text-muted; }"
    )

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder
        self.rows: list = []

    def compose(self) -> ComposeResult:
        yield Label(f"sessions in {self.folder}", id="where")
        yield FitTable(cursor_type="row", id="sessions")
        yield KeysFooter()  # its own keys and the app's few that work here (SpectuiApp.BINDINGS)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("date", "file", "prompt", "prompts", "output", "speed-up (acceptance)", "candidate")
        self.reload()

    def reload(self) -> None:
        # read in a thread: a slow disk or an odd file in the folder never freezes the app
        self.run_worker(self._list, thread=True, exclusive=True, group="session-list", exit_on_error=False)

    def _list(self) -> None:
        rows = list_sessions(self.folder)
        self.app.call_from_thread(self._show, rows)

    def _show(self, rows: list) -> None:
        table = self.query_one(DataTable)
        table.clear()
        self.rows = rows
        for r in self.rows:
            if r.problem:
                table.add_row("", r.path.name, r.problem, "", "", "", "")
                continue
            # the listing's own words (store.session_list), as `spectui sessions` prints them
            table.add_row(
                r.created[:19],
                r.path.name,
                r.prompt,
                r.count_text(),
                r.verdict_text(),
                r.speedup_text(),
                f"{r.candidate}, build {r.build}",
            )

    def _current(self):
        table = self.query_one(DataTable)
        if not self.rows or table.cursor_row is None or table.cursor_row >= len(self.rows):
            return None
        return self.rows[table.cursor_row]

    def on_data_table_row_selected(self, event) -> None:
        self.action_open()

    def action_open(self) -> None:
        row = self._current()
        if row is None or row.problem:
            self.notify("nothing to replay here", severity="warning")
            return
        self.dismiss(row.path)  # the app replays it (the callback it pushed this screen with)

    def action_rename(self) -> None:
        row = self._current()
        if row is None:
            return

        def done(new: str | None) -> None:
            if not new:
                return
            if not new.endswith(".jsonl"):
                new += ".jsonl"
            dest = row.path.with_name(Path(new).name)
            if dest.exists():
                self.notify(f"{dest.name} already exists", severity="error")
                return
            row.path.rename(dest)
            self.reload()

        self.app.push_screen(RenameScreen(row.path.name), done)

    def action_delete(self) -> None:
        row = self._current()
        if row is None:
            return
        row.path.unlink(missing_ok=True)
        self.notify(f"deleted {row.path.name}")
        self.reload()
