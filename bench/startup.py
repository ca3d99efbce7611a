"""Start-up: `spectui --help` wall time, and the TUI's first frame against a bare Textual app with the
same skeleton (a header, two bordered panes of text, an input, a footer; no spectui imports), each a
fresh process, measured in the same run with the same ready hook: the first screen update Textual
makes (App._display with something to show) under App.run_test, timed from the spawn. The
goal: spectui's ≤ 1.5× the bare app's.

spectui's app is pointed at two running llama-servers where `spectui setup` has built them (it also
reports when both panes are connected), else at two closed ports (the first frame does not wait for
either). Runs are interleaved; medians with their spread.
    python bench/startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, goal_line, median, spread  # noqa: E402

HELP_GOAL = 0.3
FRAME_GOAL = 1.5

READY = """
import asyncio, time
FIRST = []
_display = app._display
def _first_display(screen, renderable):  # the first screen update Textual makes: the first frame
    if renderable is not None and not FIRST:
        FIRST.append(time.time() - SPAWN)
    _display(screen, renderable)
app._display = _first_display
async def go():
    async with app.run_test(size=(160, 48)) as pilot:
        while not FIRST:
            await asyncio.sleep(0.001)
        connected = float("nan")
        if WAIT_CONNECTED:
            while not all(app.pane(s).state in ("ready", "failed") for s in ("baseline", "candidate")):
                await pilot.pause(0.01)
            connected = time.time() - SPAWN
        print(FIRST[0], connected)
asyncio.run(go())
"""

BARE = """
from textual.app import App
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Header, Input, Log, Static

class Bare(App):
    CSS = "Vertical { border: round $primary; } #prompt { height: 3; }"

    def compose(self):
        yield Header()
        yield Input(placeholder="type a prompt", id="prompt")
        with Horizontal():
            for side in ("baseline", "candidate"):
                with Vertical():
                    yield Static(side)
                    yield Static("connecting")
                    yield Log()
        yield Static("waiting for a prompt")
        yield Footer()

app = Bare()
WAIT_CONNECTED = False
"""

SPECTUI = """
from spectui.core.types import GenerationParams
from spectui.tui.app import AppConfig, make_app
app = make_app(AppConfig({b!r}, {c!r}, params=GenerationParams(), autosave=False))
WAIT_CONNECTED = {wait}
"""


def help_times(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "spectui", "--help"], capture_output=True, check=True, cwd=ROOT)
        times.append(time.perf_counter() - t0)
    return times


def first_frame(setup: str) -> tuple[float, float]:
    code = f"SPAWN = {time.time()!r}\n{setup}\n{READY}"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, timeout=120
    )
    first, connected = out.stdout.split()[-2:]
    return float(first), float(connected)


def servers():
    """Two llama-servers where spectui setup built them; (urls, launcher) or None."""
    try:
        from spectui.machine import assets
        from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv

        found = assets.find_all()
        launcher = Launcher()
        procs = []
        for name in ("a", "b"):
            s = launcher.add(ServerProcess(name, llama_server_argv(found.llama_server, found.model, 0)))
            s.argv[s.argv.index("--port") + 1] = str(s.port)
            procs.append(s)
        launcher.start_all(120)
        return [p.url for p in procs], launcher
    except Exception as exc:  # no built llama-server here: closed ports instead
        print(f"(no llama-servers: {exc}; spectui's panes point at closed ports)")
        return None


def main(runs: int) -> None:
    h = help_times(runs)
    print(f"spectui --help: {spread(h, '{:.3f}')} s")
    print(goal_line("5", "spectui --help / 0.3 s", median(h) / HELP_GOAL, 1.0, f"median {median(h):.3f} s"))
    started = servers()
    urls = started[0] if started else ["http://127.0.0.1:9", "http://127.0.0.1:9"]
    spectui_setup = SPECTUI.format(b=urls[0], c=urls[1], wait=started is not None)
    bare, ours, connected = [], [], []
    try:
        for _ in range(runs):  # interleaved: a busy moment of the machine falls on both
            bare.append(first_frame(BARE)[0])
            f, c = first_frame(spectui_setup)
            ours.append(f)
            connected.append(c)
    finally:
        if started:
            started[1].stop_all()
    print(f"bare Textual skeleton, first frame: {spread(bare, '{:.3f}')} s from spawn")
    print(f"spectui TUI, first frame:           {spread(ours, '{:.3f}')} s from spawn")
    if started:
        print(f"spectui TUI, both panes connected:  {spread(connected, '{:.3f}')} s from spawn")
    ratio = median(ours) / median(bare)
    print(
        goal_line(
            "3",
            "first frame, spectui / bare Textual",
            ratio,
            FRAME_GOAL,
            f"{median(ours):.3f} s / {median(bare):.3f} s",
        )
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    main(ap.parse_args().runs)
