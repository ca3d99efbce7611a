"""Do the live panel's probes cost the server anything? A real llama-server, decode tok/s with the
panel's 1 Hz probes running (GET /slots for KV use, GET /metrics, GPU via NVML where present, host and
the server process through psutil) against without, runs interleaved (A B B A A B …), median of each.

The decode rate is the server's own (timings: (predicted_n − 1) / predicted_ms), so the client's own
work does not enter it. On a machine with two or more CPUs the server runs pinned to the first (one
thread) and this process, its probes included, on the others: another process's work landing on the
server's core moved single runs by ±7 % here, which buries a 1 % effect; pinned, what is left is the
server's own work, the probes' requests included. Each run with probes is paired with its neighbour
without (A B | B A | …); the ratio of each pair, their median and a bootstrap 95 % interval are printed.
Where that interval is wider than the effect sought, the probes' own cost is the sharper figure: the
server's CPU time over 200 back-to-back probe rounds, per round, which at 1 Hz bounds the share of the
server's time the probes take. The ratio of the two medians is printed last.
    python bench/probe_cost.py [--runs 10] [--tokens 256] [--no-pin]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402
import psutil  # noqa: E402

from spectui.backends.llamacpp import LlamaCppBackend  # noqa: E402
from spectui.machine import assets  # noqa: E402
from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv  # noqa: E402
from spectui.machine.probes import GPUProbe, ProcessProbe, host_sample  # noqa: E402

PROMPT = "Write a long story about a lighthouse keeper and the sea, with many details."


async def probe_loop(backend: LlamaCppBackend, pid: int, stop: asyncio.Event, count: list[int]) -> None:
    gpu, procs = GPUProbe(), ProcessProbe()
    host_sample()
    while not stop.is_set():
        await asyncio.to_thread(gpu.sample)  # the panel samples NVML and psutil in a thread
        await asyncio.to_thread(host_sample)
        await asyncio.to_thread(procs.sample, pid)
        await backend.kv_usage()  # GET /slots, as the panel's KV poll does
        await backend.client.get(backend.url + "/metrics")  # and the counters, as a vLLM panel polls them
        count[0] += 1
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except TimeoutError:
            pass


async def one(backend: LlamaCppBackend, tokens: int) -> float:
    body = {"prompt": PROMPT, "n_predict": tokens, "temperature": 0, "cache_prompt": False, "ignore_eos": True}
    r = await backend.client.post(backend.url + "/completion", json=body, timeout=600)
    t = r.json()["timings"]
    return (t["predicted_n"] - 1) / t["predicted_ms"] * 1000


async def main(runs: int, tokens: int, pin: bool) -> None:
    from spectui.core.stats import bootstrap_median

    found = assets.find_all()
    launcher = Launcher()
    s = launcher.add(ServerProcess("probe-cost", llama_server_argv(found.llama_server, found.model, 0)))
    s.argv[s.argv.index("--port") + 1] = str(s.port)
    cpus = sorted(os.sched_getaffinity(0))
    pin = pin and len(cpus) >= 2
    if pin:  # the server inherits CPU 0 at its start; this process moves to the others
        os.sched_setaffinity(0, {cpus[0]})
    try:
        launcher.start_all(120)
    finally:
        if pin:
            os.sched_setaffinity(0, set(cpus[1:]))
    print(f"server pinned to CPU {cpus[0]}, this process and its probes on {cpus[1:]}" if pin else "not pinned")
    try:
        async with httpx.AsyncClient() as client:
            backend = LlamaCppBackend(s.url, client)
            await backend.identify()
            await one(backend, 32)  # warm-up
            without, with_probes, pairs, samples = [], [], [], [0]
            for i in range(runs * 2):
                probed = (i % 4) in (1, 2)  # A B B A A B B A …: drift falls on both alike
                stop = asyncio.Event()
                task = asyncio.create_task(probe_loop(backend, s.pid, stop, samples)) if probed else None
                rate = await one(backend, tokens)
                stop.set()
                if task:
                    await task
                (with_probes if probed else without).append(rate)
                if i % 2:  # the pair (A B) or (B A) is complete
                    pairs.append(with_probes[-1] / without[-1])
                print(f"run {i + 1:2d} {'probes' if probed else 'none  '} {rate:7.1f} tok/s", flush=True)
            # the probes' own cost, measured where the run-to-run spread cannot hide it: the server's CPU
            # time over back-to-back probe rounds while it is idle, per round
            proc = psutil.Process(s.pid)
            rounds = 200
            c0, w0 = sum(proc.cpu_times()[:2]), time.perf_counter()
            for _ in range(rounds):
                await backend.kv_usage()
                await backend.client.get(backend.url + "/metrics")
            cpu_ms = (sum(proc.cpu_times()[:2]) - c0) / rounds * 1000
            wall_ms = (time.perf_counter() - w0) / rounds * 1000
    finally:
        launcher.stop_all()
    a, b = statistics.median(without), statistics.median(with_probes)
    spread = bootstrap_median(pairs)
    print(f"probe samples taken: {samples[0]}")
    print(
        f"runs without probes: {min(without):.1f}–{max(without):.1f} tok/s; with: {min(with_probes):.1f}–{max(with_probes):.1f}"
    )
    print(f"paired with/without ratios: median {spread.text('.4f')} (95 % bootstrap interval, {spread.n} pairs)")
    print(
        f"median decode tok/s without probes: {a:.1f} ({len(without)} runs), with 1 Hz probes: {b:.1f} ({len(with_probes)} runs)"
    )
    print(
        f"one probe round (GET /slots + GET /metrics): {cpu_ms:.3f} ms of the server's CPU, {wall_ms:.3f} ms "
        f"round trip ({rounds} rounds, server idle): at 1 Hz at most {cpu_ms / 10:.3f} % of one core's time"
    )
    print(f"with/without = {b / a:.4f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--no-pin", dest="pin", action="store_false", help="leave the server and this process unpinned")
    a = ap.parse_args()
    asyncio.run(main(a.runs, a.tokens, a.pin))
