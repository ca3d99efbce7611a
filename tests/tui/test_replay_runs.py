"""The TUI's replay of a session recorded with `--repeat 2` shows what `spectui replay --no-tui` prints for the
same file (one run, one verdict): the runs per prompt, each prompt's speed-up over its runs with its interval
and acceptance, the whole set's figure with its acceptance; the theory screen the prompt's figure over its
runs; and a seek back (F9) replays in place and goes on to the replay's end. On a session recorded from real
llama-servers (tests/data/README.md)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from spectui.core.report import repeat_text, whole_set
from spectui.core.runner import grouped
from spectui.store.session import load_session, results_for
from spectui.tui.widgets.panes import Banner
from tests.pilot import replay_app as replay_session
from tests.pilot import until

SESSION = Path(__file__).resolve().parent.parent / "data" / "session-draft-quick2-repeat2.jsonl"
SIDES = ("baseline", "candidate")


@pytest.fixture(scope="module")
def no_tui() -> str:
    """What `spectui replay FILE --no-tui` prints for the recorded session."""
    import contextlib
    import io

    from spectui.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["replay", str(SESSION), "--no-tui"]) == 0
    return out.getvalue()


def printed(text: str, head: str) -> str:
    """The rest of the report's line that begins with `head` and a speed-up (a prompt's line under "repeated
    runs", or the whole set's)."""
    lines = [
        r
        for line in text.splitlines()
        if line.startswith(head + " ") and (r := line[len(head) :].strip()).startswith("speed-up")
    ]
    assert len(lines) == 1, (head, text)
    return lines[0]


def replay_app(speed: float | None):
    return replay_session(SESSION, speed)


def numbered(app) -> list[tuple[str, int, int]]:
    return [(r.prompt.id, r.run, r.runs) for r in app.results]


RECORDED = [("code-fizzbuzz", 1, 2), ("code-fizzbuzz", 2, 2), ("qa-capital", 1, 2), ("qa-capital", 2, 2)]


def ended(app) -> bool:
    return app.run_done.is_set() and not app.running and len(app.results) == 4


def banner_text(app) -> str:
    return str(app.q(Banner).render())


async def test_replay_of_a_repeated_session_shows_the_runs_and_the_whole_set_as_no_tui(no_tui):
    # the figures the text report prints (core.report over the recorded results), read from its output
    per_prompt = printed(no_tui, "qa-capital")
    whole = "whole set " + printed(no_tui, "whole set")
    assert "(2 runs)" in per_prompt and "accepted" in per_prompt and "over 2 prompts" in whole  # the fixture
    app = replay_app(None)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: ended(app), 120, "the replay to end")
        await until(pilot, lambda: whole in banner_text(app), 30, "the whole set's figure under the verdict")
        assert app.query_one("#repeat").value == "2"  # the settings row: the runs the session recorded
        assert numbered(app) == RECORDED
        figures = app.pane("candidate").figures_text()
        assert per_prompt in figures, figures  # the last prompt over its two runs, not its last run alone
        assert "1 run: no spread measured" not in figures
        assert "IDENTICAL" in banner_text(app)  # the verdict stays; the whole set's line is under it


async def test_theory_screen_of_the_replay_shows_the_prompts_figure_over_its_runs():
    from spectui.tui.screens.theory_screen import TheoryScreen

    spread = grouped(results_for(load_session(SESSION)))[-1].speedup
    assert spread is not None and spread.measured and spread.n == 2
    app = replay_app(None)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: ended(app), 120, "the replay to end")
        await pilot.press("ctrl+y")
        await until(pilot, lambda: isinstance(app.screen, TheoryScreen), 30, "the theory screen")
        screen = app.screen
        await until(pilot, lambda: bool(screen.query("#measured")), 30, "the measured point")
        shown = str(screen.query_one("#measured").render())
        assert f"measured {spread.text(unit='×')} over 2 runs" in shown, shown
        assert "1 run: no spread measured" not in shown


async def test_f9_after_the_end_replays_the_last_prompt_in_place():
    """A seek back replays the prompt on screen again: it replaces that prompt's result (the figures over
    runs and prompts stay those of the recorded runs), and the candidate pane is never done without text."""
    results = results_for(load_session(SESSION))
    per_prompt = repeat_text(grouped(results)[-1])
    ws = whole_set(results)
    assert ws is not None
    app = replay_app(None)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: ended(app), 120, "the replay to end")
        pane = app.pane("candidate")
        done_empty: list[str] = []
        set_state = pane.set_state

        def watched(state: str, cause: str = "") -> None:
            set_state(state, cause)
            if state == "done" and not pane.view.plain():
                done_empty.append(state)

        pane.set_state = watched  # type: ignore[method-assign]
        generation = app.runs.generation
        await pilot.press("f9")
        await until(pilot, lambda: app.runs.generation > generation and ended(app), 120, "the prompt replayed")
        await until(pilot, lambda: pane.state == "done", 30, "the candidate pane done")
        assert numbered(app) == RECORDED and app.runs.records == [0, 1, 2, 3]
        drawn = re.sub(r"✗\d+", "", pane.view.plain())  # the marks of rejected drafts between the tokens
        assert drawn == app.results[-1].candidate.output().decode()
        assert per_prompt in pane.figures_text()
        await until(pilot, lambda: f"whole set {ws.text()}" in banner_text(app), 30, "the whole set again")
        assert done_empty == []


async def test_f9_during_the_replay_goes_on_to_its_end():
    """Seeking back inside the third record replays it and then every record after it (it stopped after
    the one prompt), each side its own record."""
    app = replay_app(4.0)
    hold_after_first_token(app, record=2)
    async with app.run_test(size=(160, 48)) as pilot:
        # inside the third record (a first run: the baseline went first, as the replay plays it), both sides
        # under way: the candidate's first token in, its stream held there
        await until(
            pilot,
            lambda: len(app.results) == 2 and app.recorders["candidate"].figures.tokens > 0,
            120,
            "the candidate streaming the third record",
        )
        assert app.recorders["candidate"].figures.tokens == 1 and app.running  # mid-record
        generation = app.runs.generation
        await pilot.press("f9")
        await until(pilot, lambda: app.runs.generation > generation, 30, "the seek back")
        await until(pilot, lambda: ended(app), 180, "the replay to go on to its end")
        assert numbered(app) == RECORDED and app.runs.records == [0, 1, 2, 3]
        for r in app.results:  # each prompt's two sides are its own record's, with its recorded verdict
            assert r.identical is True and r.baseline.output() == r.candidate.output()


def hold_after_first_token(app, record: int) -> None:
    """The candidate's stream of `record` (its first playing only) stops after its first token until the run
    is cancelled, as a slow server's would: the moment to seek back in is then there to be found.

    Without it the test polled for that moment, and missed it under load: the replay's clock runs on while
    the app works between the two sides, so the candidate's ~1 s of the record at ×4 came in one burst."""
    from spectui.core.events import TokenEvent

    backend = app.config.backends["candidate"]  # the app plays the config's backends
    stream = backend.stream
    held_once: list[int] = []

    async def held(prompt, params):
        this = backend._cursor == record and not held_once
        if this:
            held_once.append(record)
        async for ev in stream(prompt, params):
            yield ev
            if this and isinstance(ev, TokenEvent):
                await asyncio.Event().wait()  # until F9 cancels the run

    backend.stream = held


async def test_f9_before_the_second_side_began_keeps_both_sides_on_the_prompt():
    """Sequential order: a seek back while the baseline plays a prompt and the candidate has not begun it
    put the candidate one record back (the prompt before), so the candidate replayed another prompt's
    output beside this one's recorded verdict. The second record is a second run, recorded candidate first:
    its baseline's events come after the candidate's recorded time, a wide window to seek back in."""
    app = replay_app(2.0)  # the window is ~7 s at ×2
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: len(app.results) == 1 and app.running, 120, "the second record under way")
        assert app.recorders["candidate"].figures.tokens == 0  # the candidate has not begun it
        generation = app.runs.generation
        await pilot.press("f9")
        await until(pilot, lambda: app.runs.generation > generation, 30, "the seek back")
        await until(pilot, lambda: ended(app), 180, "the replay to go on to its end")
        assert numbered(app) == RECORDED and app.runs.records == [0, 1, 2, 3]
        for r in app.results:
            assert r.identical is True and r.baseline.output() == r.candidate.output(), r.prompt.id
