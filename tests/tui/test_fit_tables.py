"""Tables that fit the terminal (tui.widgets.fit_table): headings shorten, then columns go by priority, the
verdict and the speed-up never; a wider terminal shows every column again."""

from __future__ import annotations

from textual.app import App

from spectui.tui.widgets.fit_table import PLANS, FitTable, choose
from tests.pilot import until

LEVELS = [
    "concurrency",
    "baseline tok/s",
    "candidate tok/s",
    "per-request b/c",
    "TTFT ms b/c",
    "speed-up (acceptance)",
    "outputs",
]
ROW = ("4", "41.2", "12.3", "10.3 / 3.1", "812 / 1490", "0.30× at 38%", "1/4 DIFFER")


def test_headings_shorten_before_a_column_goes_and_the_verdict_and_speed_up_stay():
    wide, short = choose(LEVELS, [ROW], 200, PLANS["levels"])
    assert (len(wide), short) == (7, False)
    narrow, short = choose(LEVELS, [ROW], 60, PLANS["levels"])
    names = [LEVELS[i] for i in narrow]
    assert short and "speed-up (acceptance)" in names and "outputs" in names and "concurrency" in names
    assert "per-request b/c" not in names  # the first to go
    tiny, _ = choose(LEVELS, [ROW], 10, PLANS["levels"])
    assert {LEVELS[i] for i in tiny} == {"concurrency", "speed-up (acceptance)", "outputs"}


class Host(App):
    def compose(self):
        yield FitTable(id="levels")

    def on_mount(self) -> None:
        t = self.query_one(FitTable)
        t.add_columns(*LEVELS)
        t.add_row(*ROW)


async def test_the_table_refits_when_the_terminal_changes_width():
    app = Host()
    async with app.run_test(size=(60, 24)) as pilot:
        t = app.query_one(FitTable)
        await until(pilot, lambda: t.row_count == 1, 10, "the row")
        assert "speed-up" in t.shown_labels and "outputs" in t.shown_labels
        assert len(t.shown_labels) < len(LEVELS)
        shown = [str(c) for c in t.get_row_at(0)]
        assert "0.30× at 38%" in shown and "1/4 DIFFER" in shown  # whole, not cut to a letter
        await pilot.resize_terminal(200, 24)
        await until(pilot, lambda: len(t.shown_labels) == len(LEVELS), 10, "every column back")
        assert t.shown_labels == LEVELS
