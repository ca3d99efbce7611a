"""The machine the benchmarks ran on, in one line: CPU model, cores, and the time of a fixed pure-Python
loop (10 M additions, best of 3), so figures from two machines can be put side by side.
    python bench/calibrate.py
"""

from __future__ import annotations

import os
import platform
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


if __name__ == "__main__":
    print(
        f"machine: {cpu_model()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"10 M additions in a Python loop: {loop_seconds():.2f} s (best of 3)"
    )
