"""The TUI brings its servers up through run.pair (LaunchedPair), as compare, sweep and prove do: a side started
alone for a run shows its way to /health on its pane (run.pair's progress hook), and a side that dies before it
is ready is stopped and said. The "server" is a small Python program: what is checked is the app's handling."""

from __future__ import annotations

import asyncio
import sys

import pytest

from spectui.core.errors import ServerError
from spectui.machine.launcher import ServerProcess, free_port
from spectui.machine.probes import GPUProbe
from spectui.run import pair as run_pair
from spectui.tui.app import AppConfig, make_app
from tests.fakes import FakeNVML
from tests.pilot import until

# never answers /health; exits with an error line once the test has seen the progress (the flag file, argv[1])
FAKE_EXIT = (
    "import os, sys, time; print('fake-server: loading model', flush=True)\n"
    "deadline = time.monotonic() + 120\n"
    "while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline: time.sleep(0.05)\n"
    "print('error: out of memory', flush=True); sys.exit(3)"
)


async def test_a_side_started_alone_comes_up_through_the_pair_with_its_progress(tmp_path, monkeypatch):
    flag = tmp_path / "exit-now"
    base = ServerProcess("baseline", [sys.executable, "-c", FAKE_EXIT, str(flag)], port=free_port())
    cand = ServerProcess("candidate", ["llama-server", "--port", "18102"], port=18102)  # never started here
    opened = []
    real_side = run_pair.LaunchedPair.side

    def side(self, *args, **kwargs):  # the pair's own OneSide, seen going by
        opened.append(self.servers[args[0]].name)
        return real_side(self, *args, **kwargs)

    monkeypatch.setattr(run_pair.LaunchedPair, "side", side)
    app = make_app(
        AppConfig(
            base.url,
            cand.url,
            one_at_a_time=True,
            launched={"baseline": base, "candidate": cand},
            gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
            autosave=False,
        )
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: app.pane("baseline").state == "ready", 60, "the panes waiting for a run")

        async def hold_baseline():
            async with app.servers.open_alone("baseline"):
                pass

        task = asyncio.create_task(hold_baseline())
        pane = app.pane("baseline")
        await until(pilot, lambda: "waiting for /health" in (pane.cause or ""), 60, "progress to /health")
        assert opened == ["baseline"] and app.servers.alone_open == "baseline"
        assert app.servers.launcher is not None and base in app.servers.launcher.servers  # quitting stops it
        flag.write_text("")  # the server dies before it is ready
        with pytest.raises(ServerError, match="exited with status 3"):
            await task
        assert pane.state == "done" and app.servers.alone_open is None and "baseline" not in app.servers.pids
        assert base.proc is not None and base.proc.poll() is not None and cand.proc is None
