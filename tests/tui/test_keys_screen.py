"""Keys a newcomer can find: F1 lists the current screen's keys with a sentence each, the footer starts with
Run, Prove, Sampling, Theory, no default key is tmux's prefix or a readline edit of the prompt, and a greyed
key says why. Replayed real streams, as tests/tui/test_snapshots.py."""

from __future__ import annotations

from spectui.tui.app import SpectuiApp
from spectui.tui.keys import FOOTER_FIRST
from spectui.tui.screens.keys_screen import KeysScreen
from spectui.tui.widgets.footer import KeysFooter
from tests.pilot import settled, until
from tests.tui.test_snapshots import make, run_and_wait, steady


def test_no_default_key_is_tmux_prefix_or_a_readline_edit_of_the_prompt():
    keys = {k.strip() for b in SpectuiApp.BINDINGS for k in b.key.split(",")}
    assert not keys & {"ctrl+b", "ctrl+w", "ctrl+u", "ctrl+k"}, keys


async def test_f1_lists_the_main_screens_keys_with_a_sentence_each_run_first():
    app = make()
    async with app.run_test(size=(120, 40)) as pilot:
        await run_and_wait(pilot)
        footer = app.q(KeysFooter)
        assert [b.action for b, _ in footer.shown()[:4]] == list(FOOTER_FIRST[:4])  # Enter/Run shown, first
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, KeysScreen), 10, "the keys screen")
        rows = app.screen.rows
        assert rows[0][:2] == ("⏎", "Run") and "compare their bytes" in rows[0][2]
        names = {r[1]: r for r in rows}
        assert names["Drafts"][0] == "alt+d" and names["Logs"][0] == "alt+l" and names["Live"][0] == "alt+m"
        assert all(r[2] for r in rows)  # a sentence for every key
        assert "Move cursor left" not in names  # the text box's own editing keys are not the screen's
        assert "identical" in names["Triage"][3]  # greyed, with why: the outputs on screen are identical
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, KeysScreen), 10, "the keys screen to close")


async def test_a_greyed_key_says_why_in_a_notice():
    app = make()
    said: list[str] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await steady(pilot)
        real = app.notify
        app.notify = lambda message, *a, **kw: (said.append(str(message)), real(message, *a, **kw))[1]
        await pilot.press("ctrl+x")  # triage, greyed before any run
        await settled(pilot)
        assert any("run a prompt first" in s for s in said), said
