"""The main screen on small terminals: each output keeps 6 text rows (also after a divergence), the live
panel folds to one line below 30 rows (a key folds it at any size), and the headline answers both halves.
Replayed real streams, as tests/tui/test_snapshots.py."""

from __future__ import annotations

import pytest

from spectui.tui.widgets.panes import Banner, LivePanel, SidePane, TokenView
from tests.pilot import settled
from tests.tui.test_snapshots import make, run_and_wait


def text_rows(app) -> dict[str, int]:
    return {s: app.pane(s).query_one(TokenView).size.height for s in ("baseline", "candidate")}


@pytest.mark.parametrize("kind", ["draft", "diverge"])
@pytest.mark.parametrize("size", [(80, 24), (120, 40), (80, 40), (90, 60)])
async def test_each_output_keeps_six_rows_and_the_headline_shows(size, kind):
    app = make(kind)
    async with app.run_test(size=size) as pilot:
        await run_and_wait(pilot)
        rows = text_rows(app)
        assert min(rows.values()) >= SidePane.MIN_TEXT_ROWS, rows
        head = app.q(Banner).headline_text()
        assert head.startswith("same bytes: yes" if kind == "draft" else "same bytes: no, they part at byte")
        assert " · faster: not judged — " in head and "accepted (1 run)" in head
        banner = app.q(Banner)
        assert banner.region.bottom <= app.q(LivePanel).region.y  # nothing drawn over the verdict
        live = app.q(LivePanel)
        assert live.folded is (size[1] < LivePanel.FOLD_BELOW_ROWS)
        if live.folded:
            assert live.size.height == 1


async def test_the_live_panel_folds_and_unfolds_with_its_key_at_any_size():
    app = make()
    async with app.run_test(size=(120, 40)) as pilot:
        await run_and_wait(pilot)
        live = app.q(LivePanel)
        assert not live.folded
        before = text_rows(app)["candidate"]
        await pilot.press(live.toggle_key)
        await settled(pilot)
        assert live.folded and live.size.height == 1
        assert text_rows(app)["candidate"] > before  # the rows went to the outputs
        await pilot.press(live.toggle_key)
        await settled(pilot)
        assert not live.folded


async def test_a_folded_pane_shows_its_figures_on_one_line_and_keeps_them_whole():
    app = make()
    async with app.run_test(size=(80, 24)) as pilot:
        await run_and_wait(pilot)
        pane = app.pane("candidate")
        assert pane.compact
        figures = pane.query_one(".figures")
        assert figures.size.height == 1
        assert "acc " in str(figures.render())
        assert "speed-up" in pane.figures_text()  # the full figures stay readable (and in the headline)
        assert "done" in str(pane.border_subtitle)  # the state moved to the frame
