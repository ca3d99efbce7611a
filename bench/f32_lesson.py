"""The verification-cost lesson, measured: the same weights in Q4_1 and F32, plain and with n-gram / lookup
speculation, and the three-way table every "faster" must carry (plain quantised rate, plain F32 rate,
speculative F32 rate).

    .venv/bin/python bench/f32_lesson.py [--prompts default] [--runs 2] [--max-tokens 128] [--threads 1]

On a CPU a batch of k tokens costs nearly k single steps in Q4_1 (dequantising is compute) but far less in
F32 (reading the weights is the cost, as on a GPU), so speculation that loses on Q4_1 can win on F32 —
while plain Q4_1 may still be faster than either. The F32 copy is `llama-quantize --allow-requantize
MODEL F32` (spectui setup makes it). Every server runs with one thread; the machine's load average
(os.getloadavg) is printed beside the figures, because this machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CANDIDATES = {
    "ngram-simple 3/8": [
        "--spec-type",
        "ngram-simple",
        "--spec-ngram-simple-size-n",
        "3",
        "--spec-ngram-simple-size-m",
        "8",
    ],
    "lookup (ngram-cache)": ["--spec-type", "ngram-cache"],
}


async def pair(server, base_model, cand_model, cand_extra, prompts, params, runs, threads):
    """Run the prompts on two servers started here (B C / C B interleaved); returns the results."""
    import httpx

    from spectui.backends.llamacpp import LlamaCppBackend
    from spectui.core.runner import connect, run_prompts
    from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv

    launcher = Launcher()
    try:
        specs = [
            ServerProcess("baseline", llama_server_argv(server, base_model, 0, threads=threads)),
            ServerProcess("candidate", llama_server_argv(server, cand_model, 0, threads=threads, extra=cand_extra)),
        ]
        for s in specs:
            launcher.add(s)
            s.argv[s.argv.index("--port") + 1] = str(s.port)
            await asyncio.to_thread(s.start)
        for s in specs:
            await asyncio.to_thread(s.wait_healthy, 120)
        async with httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10)) as client:
            b, c = (LlamaCppBackend(s.url, client) for s in specs)
            await connect(b, 120)
            await connect(c, 120)
            return await run_prompts(b, c, prompts, params, repeat=runs)
    finally:
        await asyncio.to_thread(launcher.stop_all)


def rates(results, side: str) -> float:
    vals = [getattr(r, side).figures.decode_tps for r in results if getattr(r, side).figures.decode_tps]
    return statistics.median(vals) if vals else float("nan")


def speedup(results):
    from spectui.core.stats import ratio_interval

    vals = [r.speedup for r in results if r.speedup]
    return ratio_interval(vals) if vals else None


async def main() -> int:
    from spectui.core.types import GenerationParams
    from spectui.machine import assets
    from spectui.store import prompts as prompt_sets

    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", default="default")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    found = assets.find_all()
    if not (found.llama_server and found.model and found.llama_quantize):
        print("run `spectui setup` first", file=sys.stderr)
        return 2
    q4 = found.model
    f32 = assets.ensure_f32(found.llama_quantize, q4, lambda m: print(m, file=sys.stderr))
    _, prompts = prompt_sets.load_set(args.prompts)
    params = GenerationParams(max_tokens=args.max_tokens, temperature=0.0, seed=42, cache_prompt=False)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores, shared)")
    base = await pair(found.llama_server, q4, f32, [], prompts, params, args.runs, args.threads)
    same = sum(1 for r in base if r.identical)
    print(f"plain {q4.name} vs plain {f32.name}: {same}/{len(base)} runs identical (same weights, other kernels)")
    q4_rate, f32_rate = rates(base, "baseline"), rates(base, "candidate")
    f32_vs_q4 = speedup(base)  # plain F32 / plain Q4_1, paired (B C / C B) in one session
    rows = []
    for name, extra in CANDIDATES.items():
        res = await pair(found.llama_server, f32, f32, extra, prompts, params, args.runs, args.threads)
        sp = speedup(res)
        ident = sum(1 for r in res if r.identical)
        acc = sum(r.candidate.figures.accepted for r in res)
        drafted = sum(r.candidate.figures.drafted for r in res)
        rows.append((name, rates(res, "baseline"), rates(res, "candidate"), sp, ident, len(res), acc, drafted))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print(
        f"{'candidate (on F32)':<22} {'plain Q4_1':>11} {'plain F32':>10} {'spec F32':>9}  {'F32 speed-up [95%]':<22} "
        f"{'vs plain Q4_1':>13}  accepted  identical"
    )
    for name, f32_plain, spec, sp, ident, n, acc, drafted in rows:
        ci = f"{sp.median:.2f}× [{sp.low:.2f}–{sp.high:.2f}]" if sp and sp.low is not None else "—"
        # spec F32 / plain Q4_1 as the product of two paired ratios (each measured B C / C B in its own
        # session), not of rates taken minutes apart on a shared machine
        chained = sp.median * f32_vs_q4.median if sp and f32_vs_q4 else float("nan")
        print(
            f"{name:<22} {q4_rate:>9.1f}/s {f32_plain:>8.1f}/s {spec:>7.1f}/s  {ci:<22} {chained:>12.2f}×  "
            f"{acc}/{drafted}  {ident}/{n}"
        )
    if f32_vs_q4 and f32_vs_q4.low is not None:
        print(f"plain F32 / plain Q4_1, paired: {f32_vs_q4.median:.2f}× [{f32_vs_q4.low:.2f}–{f32_vs_q4.high:.2f}]")
    print(
        f"(rates: median decode tok/s of the server's timings over {len(prompts)} prompts × {args.runs} runs; "
        f"plain Q4_1 from the first pair, whose plain F32 ran at {f32_rate:.1f}/s; 'vs plain Q4_1' = the F32 "
        "speed-up × the paired F32/Q4_1 ratio)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
