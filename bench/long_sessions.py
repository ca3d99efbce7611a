"""Long sessions, each a ratio measured in the same run:

1. a 1,000,000-event session replays headless (`spectui replay FILE --no-tui --json`) in ≤ 2× the time
   of ten 100,000-event ones, at ≤ 250 MB peak RSS. Times are the replay's own, from after the modules
   it needs are imported to exit (ten processes would otherwise count ten interpreter start-ups
   against the one); each process's wall time is printed too.
2. `spectui sessions` over a folder of that file and 100 small sessions takes ≤ 1.2× the time of the
   100 small ones alone (each its own process, wall time: what the user waits for).

Sessions are the recorded draft-simple llama-server stream repeated (labelled as live, with result
records); an event is one record of the stream (a token, a verification step, start, finish).
    python bench/long_sessions.py [--events 1000000] [--runs 3]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import build_session, child, goal_line, median, spread  # noqa: E402

TIME_GOAL = 2.0
RSS_LIMIT_MB = 250
LIST_GOAL = 1.2
# what `spectui replay` imports before it reads the file: timed apart from the replay itself
WARM = ("spectui.cli.main", "spectui.cli.compare", "spectui.store.session", "spectui.core.report")
EVENTS_PER_TOKEN = 249_182 / 200_000  # this stream: tokens, steps, start and finish, both sides


def tokens_for(events: int) -> int:
    return round(events / EVENTS_PER_TOKEN / 2)


def replay(path: Path):
    return child(["-m", "replay", str(path), "--no-tui", "--json"], warm=WARM)


def main(events: int, runs: int, small: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        big = root / "big" / "session-big.jsonl"
        big.parent.mkdir()
        n_big = build_session(big, tokens_for(events))
        tens = []
        for k in range(10):
            p = root / "tens" / f"session-{k}.jsonl"
            p.parent.mkdir(exist_ok=True)
            tens.append((p, build_session(p, tokens_for(events // 10), prompt_id=f"ten {k}")))
        smalls = root / "small"
        smalls.mkdir()
        for k in range(small):
            build_session(smalls / f"session-{k:03}.jsonl", 200, prompt_id=f"small {k}")
        mixed = root / "mixed"
        shutil.copytree(smalls, mixed)
        shutil.copy(big, mixed / big.name)
        print(
            f"sessions: one of {n_big:,} events ({big.stat().st_size / 1e6:.0f} MB); ten of "
            f"{sum(n for _, n in tens):,} events in all; {small} small ones of "
            f"{sum(p.stat().st_size for p in smalls.iterdir()) / 1e6:.1f} MB in all"
        )

        one, ten, rss = [], [], []
        for _ in range(runs):  # interleaved, so a busy moment of the machine falls on both
            r = replay(big)
            one.append(r)
            rss.append(r.rss_mb)
            ten.append([replay(p) for p, _ in tens])
        bad = {r.code for r in one} | {r.code for rs in ten for r in rs}
        if bad != {0}:
            print(f"warning: a replay exited with {bad}")
        t_one = [r.after_imports for r in one]
        t_ten = [sum(r.after_imports for r in rs) for rs in ten]
        print(
            f"replay of the 1,000,000-event session: {spread(t_one)} s after imports "
            f"(process wall {spread([r.wall for r in one])} s), peak RSS {spread(rss, '{:.0f}')} MB"
        )
        print(
            f"replay of the ten 100,000-event sessions: {spread(t_ten)} s after imports in all "
            f"(process walls {spread([sum(r.wall for r in rs) for rs in ten])} s in all), peak RSS of each "
            f"{spread([max(r.rss_mb for r in rs) for rs in ten], '{:.0f}')} MB"
        )
        print(
            goal_line(
                "4",
                "1,000,000-event replay / ten 100,000-event replays",
                median(t_one) / median(t_ten),
                TIME_GOAL,
                f"{median(t_one):.2f} s / {median(t_ten):.2f} s",
            )
        )
        print(
            goal_line(
                "4",
                f"its peak RSS / {RSS_LIMIT_MB} MB",
                median(rss) / RSS_LIMIT_MB,
                1.0,
                f"{median(rss):.0f} MB",
            )
        )

        alone, both = [], []
        for _ in range(runs):
            alone.append(child(["-m", "sessions", str(smalls)]).wall)
            both.append(child(["-m", "sessions", str(mixed)]).wall)
        print(f"`spectui sessions` over the {small} small sessions: {spread(alone)} s")
        print(f"`spectui sessions` over those and the 1,000,000-event one: {spread(both)} s")
        print(
            goal_line(
                "4",
                f"sessions listing, with the big file / {small} small alone",
                median(both) / median(alone),
                LIST_GOAL,
                f"{median(both):.2f} s / {median(alone):.2f} s",
            )
        )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--small", type=int, default=100)
    a = ap.parse_args()
    main(a.events, a.runs, a.small)
