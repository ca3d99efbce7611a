"""What a certificate costs beyond a plain comparison: `spectui prove` against `spectui compare` on the
same prompt set, servers and runs, on real llama-servers (SmolLM2, 1 thread each; the candidate drafts
with the Q2_K draft, n-max 8). Both commands run in this process through spectui's own `main`, alternated
(C P P C C P …) so machine drift falls on both alike; the medians of each and of their difference are
printed, then where prove's extra time goes: sha256 of the model files, deriving the certificate from its
sessions (the same work `verify` does, which is timed on its own), and writing the three renderings.

    python bench/prove_overhead.py [--prompts default] [--limit 3] [--max-tokens 32] [--runs 2] [--rounds 3]

The sampled pass is left out (--sampled 0): it is extra measurement, not overhead; its cost is its
requests (K prompts × N seeds × 2 sides), which the printed per-request time lets you estimate.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def timed(argv: list[str]) -> tuple[float, int]:
    from spectui.cli.main import main

    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    return time.perf_counter() - t0, code


def med(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f}, {len(values)} runs)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", default="default")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()

    from spectui.machine import assets
    from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv
    from spectui.run.prove import certificate
    from spectui.run.prove.provenance import sha256_file

    found = assets.find_all()
    if not (found.llama_server and found.model and found.draft_model):
        print("llama-server, SmolLM2 or its draft missing: run `spectui setup`", file=sys.stderr)
        return 2
    draft = ["-md", str(found.draft_model), "--spec-type", "draft-simple", "--spec-draft-n-max", "8"]
    tmp = Path(tempfile.mkdtemp(prefix="prove-bench-"))
    common = ["--prompts", a.prompts, "--limit", str(a.limit), "--max-tokens", str(a.max_tokens)]
    with Launcher() as launcher:
        base = launcher.add(ServerProcess("baseline", llama_server_argv(found.llama_server, found.model, 0)))
        cand = launcher.add(
            ServerProcess("candidate", llama_server_argv(found.llama_server, found.model, 0, extra=draft))
        )
        for s in (base, cand):
            s.argv[s.argv.index("--port") + 1] = str(s.port)
        launcher.start_all(timeout=120)
        pair = ["--baseline", base.url, "--candidate", cand.url]
        compare, prove, certs = [], [], []
        timed(["compare", *pair, *common, "--repeat", "1"])  # warm both servers once
        for k in range(a.rounds):
            order = ("c", "p") if k % 2 == 0 else ("p", "c")
            for which in order:
                if which == "c":
                    t, code = timed(["compare", *pair, *common, "--repeat", str(a.runs)])
                    compare.append(t)
                else:
                    out = tmp / f"cert{k}"
                    t, code = timed(
                        [
                            "prove",
                            *pair,
                            *common,
                            "--runs",
                            str(a.runs),
                            "--sampled",
                            "0",
                            "-o",
                            str(out),
                            "--no-notebook",
                        ]
                    )
                    prove.append(t)
                    certs.append(out / "certificate.json")
                if code not in (0, 3):
                    print(f"{which} exited {code}", file=sys.stderr)
                    return 1
    requests = a.limit * a.runs * 2
    diffs = [p - c for p, c in zip(prove, compare)]
    print(
        f"prompt set {a.prompts} (first {a.limit}), {a.max_tokens} tokens, {a.runs} runs per prompt: {requests} requests per command"
    )
    print(f"compare --repeat {a.runs}            {med(compare)}")
    print(f"prove --runs {a.runs} --sampled 0    {med(prove)}")
    print(
        f"prove − compare (paired by round)   {med(diffs)}  ({statistics.median(diffs) / statistics.median(compare):+.0%} of compare)"
    )
    # where the extra goes, each timed on its own on the last certificate
    doc = certificate.load(certs[-1])
    files = [
        f["path"]
        for s in doc["measured_on"]["servers"].values()
        for f in (s.get("model_file"), s.get("draft_file"))
        if f and f.get("sha256")
    ]
    t0 = time.perf_counter()
    for f in files:
        sha256_file(Path(f))
    hashing = time.perf_counter() - t0
    size = sum(Path(f).stat().st_size for f in files) / 1e6
    t0 = time.perf_counter()
    v = certificate.verify(certs[-1])
    verify_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    certificate.write(doc, tmp / "rewrite" / "certificate.json")
    write_s = time.perf_counter() - t0
    print(f"  sha256 of {len(files)} model files ({size:.0f} MB)   {hashing:.2f} s")
    print(
        f"  verify (hashes + derivation from sessions, no servers)   {verify_s:.2f} s ({'ok' if v.ok else 'NOT VERIFIED'})"
    )
    print(f"  writing JSON + Markdown + HTML   {write_s * 1000:.0f} ms")
    print(
        f"  sessions: {sum(r['bytes'] for r in doc['sessions']) / 1e3:.0f} kB; certificate {certs[-1].stat().st_size / 1e3:.0f} kB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
