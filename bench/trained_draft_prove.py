"""A trained draft proven on this CPU against the same weights without speculation, with the plain quantised
rate beside it: `spectui prove` (interleaved B C / C B runs) on two llama-servers started here — the target
plain and the target with the draft — and a third pair, plain Q4_1 against plain F32, for the three-way table
(plain quantised rate, plain F32 rate, speculative F32 rate).

    .venv/bin/python bench/trained_draft_prove.py -o DIR --prompts HELDOUT.toml [--f32] [--runs 3]
        [--max-tokens 128] [--threads 1] [--no-q4] -- LLAMA-SERVER FLAGS OF THE DRAFT

    e.g. the lookup draft: -- --spec-type ngram-cache --lookup-cache-static DIR/lookup.bin
         the EAGLE-3 head:  -- -md DIR/head.gguf --spec-type draft-eagle3 --spec-draft-n-max 1

Every server runs with --threads threads (1: measured faster than 2 on this shared 2-core machine); the load
average is printed at the start and the end, because this machine is shared.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def prove(server, base_model, cand_model, extra, prompts, out, runs, max_tokens, threads, more=()) -> list[str]:
    """spectui prove (greedy only) on a plain server and one with `extra`, both started here."""
    from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv

    launcher = Launcher()
    try:
        specs = [
            ServerProcess("plain", llama_server_argv(server, base_model, 0, threads=threads)),
            ServerProcess("candidate", llama_server_argv(server, cand_model, 0, threads=threads, extra=extra)),
        ]
        for s in specs:
            launcher.add(s)
            s.argv[s.argv.index("--port") + 1] = str(s.port)
        launcher.start_all(180)
        argv = [str(ROOT / ".venv" / "bin" / "spectui"), "prove", "--baseline", specs[0].url, "--candidate"]
        argv += [specs[1].url, "--prompts", str(prompts), "--runs", str(runs), "--sampled", "0", "--no-notebook"]
        argv += ["--max-tokens", str(max_tokens), "-o", str(out), *more]
        r = subprocess.run(argv, capture_output=True, text=True)
        return (r.stdout + r.stderr).splitlines()
    finally:
        launcher.stop_all()


def main() -> int:
    from spectui.machine import assets

    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--prompts", required=True, help="the held-out prompts (never in the draft's training data)")
    ap.add_argument("--f32", action="store_true", help="serve the target's F32 copy (the same weights)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-q4", action="store_true", help="skip the plain Q4_1 vs plain F32 pair")
    args = ap.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if not extra:
        print("give the draft's llama-server flags after --", file=sys.stderr)
        return 2
    found = assets.find_all()
    if not (found.llama_server and found.model and found.llama_quantize):
        print("run `spectui setup` first", file=sys.stderr)
        return 2
    q4 = found.model
    served = assets.ensure_f32(found.llama_quantize, q4) if args.f32 else q4
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {load()} (2 cores, shared)")
    print(f"[draft on {served.name}] flags: {' '.join(extra)}")
    lines = prove(
        found.llama_server, served, served, extra, args.prompts, out / "draft", args.runs, args.max_tokens, args.threads
    )
    print("\n".join("  " + ln for ln in lines[:48]))
    if args.f32 and not args.no_q4:
        print(f"load average: {load()}")
        print(f"[plain {q4.name} (baseline) vs plain {served.name} (candidate)]")
        lines = prove(
            found.llama_server,
            q4,
            served,
            [],
            args.prompts,
            out / "q4-vs-f32",
            args.runs,
            args.max_tokens,
            args.threads,
            ["--no-triage", "--no-terms"],
        )
        print("\n".join("  " + ln for ln in lines[:30]))
    print(f"load average at end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
