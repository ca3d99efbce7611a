"""A TUI that runs one server at a time (no server started here): F4 and alt+s open the prove and sweep
screens saying so (each side started when needed, never both up); the cache lab, which needs both servers
up at once, says it cannot run so; the supervisor never opens a second side while one is up."""

from __future__ import annotations

import pytest

from spectui.machine.launcher import ServerProcess
from spectui.run.alone import OneAtATime
from tests.pilot import until


def _app():
    from spectui.machine.probes import GPUProbe
    from spectui.tui.app import AppConfig, make_app
    from tests.fakes import FakeNVML

    # never started in these tests: nothing here presses Enter on a screen
    base = ServerProcess("baseline", ["llama-server", "--port", "18101"], port=18101)
    cand = ServerProcess("candidate", ["llama-server", "--port", "18102"], port=18102)
    cfg = AppConfig(
        base.url,
        cand.url,
        one_at_a_time=True,
        launched={"baseline": base, "candidate": cand},
        gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
        autosave=False,
    )
    return make_app(cfg)


def _text(widget) -> str:
    return str(widget.render())


async def _waiting(pilot, app) -> None:
    await until(
        pilot,
        lambda: all(app.pane(s).state == "ready" for s in ("baseline", "candidate")),
        60,
        "the panes waiting for a run",
    )


async def test_f4_and_the_sweep_say_one_server_at_a_time_and_start_nothing():
    from spectui.tui.screens.lab_screens import SweepScreen
    from spectui.tui.screens.prove_screen import ProveScreen

    app = _app()
    async with app.run_test(size=(180, 50)) as pilot:
        await _waiting(pilot, app)
        app.servers.alone = OneAtATime(None, "the memory plan: together 37.0 GiB > 23.5 GiB usable")
        await pilot.press("f4")
        await until(
            pilot,
            lambda: isinstance(app.screen, ProveScreen) and app.screen.query("#prove-alone"),
            60,
            "the prove screen",
        )
        said = _text(app.screen.query_one("#prove-alone"))
        assert said.startswith("one server at a time (the memory plan: together 37.0 GiB > 23.5 GiB usable)")
        assert "never both up" in said and "triage skipped" in said and "terms are not measured" in said
        assert app.screen.open_alone is not None  # the supervisor's: each side started when a phase needs it
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ProveScreen), 60, "back to the main screen")
        await pilot.press("alt+s")
        await until(
            pilot,
            lambda: isinstance(app.screen, SweepScreen) and app.screen.query("#sweep-alone"),
            60,
            "the sweep screen",
        )
        said = _text(app.screen.query_one("#sweep-alone"))
        assert "one server at a time (the memory plan" in said and "prediction needs both servers up" in said
        assert all(s.proc is None for s in app.config.launched.values())  # nothing started by opening them


async def test_the_cache_lab_says_it_needs_both_servers_up():
    app = _app()
    async with app.run_test(size=(180, 50)) as pilot:
        await _waiting(pilot, app)
        await pilot.press("ctrl+f")
        await until(
            pilot,
            lambda: any("needs both servers up at once" in n.message for n in app._notifications),
            60,
            "the notice",
        )
        assert type(app.screen).__name__ != "PrefixScreen"


async def test_the_supervisor_never_opens_a_second_side_while_one_is_up():
    app = _app()
    async with app.run_test(size=(180, 50)) as pilot:
        await _waiting(pilot, app)
        app.servers.alone_open = "baseline"  # as while a run holds the baseline up
        with pytest.raises(RuntimeError, match="the baseline is up for another run"):
            async with app.servers.open_alone("candidate"):
                pass
        assert app.config.launched["candidate"].proc is None and app.servers.alone_open == "baseline"
        app.servers.alone_open = None
