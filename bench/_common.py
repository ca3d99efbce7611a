"""What the benchmarks share: the recorded stream, session files built from it, a measured child process
(wall time, time after imports, peak RSS) and a median with its spread."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT / "tests" / "data" / "llamacpp-b11434-draft-simple-fizzbuzz.sse"


def build_session(path: Path, tokens: int, prompts: int = 1, prompt_id: str = "bench") -> int:
    """A session file of `prompts` prompts, each with the recorded draft-simple stream repeated to `tokens`
    tokens on both sides, labelled as live, with each prompt's result line; returns the event records written."""
    from spectui.backends.labeller import LlamaCppLabeller
    from spectui.backends.recorded import load_payloads, repeat_stream
    from spectui.core.events import StreamStarted
    from spectui.core.figures import SideRecorder
    from spectui.core.runner import PromptResult
    from spectui.core.types import GenerationParams, ServerInfo
    from spectui.core.verdict import judge
    from spectui.store.prompts import single
    from spectui.store.session_writer import SessionWriter

    payloads = repeat_stream(load_payloads(DATA), tokens)
    w = SessionWriter(path)
    w.lines = _Discard()  # the writer keeps every line for a later save_as; a bench file needs none of them
    w.servers(
        {
            "baseline": ServerInfo("http://b", build="b11434-pypi", model="SmolLM2-135M-Instruct.Q4_1.gguf"),
            "candidate": ServerInfo("http://c", build="b11434-pypi", model="SmolLM2-135M-Instruct.Q4_1.gguf"),
        }
    )
    events = 0
    for n in range(prompts):
        prompt = single(f"{prompt_id} {n}")
        w.prompt(prompt, GenerationParams(max_tokens=tokens), "sequential")
        recs = {}
        for side in ("baseline", "candidate"):
            lab, rec = LlamaCppLabeller(), SideRecorder(side)
            t = w.base_ns
            evs = [StreamStarted(t, "x")]
            for obj in payloads:
                t += 1_000_000
                evs.extend(lab.feed(obj, t))
            for ev in evs:
                w.event(side, ev)
                rec.feed(ev)
            events += len(evs)
            recs[side] = rec
        r = PromptResult(prompt, recs["baseline"], recs["candidate"])
        r.verdict = judge(recs["baseline"], recs["candidate"], True)
        w.result(r)
        recs.clear()
    w.close()
    return events


class _Discard(list):
    def append(self, item) -> None:
        pass


# The measured command runs under this wrapper, which writes the seconds from its start (after the
# interpreter) to exit, those after the modules named in WARM were imported, and its own peak RSS
# (VmHWM). A parent's ru_maxrss for a child counts the pages the child shared with the parent at fork,
# so a big parent would inflate it (it did: 383 MB reported for a command that peaks at 175 MB alone).
WRAP = """
import atexit, importlib, runpy, sys, time
t0 = time.perf_counter()
out, warm, target = sys.argv[1], sys.argv[2], sys.argv[3]
for name in filter(None, warm.split(",")):
    importlib.import_module(name)
t1 = time.perf_counter()
def peak():
    t2 = time.perf_counter()
    kb = next((l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')), 'nan')
    open(out, 'w').write(f"{t2 - t0} {t2 - t1} {kb}")
atexit.register(peak)
sys.argv = sys.argv[3:]
runpy.run_module('spectui', run_name='__main__') if target == '-m' else runpy.run_path(target, run_name='__main__')
"""


@dataclass
class Run:
    wall: float  # spawn to exit, seconds
    inside: float  # the wrapper's start (interpreter up) to exit
    after_imports: float  # after the WARM modules were imported, to exit
    rss_mb: float  # the child's own peak RSS
    code: int


def child(argv: list[str], warm: tuple[str, ...] = (), stdout=subprocess.DEVNULL) -> Run:
    """Run `spectui …` (argv after -m spectui, as ["-m", "replay", …]) or a script as its own process."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as out:
        t0 = time.perf_counter()
        code = subprocess.run(
            [sys.executable, "-c", WRAP, out.name, ",".join(warm), *argv],
            stdout=stdout,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
        ).returncode
        wall = time.perf_counter() - t0
        fields = out.read().split()
    if len(fields) != 3:
        return Run(wall, float("nan"), float("nan"), float("nan"), code)
    return Run(wall, float(fields[0]), float(fields[1]), int(fields[2]) / 1024, code)


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    """'median (min–max, n runs)'."""
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}–{fmt.format(max(values))}, {len(values)} runs)"


def median(values: list[float]) -> float:
    return statistics.median(values)


def goal_line(n: str, what: str, ratio: float, limit: float, detail: str, at_most: bool = True) -> str:
    met = ratio <= limit if at_most else ratio >= limit
    sign = "≤" if at_most else "≥"
    return f"goal {n} {what}: ratio {ratio:.2f} (goal {sign} {limit:g}) → {'met' if met else 'NOT met'}; {detail}"
