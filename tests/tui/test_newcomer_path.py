"""The newcomer's path through the TUI, as one person walks it : plain `spectui` opens
the profile picker, Enter twice launches the demo pair of real llama-servers, a prompt runs, the banner's
headline answers both halves, `F1` (the `?` screen) lists the keys, Ctrl+Y puts the run on the theory curve, F2
opens the sampling screen on the prompt just run, and Ctrl+F runs the cache lab's turns cold against warm.
The servers the picker launched are stopped when the app quits."""

from __future__ import annotations

import psutil
import pytest

from spectui.core.types import GenerationParams
from spectui.machine.probes import GPUProbe
from spectui.tui.app import AppConfig, make_app
from spectui.tui.screens.keys_screen import KeysScreen
from spectui.tui.screens.lab_screens import PrefixScreen
from spectui.tui.screens.profiles_screen import ProfilePicker
from spectui.tui.screens.sampling_screen import SamplingScreen
from spectui.tui.screens.theory_screen import TheoryScreen
from spectui.tui.widgets.panes import Banner
from tests.fakes import FakeNVML
from tests.pilot import until

pytestmark = pytest.mark.server
PROMPT = "What is 2+2?"


async def test_picker_run_headline_keys_theory_sampling_and_the_cache_lab():
    app = make_app(
        AppConfig(
            "not started",
            "not started",
            params=GenerationParams(max_tokens=24, cache_prompt=False),
            pick_profile=True,
            autosave=False,
            gpu_probe=GPUProbe(FakeNVML(fail_init=True)),  # no GPU: the picker stars the CPU demo
        )
    )
    pids: list[int] = []
    async with app.run_test(size=(160, 48)) as pilot:
        # 1. the picker: Enter on the starred profile, Enter on its first comparison
        await until(pilot, lambda: isinstance(app.screen, ProfilePicker) and app.screen.query("#profile-list"), 30)
        assert app.screen.preselected == "cpu-demo"
        await pilot.press("enter")
        await until(pilot, lambda: app.screen.query_one("#comparison-list").has_focus, 10, "the comparisons")
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, ProfilePicker), 10, "the picker to close")
        ready = lambda: all(app.pane(s).state == "ready" for s in ("baseline", "candidate"))  # noqa: E731
        await until(pilot, ready, 240, "the launched pair")
        pids = [p.pid for p in app.servers.launched.values() if p.pid]
        assert len(pids) == 2
        # 2. a prompt, run; 3. the headline answers both halves
        if not app.results:  # a comparison may autorun the demo prompt; else the newcomer types one
            await pilot.click("#prompt")
            await pilot.press(*PROMPT)
            await pilot.press("enter")
        await until(pilot, lambda: app.run_done.is_set() and app.results, 240, "the run to finish")
        # the headline drawn for the run (waited for itself: the live panel's host figures keep the whole
        # screen changing, and under load no three frames in a row were the same for 30 s)
        await until(pilot, lambda: " · faster: " in app.q(Banner).headline_text(), 60, "the headline")
        headline = app.q(Banner).headline_text()
        assert headline.startswith("same bytes: ") and " · faster: " in headline, headline
        # 4. F1 (the ? screen): every key of the main screen with its sentence, Run first
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, KeysScreen), 10, "the keys screen")
        assert app.screen.rows[0][1] == "Run" and all(r[2] for r in app.screen.rows)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, KeysScreen), 10)
        # 5. theory: the run just made is the measured point
        await pilot.press("ctrl+y")
        await until(pilot, lambda: isinstance(app.screen, TheoryScreen) and app.screen.query("#measured"), 10)
        assert app.screen.query_one("#alpha")  # the formula's inputs, α per position first
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, TheoryScreen), 10)
        # 6. sampling: on the prompt just run, idle until Enter
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, SamplingScreen) and app.screen.query("#status"), 10)
        status = str(app.screen.query_one("#status").render())
        assert app.results[-1].prompt.id in status and "Enter to run" in status
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, SamplingScreen), 10)
        # 7. the prefix demo: cold against warm turns, bytes compared on every turn
        await pilot.press("ctrl+f")
        await until(pilot, lambda: isinstance(app.screen, PrefixScreen) and app.screen.query("#status"), 10)
        lab = app.screen
        await pilot.press("enter")
        await until(pilot, lambda: str(lab.query_one("#status").render()).startswith(("done", "failed")), 300)
        assert str(lab.query_one("#status").render()).startswith("done"), str(lab.query_one("#status").render())
        assert len(lab.turns) == 3 and all(t.verdict.status in ("identical", "differs") for t in lab.turns)
        assert all(t.candidate.figures.prompt_cached for t in lab.turns[1:])  # the warm turns reused the prefix
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, PrefixScreen), 10, "the prefix lab to close")
    assert pids and not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids)
