"""The app's side of the keys (tui.keys holds their sentences and reasons): a notice for a greyed key, the
`?` screen, the live panel's fold, the marks' cycle."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.actions import parse
from textual.widgets import Label

from spectui.tui.keys import greyed_reason
from spectui.tui.screens.keys_screen import KeysScreen
from spectui.tui.themes import legend_text
from spectui.tui.widgets.fit import fit_main_screen
from spectui.tui.widgets.panes import LivePanel
from spectui.tui.widgets.token_view import MARK_MODES

if TYPE_CHECKING:
    from textual.app import App


class KeysMixin:
    """The app's side of the keys: a notice for a greyed key, the `?` screen, the live panel's fold."""

    async def run_action(self, action, default_namespace=None, namespaces=None) -> bool:
        """Textual's, and where the action is greyed out (check_action None) a notice saying why."""
        done: bool = await super().run_action(action, default_namespace, namespaces)  # type: ignore[misc]
        if not done and isinstance(action, str):
            app: App = self  # type: ignore[assignment]
            _, name, params = parse(action)
            target = default_namespace if default_namespace is not None else app
            if target.check_action(name, params) is None:
                app.notify(greyed_reason(app, name), severity="warning", timeout=6)
        return done

    def action_show_keys(self) -> None:
        app: App = self  # type: ignore[assignment]
        if isinstance(app.screen, KeysScreen):
            app.screen.dismiss()
            return
        app.push_screen(KeysScreen.of(app.screen))

    def action_toggle_live(self) -> None:
        app: App = self  # type: ignore[assignment]
        screen = app.screen_stack[0]
        screen.query_one(LivePanel).toggle()
        fit_main_screen(screen, app.size.width, app.size.height)

    def cycle_marks(self) -> None:
        """alt+k: the candidate's inline marks, all of them, their colours only (the text as sent), or none."""
        app: App = self  # type: ignore[assignment]
        view = app.pane("candidate").view  # type: ignore[attr-defined]
        mode = MARK_MODES[(MARK_MODES.index(view.mark_mode) + 1) % len(MARK_MODES)]
        for side in ("baseline", "candidate"):
            v = app.pane(side).view  # type: ignore[attr-defined]
            v.mark_mode = mode
            v.rebuild()
        legend = app.query_one("#legend", Label)
        legend.update(legend_text(app.marks, mode))  # type: ignore[attr-defined]
        if not legend.display:  # a short terminal hides the legend: the switch is said, not silent
            app.notify(legend_text(app.marks, mode), title="marks", markup=True)  # type: ignore[attr-defined]
