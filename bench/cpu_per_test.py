"""CPU seconds per test: each test's own process plus every server and subprocess it started or shares.

The suite's time on a small machine is bound by CPU (mostly llama-server decoding), so cutting it starts
from where the CPU goes, not from wall times that move with the load:

    CPU_PER_TEST=/tmp/cpu.jsonl .venv/bin/python -m pytest -p bench.cpu_per_test tests/real/test_prove.py
    .venv/bin/python bench/cpu_per_test.py /tmp/cpu.jsonl        # per file, then per test, most first

Under pytest-xdist each worker appends its own lines to the file. A test's figure is its process's CPU
(resource.getrusage: itself and its reaped children) plus the CPU its live descendants (psutil) used
while it ran: a session server's start-up counts toward the first test that asks for it.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys

import psutil
import pytest

_ME = psutil.Process()


def _tree_cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
    for p in _ME.children(recursive=True):
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before = _tree_cpu()
    yield
    line = json.dumps({"id": item.nodeid, "cpu": round(_tree_cpu() - before, 3)})
    with open(os.environ.get("CPU_PER_TEST", "cpu-per-test.jsonl"), "a") as out:
        out.write(line + "\n")


def main(paths: list[str]) -> int:
    per_test: collections.Counter[str] = collections.Counter()
    per_file: collections.Counter[str] = collections.Counter()
    for path in paths:
        with open(path) as fh:
            for raw in fh:
                rec = json.loads(raw)
                per_test[rec["id"]] += rec["cpu"]
                per_file[rec["id"].split("::")[0]] += rec["cpu"]
    print(f"total {sum(per_test.values()):.1f} CPU-s over {len(per_test)} tests")
    for name, cpu in per_file.most_common(30):
        print(f"{cpu:8.1f}  {name}")
    print("-- tests")
    for name, cpu in per_test.most_common(30):
        print(f"{cpu:8.1f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["cpu-per-test.jsonl"]))
