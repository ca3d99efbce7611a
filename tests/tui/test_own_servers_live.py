"""Your own servers in the TUI, against real llama-server processes that the app
did not launch: the live panel finds each by its port (PID, RSS), and a q4_0-KV candidate's pane names its
KV types from the process's command line after a run, where it read "no speculation" like the baseline."""

from __future__ import annotations

import psutil
import pytest

from spectui.core.types import GenerationParams
from spectui.machine.probes import GPUProbe
from spectui.tui.app import AppConfig, make_app
from tests.pilot import ready, until

pytestmark = pytest.mark.server


class NoNVML:
    def nvmlInit(self):
        raise RuntimeError("NVML Shared Library Not Found")


def _server_pid(url: str) -> int:
    port = int(url.rsplit(":", 1)[1])
    return next(c.pid for c in psutil.net_connections("tcp") if c.status == "LISTEN" and c.laddr.port == port)


async def test_servers_spectui_did_not_launch_show_pid_rss_and_kv_types(llama_servers):
    base, cand = llama_servers["baseline"], llama_servers["kvq4"]
    cfg = AppConfig(
        base,
        cand,
        params=GenerationParams(max_tokens=16, cache_prompt=False),
        gpu_probe=GPUProbe(NoNVML()),
        autosave=False,
        probe_interval=0.2,
    )
    app = make_app(cfg)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot, app)
        live = app.query_one("#live-text")
        pids = {side: _server_pid(url) for side, url in (("baseline", base), ("candidate", cand))}
        await until(pilot, lambda: f"PID {pids['candidate']} (by port)" in str(live.render()), 30, "the PIDs")
        text = str(live.render())
        assert "not a local process" not in text
        assert f"PID {pids['baseline']} (by port) RSS" in text
        await pilot.click("#prompt")
        await pilot.press(*"What is 2+2?")
        await pilot.press("enter")
        await until(pilot, lambda: app.run_done.is_set() and app.results, 120, "the run to finish")
        header = str(app.query_one("#header-candidate").render())
        assert "kv q4_0/q4_0" in header
        assert "kv f16/f16" in str(app.query_one("#header-baseline").render())
