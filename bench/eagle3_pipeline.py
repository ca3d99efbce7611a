"""The EAGLE-3 lesson end to end on this CPU, every figure printed: data written by the target → a head
trained in the torch environment → converted by llama.cpp → served with --spec-type draft-eagle3 →
`spectui prove` on the held-out prompts (the certificate's verdict line).

    .venv/bin/python bench/eagle3_pipeline.py -o DIR [--prompts bench/eagle3_prompts.toml] [--epochs 8]
        [--draft-vocab 8192] [--max-tokens 128] [--holdout 0.1] [--f32] [--n-max 3] [--prove-n-max 1]
        [--prove-runs 3]

--f32 serves the target's F32 copy (the same weights; verification nearly free on this CPU) in the check
and the proof; the features always come from the GGUF given by --target (default: spectui's SmolLM2 Q4_1).
A rerun with the same -o reuses the data (resumable), the features and the checkpoint.
--n-max is the check's draft length (a probe: the acceptance at each position it prints does not depend on
how many positions follow); --prove-n-max the one proven, chosen from those shares and the head's measured
cost (`spectui drafts lesson` chooses it itself; labs/theory/draft_length.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


async def write_data(server, model, prompts_path, out, max_tokens, holdout, threads):
    import httpx

    from spectui.backends.llamacpp import LlamaCppBackend
    from spectui.core.runner import connect
    from spectui.core.types import GenerationParams
    from spectui.labs.drafts import data as drafts_data
    from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv
    from spectui.store import prompts as prompt_sets

    source, items = prompt_sets.load_set(str(prompts_path))
    launcher = Launcher()
    try:
        s = launcher.add(ServerProcess("plain", llama_server_argv(server, model, 0, threads=threads)))
        s.argv[s.argv.index("--port") + 1] = str(s.port)
        await asyncio.to_thread(s.start)
        await asyncio.to_thread(s.wait_healthy, 120)
        async with httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10)) as client:
            b = LlamaCppBackend(s.url, client)
            await connect(b, 120)
            params = GenerationParams(max_tokens=max_tokens, temperature=0.0, seed=42, cache_prompt=False)
            return await drafts_data.generate(b, items, out, "speculators", params, holdout, source)
    finally:
        await asyncio.to_thread(launcher.stop_all)


def prove(server, model, head, n_max, heldout, out, runs, max_tokens, threads) -> list[str]:
    """spectui prove on the held-out prompts against servers started here; returns its text output."""
    from spectui.labs.drafts.train_eagle3 import eagle3_extra
    from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv

    launcher = Launcher()
    try:
        specs = [
            ServerProcess("plain", llama_server_argv(server, model, 0, threads=threads)),
            ServerProcess(
                "eagle3", llama_server_argv(server, model, 0, threads=threads, extra=eagle3_extra(head, n_max))
            ),
        ]
        for s in specs:
            launcher.add(s)
            s.argv[s.argv.index("--port") + 1] = str(s.port)
            s.start()
        for s in specs:
            s.wait_healthy(120)
        argv = [str(ROOT / ".venv" / "bin" / "spectui"), "prove", "--baseline", specs[0].url, "--candidate"]
        argv += [specs[1].url, "--prompts", str(heldout), "--runs", str(runs), "--sampled", "0", "--no-notebook"]
        argv += ["--max-tokens", str(max_tokens), "-o", str(out)]
        r = subprocess.run(argv, capture_output=True, text=True)
        return (r.stdout + r.stderr).splitlines()
    finally:
        launcher.stop_all()


def main() -> int:
    from spectui.labs.drafts import data as drafts_data
    from spectui.labs.drafts.train_eagle3 import Options, run_pipeline
    from spectui.machine import assets

    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--prompts", default=str(ROOT / "bench" / "eagle3_prompts.toml"))
    ap.add_argument("--target", help="GGUF (default: spectui's SmolLM2 Q4_1)")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--draft-vocab", type=int, default=8192)
    ap.add_argument("--ttt", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--holdout", type=float, default=0.1)
    ap.add_argument("--f32", action="store_true", help="serve the F32 copy in the check and the proof")
    ap.add_argument("--n-max", type=int, default=3)
    ap.add_argument("--prove-n-max", type=int, help="the draft length proven (default: --n-max)")
    ap.add_argument("--prove-runs", type=int, default=3)
    args = ap.parse_args()
    found = assets.find_all()
    if not (found.llama_server and found.model and found.llama_quantize):
        print("run `spectui setup` (and `spectui setup --vllm` for torch)", file=sys.stderr)
        return 2
    target = Path(args.target) if args.target else found.model
    served = assets.ensure_f32(found.llama_quantize, target) if args.f32 else target
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = out / "data.jsonl"
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores, shared)")
    t0 = time.monotonic()
    d = asyncio.run(write_data(found.llama_server, target, args.prompts, data, args.max_tokens, args.holdout, 1))
    print(
        f"[data] {time.monotonic() - t0:.0f} s: {d.train_total} training prompts answered ({d.written} now), "
        f"{d.tokens} new answer tokens, {d.heldout_count} held out → {d.heldout}"
    )
    opts = Options(
        target,
        data,
        out / "head",
        draft_vocab=args.draft_vocab,
        ttt=args.ttt,
        epochs=args.epochs,
        serve_model=served,
        n_max=args.n_max,
        max_tokens=args.max_tokens,
    )
    outcome = asyncio.run(run_pipeline(opts, say=lambda m: print(f"  {m}", file=sys.stderr)))
    print(outcome.text())
    print("[phases] " + ", ".join(f"{k} {v:.0f} s" for k, v in outcome.seconds.items()))
    t1 = time.monotonic()
    lines = prove(
        found.llama_server,
        served,
        outcome.gguf,
        args.prove_n_max or args.n_max,
        drafts_data.heldout_path(data),
        out / "certificate",
        args.prove_runs,
        args.max_tokens,
        1,
    )
    print(f"[prove] {time.monotonic() - t1:.0f} s, served {served.name}:")
    print("\n".join("  " + ln for ln in lines[:40]))
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
