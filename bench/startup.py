"""Start-up: `spectui --help` wall time (a fresh process, repeated), and the TUI's first frame on two
running llama-servers, measured with the app's own ready hook (App.run_test's on-mount, then the first
refresh), repeated. Prints medians, and their ratio to the targets (1 s, 0.3 s) last.
    python bench/startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def help_time(runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "spectui", "--help"], capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def first_frame(runs: int) -> tuple[float, float]:
    """Seconds from spawning a fresh process that opens the TUI on two running servers to its first
    frame (the first refresh after mount, through App.run_test), and to both panes connected."""
    from spectui.machine import assets
    from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv

    found = assets.find_all()
    launcher = Launcher()
    servers = []
    for name in ("a", "b"):
        s = launcher.add(ServerProcess(name, llama_server_argv(found.llama_server, found.model, 0)))
        s.argv[s.argv.index("--port") + 1] = str(s.port)
        servers.append(s)
    launcher.start_all(120)
    frames, ready = [], []
    try:
        for _ in range(runs):
            code = (
                "import sys, time\n"
                "from spectui.tui.app import AppConfig, make_app\n"
                "from spectui.core.types import GenerationParams\n"
                f"app = make_app(AppConfig({servers[0].url!r}, {servers[1].url!r}, params=GenerationParams(), autosave=False))\n"
                "async def go():\n"
                "    async with app.run_test(size=(160, 48)) as pilot:\n"
                "        await pilot.pause()\n"
                "        first = time.time() - SPAWN\n"
                "        while not all(app.pane(s).state in ('ready', 'failed') for s in ('baseline', 'candidate')):\n"
                "            await pilot.pause(0.01)\n"
                "        print(first, time.time() - SPAWN)\n"
                "import asyncio; asyncio.run(go())\n"
            )
            t0 = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-c", f"SPAWN = {time.time()!r}\n{code}"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            spent = time.perf_counter() - t0
            f, r = float(out[-2]), float(out[-1])
            frames.append(f)
            ready.append(r)
            print(f"first frame {f:.3f} s, both panes connected {r:.3f} s (process wall {spent:.2f} s)", flush=True)
    finally:
        launcher.stop_all()
    return statistics.median(frames), statistics.median(ready)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    h = help_time(a.runs)
    f, r = first_frame(a.runs)
    print(f"spectui --help: median {h:.3f} s over {a.runs} runs (target 0.3 s)")
    print(f"spectui tui first frame: median {f:.3f} s from process spawn; both panes connected {r:.3f} s")
    print(f"first frame / 1 s target = {f / 1.0:.3f}; --help / 0.3 s target = {h / 0.3:.3f}")
