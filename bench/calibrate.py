"""The machine the benchmarks ran on, in one line: CPU model, cores, and the time of a fixed pure-Python
loop (10 M additions, best of 3), so figures from two machines can be put side by side; and, where
`spectui setup` has built llama-server, a second line: the rate at which it decodes the bundled SmolLM2
(Q4_1, one thread, 128 tokens at temperature 0, best of 3) — the work the real-server tests and most
benchmarks spend their time on, which moves between hosts of the same kind more than the Python loop does.
    python bench/calibrate.py              # both lines (starts and stops one llama-server of its own)
    python bench/calibrate.py --no-server  # the first line only
"""

from __future__ import annotations

import os
import platform
import sys
import time


def loop_seconds(n: int = 10_000_000) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        s = 0
        for i in range(n):
            s += i
        best = min(best, time.perf_counter() - t0)
    return best


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


THREADS = 1  # as the real-server tests launch it


def decode_rate(runs: int = 3, tokens: int = 128) -> str:
    """llama-server's own predicted_per_second for the bundled model on one thread, or why there is none."""
    import httpx

    from spectui.machine import assets
    from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv

    found = assets.find_all()
    if not (found.llama_server and found.model):
        return "llama-server decoding: not measured (llama-server or the model is not set up: `spectui setup`)"
    prompt = "<|im_start|>user\nTell me a long story about a lighthouse keeper.<|im_end|>\n<|im_start|>assistant\n"
    body = {"prompt": prompt, "n_predict": tokens, "temperature": 0, "cache_prompt": False, "ignore_eos": True}
    with Launcher() as launcher:
        s = launcher.add(
            ServerProcess("calibrate", llama_server_argv(found.llama_server, found.model, 0, threads=THREADS))
        )
        s.argv[s.argv.index("--port") + 1] = str(s.port)
        launcher.start_all(timeout=120)
        rates = []
        for _ in range(runs):
            timings = httpx.post(s.url + "/completion", json=body, timeout=300).json()["timings"]
            rates.append(timings["predicted_per_second"])
    return (
        f"llama-server decoding {found.model.name}, {THREADS} thread, {tokens} tokens: {max(rates):.0f} tok/s "
        f"(the server's own timings, best of {runs}; {', '.join(f'{r:.0f}' for r in rates)})"
    )


if __name__ == "__main__":
    print(
        f"machine: {cpu_model()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"10 M additions in a Python loop: {loop_seconds():.2f} s (best of 3)"
    )
    if "--no-server" not in sys.argv[1:]:
        print(decode_rate())
