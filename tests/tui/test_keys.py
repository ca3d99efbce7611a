"""Every key the README lists, pressed in the app on replayed recorded streams (no server): what each one
does is checked on the app's state and screens, with expected values from the recorded streams."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spectui.core.errors import InputError
from spectui.store.replay import ReplayControl
from tests.pilot import until
from tests.tui.test_snapshots import make

DATA = Path(__file__).parent.parent / "data"
DRAFT = [
    json.loads(x[6:])
    for x in (DATA / "llamacpp-b11434-draft-simple-fizzbuzz.sse").read_text().splitlines()
    if x.startswith("data: ")
]


async def started(pilot):
    app = pilot.app
    await until(pilot, lambda: all(app.pane(s).state == "ready" for s in ("baseline", "candidate")), 30, "panes")


async def one_run(pilot, before: int = 0):
    app = pilot.app
    await until(pilot, lambda: len(app.results) > before and app.run_done.is_set(), 60, "the run")


def in_session_dir(app, tmp_path):
    app.recording.folder = tmp_path
    return tmp_path


async def test_ctrl_r_reruns_the_last_prompt_and_says_so_when_there_is_none():
    app = make()
    async with app.run_test(size=(160, 48)) as pilot:
        await started(pilot)
        await pilot.press("ctrl+r")
        await until(pilot, lambda: any("nothing to rerun" in n.message for n in app._notifications), 10, "the notice")
        assert app.results == []  # nothing to rerun yet (and a notice says so)
        app.action_run()
        await one_run(pilot)
        await pilot.press("ctrl+r")
        await one_run(pilot, 1)
        assert [r.prompt.preview for r in app.results] == ["Write a Python function fizzbuzz(n)."] * 2


async def test_ctrl_g_runs_the_whole_prompt_set():
    app = make()
    async with app.run_test(size=(160, 48)) as pilot:
        await started(pilot)
        n = len(app.prompt_list)
        assert n >= 2
        await pilot.press("ctrl+g")
        await until(pilot, lambda: len(app.results) == n and app.run_done.is_set(), 120, "the set")
        assert [r.prompt.id for r in app.results] == [p.id for p in app.prompt_list]


async def test_ctrl_o_switches_the_order_and_the_next_run_uses_it():
    app = make()
    async with app.run_test(size=(160, 48)) as pilot:
        await started(pilot)
        assert app.order == "sequential"
        await pilot.press("ctrl+o")
        assert app.order == "concurrent" and "order: concurrent" in str(app.query_one("#order").render())
        await pilot.press("ctrl+o")
        assert app.order == "sequential" and "order: sequential" in str(app.query_one("#order").render())


async def test_ctrl_t_shows_token_boundaries_and_hides_them_again():
    app = make()
    async with app.run_test(size=(160, 48)) as pilot:
        await started(pilot)
        app.action_run()
        await one_run(pilot)
        view = app.pane("baseline").view
        plain = view.plain()
        await pilot.press("ctrl+t")
        await until(pilot, lambda: view.boundaries, 10, "the token boundaries")
        # a mark between every two tokens: 60 for the recording's 61 tokens, and the text otherwise the same
        assert view.boundaries is True and app.pane("candidate").view.boundaries is True
        assert view.plain().count("│") == 60 and view.plain().replace("│", "") == plain
        await pilot.press("ctrl+t")
        await until(pilot, lambda: not view.boundaries, 10, "the boundaries to hide")
        assert view.boundaries is False and view.plain() == plain


async def test_ctrl_y_puts_the_last_run_on_the_theory_screen():
    from spectui.tui.screens.theory_screen import TheoryScreen

    app = make()
    async with app.run_test(size=(160, 48)) as pilot:
        await started(pilot)
        app.action_run()
        await one_run(pilot)
        await pilot.press("ctrl+y")
        # mounted and drawn (its on_mount draws the table and the measured line)
        await until(
            pilot,
            lambda: isinstance(app.screen, TheoryScreen) and any(str(w.render()) for w in app.screen.query("#table")),
            10,
            "the theory screen",
        )
        # the measured point: α from the server's counters (45 of 119), γ = drafted / steps = 119 / 15
        t = DRAFT[-1]["timings"]
        text = "\n".join(str(w.render()) for w in app.screen.query("Static"))
        assert f"{t['draft_n'] / 15:.2f}" in text or f"{t['draft_n'] / 15:.1f}" in text
        await pilot.press("escape")


async def test_ctrl_k_opens_the_profile_picker_and_ctrl_w_the_logs():
    from spectui.tui.screens.profiles_screen import ProfilePicker
    from spectui.tui.widgets.panes import ServerLogs

    app = make()
    async with app.run_test(size=(160, 48)) as pilot:
        await started(pilot)
        logs = app.query_one(ServerLogs)
        shown = logs.display
        await pilot.press("alt+l")
        await until(pilot, lambda: logs.display is not shown, 10, "the logs to toggle")
        assert logs.display is (not shown)
        await pilot.press("alt+l")
        await until(pilot, lambda: logs.display is shown, 10, "the logs to toggle back")
        assert logs.display is shown
        await pilot.press("alt+p")
        await until(pilot, lambda: isinstance(app.screen, ProfilePicker), 10, "the profile picker")


async def test_ctrl_p_lists_the_actions_and_themes():
    from textual.command import CommandPalette

    app = make()
    async with app.run_test(size=(160, 48)) as pilot:
        await started(pilot)
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), 10, "the command palette")

        def offered():
            from textual.command import CommandList

            options = app.screen.query_one(CommandList)
            return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]

        await pilot.press(*"theory")
        await until(pilot, lambda: any("Theory (ctrl+y)" in o for o in offered()), 10, "Theory in the palette")
        for _ in "theory":
            await pilot.press("backspace")
        await pilot.press(*"theme")
        await until(pilot, lambda: any("theme" in o.lower() for o in offered()), 10, "the theme command")
        await pilot.press("enter")  # Textual's theme picker: the bundled themes are there
        await until(pilot, lambda: any("spectui-colourblind" in o for o in offered()), 10, "the themes")
        assert {"spectui-dark", "spectui-light"} <= {o.split()[0] for o in offered() if o.startswith("spectui")}


async def test_ctrl_s_saves_the_session_and_ctrl_l_browses_it(tmp_path):
    from spectui.store.session import load_session, recorders_for
    from spectui.tui.screens.sessions_screen import SessionBrowser

    app = make()
    async with app.run_test(size=(160, 48)) as pilot:
        in_session_dir(app, tmp_path)
        await started(pilot)
        app.action_run()
        await one_run(pilot)
        await pilot.press("ctrl+s")
        await until(pilot, lambda: list(tmp_path.glob("*.jsonl")), 10, "the saved session")
        [saved] = list(tmp_path.glob("*.jsonl"))
        b, c = recorders_for(load_session(saved).prompts[0])
        assert b.output() == app.results[0].baseline.output() and c.output() == app.results[0].candidate.output()
        await pilot.press("ctrl+l")
        await until(pilot, lambda: isinstance(app.screen, SessionBrowser), 10, "the session browser")
        # its table is composed and filled when the screen mounts, which can come after the push
        await until(
            pilot,
            lambda: any(saved.name in str(t.get_row_at(0)) for t in app.screen.query("DataTable") if t.row_count),
            10,
            "a row",
        )


async def test_f12_saves_an_svg_screenshot(tmp_path):
    app = make()
    async with app.run_test(size=(160, 48)) as pilot:
        in_session_dir(app, tmp_path)
        await started(pilot)
        await pilot.press("f12")
        await until(pilot, lambda: list(tmp_path.glob("screenshot-*.svg")), 10, "the screenshot")
        [svg] = list(tmp_path.glob("screenshot-*.svg"))
        assert svg.read_text().lstrip().startswith("<svg") and "spectui" in svg.read_text()


async def test_up_and_down_walk_the_prompt_history():
    app = make()
    async with app.run_test(size=(160, 48)) as pilot:
        await started(pilot)
        box = app.query_one("#prompt")
        for text in ("first prompt", "second prompt"):
            box.value = text
            before = len(app.results)
            app.action_run()
            await one_run(pilot, before)
        box.focus()
        box.value = ""
        # up and down are not priority keys: the app sees them after the input let them bubble up
        for key, want in (("up", "second prompt"), ("up", "first prompt"), ("down", "second prompt"), ("down", "")):
            await pilot.press(key)
            await until(pilot, lambda w=want: box.value == w, 10, f"{key} to give {want!r}")
            assert box.value == want


async def test_ctrl_x_triages_the_prompt_on_screen():
    app = make("diverge")
    async with app.run_test(size=(160, 48)) as pilot:
        await started(pilot)
        app.action_run()
        await one_run(pilot)
        await until(pilot, lambda: app.results[-1].triage is not None, 60, "triage after the difference")
        first = app.results[-1].triage
        cause = first.cause
        await pilot.press("ctrl+x")  # again, on demand: the same finding
        # a new finding (triage runs as a worker and does not clear run_done: the old finding and a set
        # run_done were there at once, while the banner still said "triage: rerunning…")
        await until(pilot, lambda: app.results[-1].triage is not first, 60, "the new triage")
        assert app.results[-1].triage.cause == cause == "configuration"  # the recordings reproduce themselves
        assert f"cause: {cause}" in str(app.query_one("#banner").render())


# -- replay: F5–F10 and --speed ---------------------------------------------------------------------------
@pytest.fixture
def session_file(tmp_path):
    from tests.recordings import write_session

    return write_session(tmp_path / "s.jsonl")  # outside the test's event loop (the run loop uses its own)


def replay_app(path, speed: float | None = 1.0):
    from spectui.machine.probes import GPUProbe
    from spectui.store.replay import SessionBackend
    from spectui.store.session import load_session
    from spectui.tui.app import AppConfig, make_app
    from tests.fakes import FakeNVML

    session = load_session(path)
    control = ReplayControl(speed)
    cfg = AppConfig(
        session.infos["baseline"].url,
        session.infos["candidate"].url,
        prompts=[p.prompt for p in session.prompts],
        backends={s: SessionBackend(s, session, speed, control) for s in ("baseline", "candidate")},
        replay_control=control,
        autorun_all=True,
        gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
        autosave=False,
    )
    return make_app(cfg), control


def counted(app) -> list[str]:
    """Each F5–F10 the app handled, in order: they are not priority keys, so the app gets them after the
    focused input let them bubble up, which on a loaded machine can be after `press` returned."""
    handled: list[str] = []
    control = app.recording.control

    def counting(what: str) -> None:
        control(what)
        handled.append(what)

    app.recording.control = counting
    return handled


async def press_handled(pilot, handled: list[str], *keys: str) -> None:
    for key in keys:
        before = len(handled)
        await pilot.press(key)
        await until(pilot, lambda n=before: len(handled) > n, 10, f"{key} to be handled")


async def test_f7_f8_halve_and_double_the_replay_speed_within_their_bounds(session_file):
    app, control = replay_app(session_file, speed=1.0)
    handled = counted(app)
    async with app.run_test(size=(160, 48)) as pilot:
        speeds = []
        for key in ("f7", "f7", "f7", "f8", "f8", "f8", "f8", "f8", "f8", "f8"):
            await press_handled(pilot, handled, key)
            speeds.append(control.speed)
        # ×0.5 down to the floor of ×0.25, then ×2 up to ×16, then as fast as possible (None)
        assert speeds == [0.5, 0.25, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, None]
        await until(pilot, lambda: app.run_done.is_set() and app.results, 60, "the replay to end")


async def test_f5_pauses_f6_steps_and_f9_f10_seek(session_file):
    app, control = replay_app(session_file, speed=0.25)
    handled = counted(app)
    async with app.run_test(size=(160, 48)) as pilot:
        await press_handled(pilot, handled, "f5")
        assert control.paused is True
        at = control.position_ns
        await press_handled(pilot, handled, "f10")
        assert control.position_ns == at + 2_000_000_000  # paused: the clock moved by the seek alone
        await press_handled(pilot, handled, "f6")
        # the step is pending, or it released the token the paused stream was waiting for (moving the clock on
        # to it): which one depends on where the recording's own pace has the next token
        assert control.paused is True and (control.steps >= 1 or control.position_ns > at + 2_000_000_000)
        stepped = control.position_ns
        await press_handled(pilot, handled, "f9")  # 2 s back from wherever the step left the clock
        await until(pilot, lambda: control.position_ns <= max(0, stepped - 2_000_000_000) + 1, 10, "the seek back")
        await press_handled(pilot, handled, "f5")
        assert control.paused is False
        await press_handled(pilot, handled, "f8", "f8", "f8", "f8", "f8", "f8", "f8")  # as fast as possible, to the end
        await until(pilot, lambda: app.run_done.is_set() and app.results, 60, "the replay to end")
        assert app.results[-1].identical is True


@pytest.mark.parametrize("speed", ["0", "-2", "abc", "inf"])
def test_replay_speed_must_be_a_positive_number_or_max(speed, tmp_path, capsys):
    from spectui.cli.main import main
    from tests.recordings import write_session

    session = write_session(tmp_path / "s.jsonl")
    assert main(["replay", str(session), "--speed", speed]) == 2
    assert "--speed must be" in capsys.readouterr().err


def test_replay_speed_max_and_multiples_parse(monkeypatch, tmp_path):
    import spectui.cli.tui as tui_cli
    from spectui.store.session import load_session
    from tests.recordings import write_session

    seen = []
    monkeypatch.setattr(tui_cli, "make_app", lambda cfg: seen.append(cfg.replay_control.speed) or _NoRun())
    session = load_session(write_session(tmp_path / "s.jsonl"))
    for text in ("max", "2", "10x", "0.5"):
        assert tui_cli.run_replay(session, text) == 0
    assert seen == [None, 2.0, 10.0, 0.5]
    with pytest.raises(InputError):
        tui_cli.run_replay(session, "nan")


class _NoRun:
    def run(self):
        return None
