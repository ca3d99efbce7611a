"""What a verification batch costs beyond a prompt batch: the verification-batch probe
(spectui/machine/native/verify_batch.cpp, linked against the pinned libllama) decodes k tokens on a cached
prefix with the last position's logits only (llama-server's prompt batch, server-context.cpp:3867) and with
every position's logits sampled (its verification batch, :570-573, :4268), interleaved, k rising then
falling. Prints, per k, the min and median ms of each, their ratio in the same run, and V(k) in target
steps both ways with t = the one-token decode (its single output sampled), min over repeats.
    python bench/verify_outputs.py [--model GGUF] [--threads 1] [--prefix 121] [--repeats 31] [--ks 1,3,5,9]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spectui.machine import assets, verify_probe  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ngl", type=int, default=0)
    ap.add_argument("--prefix", type=int, default=121, help="tokens in the cached prefix")
    ap.add_argument("--repeats", type=int, default=31)
    ap.add_argument("--ks", default="1,3,5,9")
    a = ap.parse_args()
    model = a.model or assets.find_model()
    if model is None or not model.is_file():
        print("bench: no model: give --model GGUF or run `spectui setup`", file=sys.stderr)
        return 2
    binary, why = verify_probe.find_or_build()
    if binary is None:
        print(f"bench: {why}", file=sys.stderr)
        return 2
    ks = sorted({1} | {int(k) for k in a.ks.split(",")})
    prefix = [(1000 + 37 * i) % 40000 for i in range(a.prefix)]  # the content hardly matters to the cost
    got = asyncio.run(verify_probe.measure(binary, model, prefix, ks, a.repeats, a.threads, a.threads, a.ngl))
    load = os.getloadavg()
    print(
        f"{model.name}, -t {a.threads}, -ngl {a.ngl}, {a.prefix}-token cached prefix, {a.repeats} repeats; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs"
    )
    t = min(got.all[1])
    print(f"t (one-token decode, its output sampled) = {t:.2f} ms (min)")
    print(
        f"{'k':>3} {'last min':>9} {'all min':>9} {'last med':>9} {'all med':>9} {'all/last':>8} {'V last':>7} {'V all':>7}"
    )
    for k in ks:
        lmin, amin = min(got.last[k]), min(got.all[k])
        lmed, amed = statistics.median(got.last[k]), statistics.median(got.all[k])
        v_last, v_all = 1 + (lmin - min(got.last[1])) / t, 1 + (amin - t) / t
        print(
            f"{k:>3} {lmin:>9.2f} {amin:>9.2f} {lmed:>9.2f} {amed:>9.2f} {amin / lmin:>8.3f} {v_last:>7.2f} {v_all:>7.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
