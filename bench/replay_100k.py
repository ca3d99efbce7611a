"""Replay a 100,000-token session as fast as possible, headless: time and memory.

Builds a session file from a recorded llama-server stream (draft-simple, labelled as live) repeated to
N tokens per side, then (1) loads it and rebuilds both sides' figures and the comparison, as
`spectui replay --no-tui` does, and (2) plays it through the TUI with App.run_test() at max speed.
    python bench/replay_100k.py [--tokens 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spectui.backends.labeller import LlamaCppLabeller  # noqa: E402
from spectui.backends.recorded import load_payloads, repeat_stream  # noqa: E402
from spectui.core.types import GenerationParams, ServerInfo  # noqa: E402
from spectui.machine.probes import GPUProbe, HostSample  # noqa: E402
from spectui.store.prompts import single  # noqa: E402
from spectui.store.replay import ReplayControl, SessionBackend  # noqa: E402
from spectui.store.session import SessionWriter, load_session, recorders_for  # noqa: E402
from spectui.tui.app import AppConfig, make_app  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "llamacpp-b11434-draft-simple-fizzbuzz.sse"


def build(path: Path, tokens: int) -> None:
    payloads = repeat_stream(load_payloads(DATA), tokens)
    w = SessionWriter(path)
    w.servers(
        {
            "baseline": ServerInfo("http://b", build="b11434-pypi"),
            "candidate": ServerInfo("http://c", build="b11434-pypi"),
        }
    )
    w.prompt(single("bench"), GenerationParams(max_tokens=tokens), "sequential")
    for side in ("baseline", "candidate"):
        lab = LlamaCppLabeller()
        t = w.base_ns
        for obj in payloads:
            t += 1_000_000
            for ev in lab.feed(obj, t):
                w.event(side, ev)
    w.close()


async def tui_replay(path: Path) -> tuple[float, int]:
    session = load_session(path)
    control = ReplayControl(None)
    cfg = AppConfig(
        "http://b",
        "http://c",
        prompts=[p.prompt for p in session.prompts],
        backends={s: SessionBackend(s, session, None, control) for s in ("baseline", "candidate")},
        replay_control=control,
        autorun_all=True,
        autosave=False,
        gpu_probe=GPUProbe(type("NoNVML", (), {"nvmlInit": lambda self: (_ for _ in ()).throw(RuntimeError())})()),
        host_probe=lambda: HostSample(2, 0.0, 1, 2),
    )
    app = make_app(cfg)
    t0 = time.perf_counter()
    async with app.run_test(size=(160, 50)) as pilot:
        while not (app.results and app.run_done.is_set()):
            await pilot.pause(0.01)
        elapsed = time.perf_counter() - t0
        n = len(app.pane("candidate").view.tokens)
    return elapsed, n


# The measured command runs under this wrapper, which writes its own peak RSS (VmHWM) at exit. A
# parent's ru_maxrss for a child counts the pages the child shared with the parent at fork, so a big
# parent would inflate it (it did: 383 MB reported for a command that peaks at 175 MB on its own).
WRAP = """
import atexit, runpy, sys
out, target = sys.argv[1], sys.argv[2]
def peak():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM:'):
            open(out, 'w').write(line.split()[1])
atexit.register(peak)
sys.argv = sys.argv[2:]
runpy.run_module('spectui', run_name='__main__') if target == '-m' else runpy.run_path(target, run_name='__main__')
"""


def child(argv: list[str]) -> tuple[float, float, int]:
    """Run `spectui …` (argv after -m spectui) or a script as its own process: (wall s, its peak RSS MB, exit)."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as out:
        t0 = time.perf_counter()
        code = subprocess.run(
            [sys.executable, "-c", WRAP, out.name, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        ).returncode
        wall = time.perf_counter() - t0
        kb = out.read().strip()
    return wall, (int(kb) / 1024 if kb else float("nan")), code


def main(tokens: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "big.jsonl"
        build(path, tokens)
        size = path.stat().st_size
        t0 = time.perf_counter()
        session = load_session(path)
        b, c, div = recorders_for(session.prompts[0])
        t_load = time.perf_counter() - t0
        del session, b
        tracemalloc.start()  # a second, traced pass for memory (tracing slows it down, so it is not timed)
        s2 = load_session(path)
        recorders_for(s2.prompts[0])
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del s2
        print(f"session: {tokens} tokens per side, {size / 1e6:.1f} MB on disk")
        print(
            f"load + rebuild figures + compare (replay --no-tui): {t_load:.2f} s, "
            f"{2 * tokens / t_load:,.0f} events/s, peak Python memory {peak / 1e6:.0f} MB; "
            f"identical={div is None}, candidate acceptance {c.figures.acceptance_rate:.0%}"
        )
        wall, rss, code = child(["-m", "replay", str(path), "--no-tui", "--json"])
        print(
            f"`spectui replay --no-tui --json` as its own process: {wall:.2f} s wall, max RSS {rss:.0f} MB (exit {code})"
        )
        wall, rss, code = child([__file__, "--tui-only", str(path)])
        print(f"TUI replay as its own process: {wall:.2f} s wall, max RSS {rss:.0f} MB (exit {code})")
        t_tui, n = asyncio.run(tui_replay(path))
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"TUI replay at max speed: {t_tui:.2f} s for {n} candidate tokens shown "
            f"({2 * tokens / t_tui:,.0f} tokens/s across both panes); this benchmark process (which also built and "
            f"loaded the session) peaked at {rss:.0f} MB"
        )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=100_000)
    ap.add_argument("--tui-only", metavar="SESSION", help=argparse.SUPPRESS)  # the measured child process
    a = ap.parse_args()
    if a.tui_only:
        asyncio.run(tui_replay(Path(a.tui_only)))
    else:
        main(a.tokens)
