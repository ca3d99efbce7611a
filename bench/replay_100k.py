"""Replay: the TUI's replay of a 100,000-token session against the headless replay's, each its own
process, measured in the same run (wall time ≤ 1.5×, peak RSS ≤ 1.3×).

The session is the recorded draft-simple llama-server stream repeated to N tokens a side (labelled as a
live run labels it, with its result record). Headless: `spectui replay FILE --no-tui --json` (load, the
figures and verdict rebuilt from the events, the report). TUI: a process that loads the same file and
plays it through the app at max speed (App.run_test, as the other TUI benchmarks), start-up to exit.
Each is run --runs times, interleaved; medians with their spread, and the ratio of the medians.
    python bench/replay_100k.py [--tokens 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import build_session, child, goal_line, median, spread  # noqa: E402

WALL_GOAL = 1.5
RSS_GOAL = 1.3


async def tui_replay(path: Path) -> tuple[float, int]:
    from spectui.machine.probes import GPUProbe, HostSample
    from spectui.store.replay import ReplayControl, SessionBackend
    from spectui.store.session import load_session
    from spectui.tui.app import AppConfig, make_app

    class NoNVML:
        def nvmlInit(self):
            raise RuntimeError("no NVML in the benchmark")

    session = load_session(path)
    control = ReplayControl(None)
    cfg = AppConfig(
        session.infos["baseline"].url,
        session.infos["candidate"].url,
        params=session.prompts[0].params,
        order=session.prompts[0].order,
        prompts=[p.prompt for p in session.prompts],
        backends={s: SessionBackend(s, session, None, control) for s in ("baseline", "candidate")},
        replay_control=control,
        autorun_all=True,
        autosave=False,
        gpu_probe=GPUProbe(NoNVML()),
        host_probe=lambda: HostSample(2, 0.0, 1, 2),
    )
    app = make_app(cfg)
    t0 = time.perf_counter()
    async with app.run_test(size=(160, 50)):
        while not (app.results and app.run_done.is_set()):
            await asyncio.sleep(0.01)  # not pilot.pause: it waits on every widget, a cost the app has not
        elapsed = time.perf_counter() - t0
        n = len(app.pane("candidate").view.tokens)
    return elapsed, n


def main(tokens: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "big.jsonl"
        events = build_session(path, tokens)
        print(f"session: {tokens:,} tokens a side, {events:,} events, {path.stat().st_size / 1e6:.1f} MB on disk")
        headless, tui = [], []
        for _ in range(runs):  # interleaved, so a busy moment of the machine falls on both
            headless.append(child(["-m", "replay", str(path), "--no-tui", "--json"]))
            tui.append(child([__file__, "--tui-only", str(path)]))
        for name, rs in (("headless `spectui replay --no-tui --json`", headless), ("TUI replay at max speed", tui)):
            codes = {r.code for r in rs}
            print(
                f"{name}: wall {spread([r.wall for r in rs])} s, peak RSS {spread([r.rss_mb for r in rs], '{:.0f}')} MB"
                + (f" (exit {codes})" if codes != {0} else "")
            )
        wall = median([r.wall for r in tui]) / median([r.wall for r in headless])
        rss = median([r.rss_mb for r in tui]) / median([r.rss_mb for r in headless])
        walls = f"{median([r.wall for r in tui]):.2f} s / {median([r.wall for r in headless]):.2f} s"
        rsss = f"{median([r.rss_mb for r in tui]):.0f} MB / {median([r.rss_mb for r in headless]):.0f} MB"
        print(goal_line("2", "replay wall time, TUI / headless", wall, WALL_GOAL, walls))
        print(goal_line("2", "replay peak RSS, TUI / headless", rss, RSS_GOAL, rsss))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tui-only", metavar="SESSION", help=argparse.SUPPRESS)  # the measured child process
    a = ap.parse_args()
    if a.tui_only:
        elapsed, shown = asyncio.run(tui_replay(Path(a.tui_only)))
        if not shown:
            raise SystemExit("the TUI showed no tokens")
    else:
        main(a.tokens, a.runs)
