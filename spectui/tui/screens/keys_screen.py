"""The `?` screen (F1 anywhere, `?` outside a text box): every key of the screen you are on, with what it
does in one sentence, greyed-out ones with why (k9s's and lazygit's `?`)."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from spectui.tui.keys import FOOTER_FIRST, greyed_reason, sentence


def key_rows(screen: Screen) -> list[tuple[str, str, str, str]]:
    """(key, name, sentence, why greyed: "" where enabled) for each action bound on `screen` now, the footer's first ones first;
    one row per action (its keys joined), hidden keys included."""
    app = screen.app
    by_action: dict[str, list] = {}
    for active in screen.active_bindings.values():
        b = active.binding
        if b.system or (b.action == "command_palette" and not app.ENABLE_COMMAND_PALETTE):
            continue
        row = by_action.setdefault(b.action, [[], b.description, active.enabled])
        row[0].append(app.get_key_display(b))
    order = {a: i for i, a in enumerate(FOOTER_FIRST)}
    rows = [
        (" / ".join(keys), desc or action, sentence(action, desc), "" if enabled else greyed_reason(app, action))
        for action, (keys, desc, enabled) in by_action.items()
    ]
    actions = list(by_action)
    return [r for _, r in sorted(zip(actions, rows), key=lambda ar: order.get(ar[0], len(order)))]


class KeysScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark,f1", "dismiss_keys", "Close", id="keys_close"),
    ]
    DEFAULT_CSS = """
    KeysScreen { align: center middle; }
    KeysScreen > VerticalScroll { width: 90%; max-width: 110; height: 90%; border: round $primary;
                                  background: $surface; padding: 0 1; }
    """

    def __init__(self, rows: list[tuple[str, str, str, str]], title: str) -> None:
        super().__init__()
        self.rows, self.title_text = rows, title

    @classmethod
    def of(cls, screen: Screen) -> KeysScreen:
        title = "the main screen" if screen is screen.app.screen_stack[0] else type(screen).__name__
        return cls(key_rows(screen), title)

    def compose(self) -> ComposeResult:
        table = Table(box=None, expand=True, show_header=True, header_style="bold")
        table.add_column("key", no_wrap=True, style="bold")
        table.add_column("action", no_wrap=True)
        table.add_column("what it does", ratio=1)
        for key, name, text, greyed in self.rows:
            why = f"  (greyed now: {greyed})" if greyed else ""
            table.add_row(key, name, text + why, style="dim" if greyed else "")
        with VerticalScroll() as box:
            box.border_title = f"keys of {self.title_text} · Esc closes"
            yield Static(table, id="keys-table")

    def action_dismiss_keys(self) -> None:
        self.dismiss(None)
