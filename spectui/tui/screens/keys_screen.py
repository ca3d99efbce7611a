"""The `?` screen (F1 anywhere, `?` outside a text box): every key of the screen you are on, with what it
does in one sentence, greyed-out ones with why (k9s's and lazygit's `?`)."""

from __future__ import annotations

from rich.table import Table
from textual.actions import parse
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from spectui.tui.keys import greyed_reason, in_footer_order, sentence


def key_rows(screen: Screen) -> list[tuple[str, str, str, str]]:
    """(key, name, sentence, why greyed: "" where enabled) for each action the screen and the app bind (on a
    sub-screen the app's few that work there: SpectuiApp.BINDINGS), in the footer's order; one row per action (its keys joined), hidden keys included. The text box's
    own editing keys are not listed, and an app key a text box shadows (Enter) is."""
    app = screen.app
    by_action: dict[str, list] = {}
    for node in (screen, app):
        for b in type(node).BINDINGS:
            if not isinstance(b, Binding) or b.system:
                continue
            _, name, params = parse(b.action)
            state = node.check_action(name, params)
            if state is False:  # hidden now (the replay keys outside a replay)
                continue
            keys = [app.get_key_display(Binding(k.strip(), b.action)) for k in b.key.split(",")]
            row = by_action.setdefault(b.action, [[], b.description, "" if state else greyed_reason(node, name)])
            row[0].extend(k for k in keys if k not in row[0])
    actions = in_footer_order(list(by_action), screen is app.screen_stack[0])
    return [
        (" / ".join(by_action[a][0]), by_action[a][1] or a, sentence(a, by_action[a][1]), by_action[a][2])
        for a in actions
    ]


class KeysScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark,f1", "dismiss_keys", "Close", id="keys_close"),
    ]
    DEFAULT_CSS = """
    KeysScreen { align: center middle; }
    KeysScreen > VerticalScroll { width: 90%; max-width: 110; height: 90%; border: round $primary;
                                  background: $surface; padding: 0 1; }
    KeysScreen #keys-table { width: 100%; }
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
