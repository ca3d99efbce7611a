"""The candidate's inline marks can be cycled: all marks (`✗n` written before a rejection),
colours only (the text exactly as the server sent it, so code reads as code) and off; the key is neither
tmux's nor readline's, and is in the footer and on the `?` screen. Side by side, both panes' outputs start
on the same row (the candidate's acceptance, labels and speed-up lines no longer push its text down).
Replayed real llama-server streams, as tests/tui/test_snapshots.py."""

from __future__ import annotations

import pytest

from spectui.tui.screens.keys_screen import KeysScreen
from spectui.tui.widgets.footer import KeysFooter
from tests.pilot import settled, until
from tests.tui.test_snapshots import make, run_and_wait


async def test_the_marks_key_cycles_full_colour_only_and_off():
    app = make()
    async with app.run_test(size=(160, 48)) as pilot:
        await run_and_wait(pilot)
        view = app.pane("candidate").view
        sent = app.runs.recorders["candidate"].output().decode()
        assert "✗" in view.plain() and view.plain() != sent  # full marks: the rejections written in the text
        legend = str(app.q("#legend").render())
        assert "alt+k: colour only" in legend
        await pilot.press("alt+k")
        await settled(pilot)
        assert view.mark_mode == "colour"
        assert view.plain() == sent  # the text as sent: no glyph in it
        assert set(view._styles) - {None}, "the labels keep their colours"
        assert "✗n" not in str(app.q("#legend").render())
        await pilot.press("alt+k")
        await settled(pilot)
        assert view.mark_mode == "off" and view.plain() == sent
        assert view._styles == [None]  # no mark at all
        assert "marks off" in str(app.q("#legend").render())
        await pilot.press("alt+k")
        await settled(pilot)
        assert view.mark_mode == "full" and "✗" in view.plain()


async def test_the_marks_key_is_in_the_footer_and_on_the_keys_screen():
    app = make()
    async with app.run_test(size=(200, 40)) as pilot:
        await run_and_wait(pilot)
        shown = {b.action: b.key for b, _ in app.q(KeysFooter).shown()}
        assert shown.get("switch('marks')") == "alt+k"
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, KeysScreen), 10, "the keys screen")
        names = {r[1]: r for r in app.screen.rows}
        assert names["Marks"][0] == "alt+k" and "colours only" in names["Marks"][2]


@pytest.mark.parametrize("size", [(160, 48), (120, 40)])
async def test_side_by_side_both_outputs_start_on_the_same_row(size):
    app = make()
    async with app.run_test(size=size) as pilot:
        await run_and_wait(pilot)
        b, c = app.pane("baseline"), app.pane("candidate")
        assert c.figures_text().count("\n") > b.figures_text().count("\n")  # the candidate has more figure lines
        assert b.view.region.y == c.view.region.y
        assert b.view.region.height == c.view.region.height


async def test_the_drafts_guesses_with_the_marks_off_say_which_key_shows_them():
    from spectui.core.findings import ProbeResult

    app = make()
    said: list[str] = []
    async with app.run_test(size=(160, 48)) as pilot:
        await run_and_wait(pilot)
        real = app.notify
        app.notify = lambda message, *a, **kw: (said.append(str(message)), real(message, *a, **kw))[1]
        app.compare.show_drafts(ProbeResult("draft model test"))
        assert not said  # all marks: the guesses are drawn, nothing to say
        await pilot.press("alt+k")
        app.compare.show_drafts(ProbeResult("draft model test"))
        assert any("alt+k" in s for s in said), said


async def test_colour_only_marks_each_rejection_on_a_character_without_writing_into_the_text():
    """Colour only kept the text as sent but showed no rejection at all: now the first character of the
    target's token after a rejection (past its newlines) is reversed in the rejected colour, one cell per
    rejection, and the legend shows the same mark."""
    from bisect import bisect_right

    app = make()
    async with app.run_test(size=(160, 48)) as pilot:
        await run_and_wait(pilot)
        view = app.pane("candidate").view
        sent = app.runs.recorders["candidate"].output().decode()
        await pilot.press("alt+k")
        await settled(pilot)
        assert view.mark_mode == "colour" and view.plain() == sent
        mark = f"reverse {view.marks['rejected']}"
        text, at, expected = view.plain(), 0, []
        for token in view.tokens:
            piece = token.data.decode("utf-8", errors="replace")
            lead = len(piece) - len(piece.lstrip("\n"))
            if token.rejected and lead < len(piece):
                expected.append(at + lead)
            at += len(piece)
        assert expected, "the replayed candidate had rejections"

        def style_at(offset: int) -> str | None:
            return view._styles[view._mark_style[bisect_right(view._mark_at, offset) - 1]]

        marked = [i for i in range(len(text)) if style_at(i) == mark]
        assert marked == expected
        assert f"[reverse {view.marks['rejected']}]d[/reverse {view.marks['rejected']}]rafts rejected" in str(
            app.q("#legend").render().markup
        )


async def test_on_a_short_terminal_the_marks_key_says_the_mode_it_chose():
    """At 80x24 the legend is folded away, so alt+k changed the marks without a word: a notice says the mode."""
    app = make()
    said: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        await run_and_wait(pilot)
        assert not app.q("#legend").display
        real = app.notify
        app.notify = lambda message, *a, **kw: (said.append(str(message)), real(message, *a, **kw))[1]
        await pilot.press("alt+k")
        await settled(pilot)
        assert len(said) == 1 and "rafts rejected" in said[0] and "alt+k: off" in said[0]
        await pilot.press("alt+k")
        await settled(pilot)
        assert len(said) == 2 and "marks off" in said[1]
