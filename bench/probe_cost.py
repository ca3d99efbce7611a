"""Do the live panel's probes cost the server anything? A real llama-server, decode tok/s with the
panel's 1 Hz probes running (GET /slots for KV use, GPU via NVML where present, host and the server
process through psutil) against without, runs interleaved (A B B A A B …), median of each.

The decode rate is the server's own (timings: (predicted_n − 1) / predicted_ms), so the client's own
work does not enter it. Prints both medians and their ratio last.
    python bench/probe_cost.py [--runs 7] [--tokens 256]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402

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


async def main(runs: int, tokens: int) -> None:
    found = assets.find_all()
    launcher = Launcher()
    s = launcher.add(ServerProcess("probe-cost", llama_server_argv(found.llama_server, found.model, 0)))
    s.argv[s.argv.index("--port") + 1] = str(s.port)
    await asyncio.to_thread(launcher.start_all, 120)
    try:
        async with httpx.AsyncClient() as client:
            backend = LlamaCppBackend(s.url, client)
            await backend.identify()
            await one(backend, 32)  # warm-up
            without, with_probes, samples = [], [], [0]
            for i in range(runs * 2):
                probed = (i % 4) in (1, 2)  # A B B A A B B A …: drift falls on both alike
                stop = asyncio.Event()
                task = asyncio.create_task(probe_loop(backend, s.pid, stop, samples)) if probed else None
                rate = await one(backend, tokens)
                stop.set()
                if task:
                    await task
                (with_probes if probed else without).append(rate)
                print(f"run {i + 1:2d} {'probes' if probed else 'none  '} {rate:7.1f} tok/s", flush=True)
    finally:
        launcher.stop_all()
    a, b = statistics.median(without), statistics.median(with_probes)
    print(f"probe samples taken: {samples[0]}")
    print(
        f"median decode tok/s without probes: {a:.1f} ({len(without)} runs), with 1 Hz probes: {b:.1f} ({len(with_probes)} runs)"
    )
    print(f"with/without = {b / a:.4f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--tokens", type=int, default=256)
    a = ap.parse_args()
    asyncio.run(main(a.runs, a.tokens))
