"""Per-screen keys: each sub-screen's footer shows its own keys and the app's few that work there
(F1/? the keys, Ctrl+Q quit), never the main screen's Export, Diff, Triage or Rerun, and its `?` screen lists
the same keys (plus F12's screenshot, hidden from every footer). Replayed real streams, as test_snapshots.py."""

from __future__ import annotations

import pytest

from spectui.tui.app import SpectuiApp
from spectui.tui.screens.keys_screen import KeysScreen
from spectui.tui.widgets.footer import KeysFooter
from tests.pilot import until
from tests.tui.test_snapshots import make, run_and_wait

BACK_KEYS_QUIT = ["app.pop_screen", "show_keys", "quit"]
SCREENS = {  # the key that opens it -> (its class name, the footer's actions in order)
    "ctrl+y": ("TheoryScreen", ["measure", *BACK_KEYS_QUIT]),
    "ctrl+f": ("PrefixScreen", ["run", "slot('save')", "slot('restore')", "slot('erase')", "diff", *BACK_KEYS_QUIT]),
    "alt+s": ("SweepScreen", ["run", "diff", *BACK_KEYS_QUIT]),
    "f2": ("SamplingScreen", ["run", *BACK_KEYS_QUIT]),
    "f3": ("DraftsScreen", BACK_KEYS_QUIT),
    "f4": ("ProveScreen", ["run", *BACK_KEYS_QUIT]),
}


@pytest.mark.parametrize("key", list(SCREENS))
async def test_a_sub_screens_footer_and_keys_screen_show_its_own_keys_only(key):
    name, expected = SCREENS[key]
    app = make()
    async with app.run_test(size=(120, 40)) as pilot:
        await run_and_wait(pilot)  # a result on screen: Export, Diff, Rerun all work on the main screen
        await pilot.press(key)
        await until(pilot, lambda: type(app.screen).__name__ == name, 30, name)
        screen = app.screen
        await until(pilot, lambda: screen.query_one(KeysFooter).query("FooterKey"), 10, "the footer's keys drawn")
        shown = screen.query_one(KeysFooter).shown()
        assert [b.action for b, _ in shown] == expected
        drawn = {k.action for k in screen.query_one(KeysFooter).query("FooterKey")}
        assert drawn >= set(expected) and not drawn & {"keep('export')", "rerun", "triage", "run_all"}, drawn
        await pilot.press("ctrl+e")  # the main screen's export key does nothing here, not even a notice
        await pilot.pause(0.2)
        assert app.screen is screen and not app._notifications, list(app._notifications)
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, KeysScreen), 10, "the keys screen")
        listed = [row[1] for row in app.screen.rows]
        footer_names = [b.description for b, _ in shown]
        shown_anywhere = {b.description for b in SpectuiApp.BINDINGS if b.show}
        hidden = {b.description for b in SpectuiApp.BINDINGS if not b.show} - shown_anywhere  # F12's Screenshot
        assert [n for n in listed if n not in hidden] == footer_names, listed
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, 10, "back on the sub-screen")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.screen_stack[0], 10, "back on the main screen")
        assert "keep('export')" in {b.action for b, _ in app.q(KeysFooter).shown()}  # the main screen's again
