"""The TUI names what changes a figure: after Ctrl+O (concurrent) the speed-up carries a
caveat beside it and a notice says why; the sweep asks for the prompt cache as the main screen does (off unless
asked, as `spectui sweep`), and says so. Replayed real streams, as tests/tui/test_snapshots.py."""

from __future__ import annotations

import asyncio

from spectui.core.report import CONCURRENT_CAVEAT, CONCURRENT_SHORT
from spectui.core.types import GenerationParams
from tests.pilot import settled, until
from tests.tui.test_snapshots import make, steady


async def test_ctrl_o_puts_a_caveat_beside_the_speed_up():
    app = make()
    said: list[str] = []
    async with app.run_test(size=(160, 48)) as pilot:
        await steady(pilot)
        app.action_run()
        await asyncio.wait_for(app.run_done.wait(), 60)
        await settled(pilot)
        figures = str(app.query_one("#figures-candidate").render())
        assert "speed-up" in figures and CONCURRENT_SHORT not in figures  # sequential: no caveat
        real = app.notify
        app.notify = lambda message, *a, **kw: (said.append(str(message)), real(message, *a, **kw))[1]
        await pilot.press("ctrl+o")
        await settled(pilot)
        assert app.order == "concurrent" and CONCURRENT_CAVEAT in said
        app.action_run()
        await until(pilot, lambda: app.run_done.is_set() and len(app.results) == 2, 60, "the concurrent run")
        await settled(pilot)
        assert app.results[-1].order == "concurrent"
        assert CONCURRENT_SHORT in str(app.query_one("#figures-candidate").render())


async def test_the_sweep_asks_for_the_cache_as_the_main_screen_and_says_it(monkeypatch):
    from spectui.labs.sweep import levels
    from spectui.tui.screens.lab_screens import SweepScreen

    asked: list[GenerationParams] = []

    async def sweep(base, cand, prompts, conc, params, add):
        asked.append(params)

    monkeypatch.setattr(levels, "sweep", sweep)
    app = make()
    app.compare.params = GenerationParams(
        max_tokens=64, cache_prompt=False
    )  # `spectui tui`'s default (--cache-prompt off)
    async with app.run_test(size=(160, 48)) as pilot:
        await steady(pilot)
        await app.run_action("screen.lab('sweep')")
        await until(pilot, lambda: isinstance(app.screen, SweepScreen) and app.screen.query("#status"), 10, "the sweep")
        status = str(app.screen.query_one("#status").render())
        assert "prompt cache off" in status
        await pilot.press("enter")
        await until(pilot, lambda: app.screen.finished, 30, "the sweep to finish")
        assert [p.cache_prompt for p in asked] == [False]  # was None: the server's default (llama.cpp: on)
        assert "prompt cache off" in str(app.screen.query_one("#status").render())


async def test_the_main_screen_says_the_prompt_cache_within_80_columns():
    """The settings row says the prompt cache the requests ask for, whole, at 80 and at 120 columns (it
    said only the order, and at 80 columns not even that: `order:` was the last word that fitted)."""
    from spectui.tui.widgets.fit import FitLabel

    app = make()
    app.compare.params = GenerationParams(
        max_tokens=64, cache_prompt=False
    )  # `spectui tui`'s default (--cache-prompt off)
    async with app.run_test(size=(80, 24)) as pilot:
        await steady(pilot)
        label = app.query_one("#order", FitLabel)
        assert str(label.render()) == "seq · cache off"
        assert label.region.right <= 80, "the label is cut by the terminal's edge"
        await pilot.press("ctrl+o")
        await settled(pilot)
        assert str(label.render()) == "conc · cache off" and label.region.right <= 80
        await pilot.resize_terminal(120, 40)
        await settled(pilot)
        assert str(label.render()) == "order: concurrent · prompt cache off" and label.region.right <= 120
        assert str(app.query_one("#settings FitLabel").render()) == "max tokens"


async def test_on_a_short_terminal_the_prompt_keeps_a_gap_before_the_set_picker():
    """At 24 rows the prompt row is one line without borders, and the prompt's last word ran into the set
    picker ('…fizzbuzz(n) thatset: default'): a cell is kept between them."""
    from textual.widgets import Input, Select

    app = make()
    async with app.run_test(size=(80, 24)) as pilot:
        await steady(pilot)
        prompt, picker = app.query_one("#prompt", Input), app.query_one("#set-picker", Select)
        assert prompt.compact and picker.region.x - prompt.region.right >= 1


async def test_the_keys_screen_says_where_question_mark_opens_it():
    """The prompt has the focus when the app opens, so `?` there is typed into it: the keys screen, which
    lists `f1 / ?`, says so and names F1 as the key that works everywhere."""
    from spectui.tui.screens.keys_screen import KeysScreen

    app = make()
    async with app.run_test(size=(120, 40)) as pilot:
        await steady(pilot)
        await pilot.press("question_mark")
        await settled(pilot)
        assert app.query_one("#prompt").value.endswith("?") and not isinstance(app.screen, KeysScreen)
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, KeysScreen), 10, "the keys screen")
        keys = {r[1]: r for r in app.screen.rows}["Keys"]
        assert "?" in keys[0] and "outside a text box" in keys[2] and "F1" in keys[2]
