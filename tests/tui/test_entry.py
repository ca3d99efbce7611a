"""How the app is entered: plain `spectui` opens the profile picker, `spectui tui` takes two URLs, and a
launched pair shows its progress to /health and its logs (by itself when a server exits early). The
launched "servers" here are small Python programs: what is checked is the app's handling, not llama.cpp."""

from __future__ import annotations

import sys

import pytest

from spectui.cli.main import main
from tests.fakes import FakeNVML
from tests.pilot import until


class Captured:
    """Stands in for the app: keeps the config `spectui tui` built, runs nothing."""

    configs: list = []

    def __init__(self, cfg):
        self.configs.append(cfg)

    def run(self):
        return None


@pytest.fixture
def captured(monkeypatch):
    import spectui.cli.tui as tui_cli

    Captured.configs = []
    monkeypatch.setattr(tui_cli, "make_app", Captured)
    return Captured.configs


def test_plain_spectui_opens_the_picker_and_tui_takes_two_urls(captured, capsys):
    assert main([]) == 0
    [cfg] = captured
    assert cfg.pick_profile is True and cfg.baseline_url == cfg.candidate_url == "not started"
    assert main(["tui", "--baseline", "http://127.0.0.1:8080", "--candidate", "http://127.0.0.1:8081"]) == 0
    cfg = captured[-1]
    assert cfg.pick_profile is False and (cfg.baseline_url, cfg.candidate_url) == (
        "http://127.0.0.1:8080",
        "http://127.0.0.1:8081",
    )
    assert main(["tui", "--baseline", "http://127.0.0.1:8080"]) == 2
    assert "give both --baseline URL and --candidate URL" in capsys.readouterr().err


async def test_the_picker_opens_on_start_with_the_fitting_profile_starred():
    from spectui.machine.probes import GPUProbe
    from spectui.tui.app import AppConfig, make_app
    from spectui.tui.screens.profiles_screen import ProfilePicker

    app = make_app(
        AppConfig(
            "not started",
            "not started",
            pick_profile=True,
            autosave=False,
            gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
        )
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await until(
            pilot,
            lambda: isinstance(app.screen, ProfilePicker) and app.screen.query("#profile-list"),
            10,
            "the profile picker",
        )
        picker = app.screen
        assert picker.preselected == "cpu-demo"  # no GPU (NVML says so): the demo is what fits
        options = picker.query_one("#profile-list")
        first = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert any(o.startswith("★ cpu-demo") and o.endswith("fits") for o in first)
        assert any(o.startswith("  s-nvidia") and "needs an NVIDIA GPU" in o for o in first)


# exits once the test has seen the progress (the flag file, argv[1]), not after a fixed time that a loaded
# machine can spend before the app first polls /health
FAKE_EXIT = (
    "import os, sys, time; print('fake-server: loading model', flush=True)\n"
    "deadline = time.monotonic() + 120\n"
    "while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline: time.sleep(0.05)\n"
    "print('error: invalid argument: --no-such-flag', flush=True); sys.exit(3)"
)
FAKE_SLOW = "import time; print('fake-server: still loading', flush=True); time.sleep(60)"


async def test_a_launch_shows_progress_and_an_early_exit_opens_the_logs(tmp_path):
    from spectui.machine.probes import GPUProbe
    from spectui.store.profiles import parse_profile
    from spectui.tui.app import AppConfig, make_app
    from spectui.tui.widgets.panes import ServerLogs

    flag = tmp_path / "exit-now"
    profile = parse_profile(
        'name = "fake"\n[[comparison]]\nid = "c"\ntitle = "fake pair"\n'
        f'baseline = {{ backend = "llama.cpp", argv = [{sys.executable!r}, "-c", {FAKE_EXIT!r}, {str(flag)!r}] }}\n'
        f'candidate = {{ backend = "llama.cpp", argv = [{sys.executable!r}, "-c", {FAKE_SLOW!r}] }}\n',
        "fake.toml",
    )
    app = make_app(
        AppConfig("not started", "not started", autosave=False, gpu_probe=GPUProbe(FakeNVML(fail_init=True)))
    )
    async with app.run_test(size=(160, 48)) as pilot:
        app.compare.launch(profile, profile.comparison("c"))
        pane = app.pane("baseline")
        await until(pilot, lambda: "waiting for /health" in (pane.cause or ""), 60, "progress to /health")
        assert pane.state == "starting" and pane.url.startswith("http://127.0.0.1:")
        logs = app.q(ServerLogs)
        flag.write_text("")  # the baseline exits now, with its error line
        await until(pilot, lambda: pane.state == "failed", 60, "the early exit")
        assert "exited with status 3" in (pane.cause or "") and "--no-such-flag" in (pane.cause or "")
        await until(
            pilot, lambda: logs.display and "--no-such-flag" in str(logs.render()), 30, "the logs, by themselves"
        )
        assert "baseline — exited with status 3" in str(logs.render())
        procs = [s.proc for s in app.servers.launched.values()]
    assert all(p.poll() is not None for p in procs)  # the slow one was stopped with the failed launch
