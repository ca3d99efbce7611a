"""Timing fidelity: spectui's decode rate over the server's own, per side, on recorded streams and on
real llama-server runs started here (baseline and draft-simple candidate, the default prompt set).

Prints, per stream and side, the ratio of spectui's decode rate (the figure beside the speed-up) to
llama.cpp's `timings.predicted_per_second` (goal 1.000 ± 0.005), the observed arrival-time rate's
ratio beside it, and whether TTFT is ever below the server's `prompt_ms`.
    python bench/timing_fidelity.py [--max-tokens 96]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402

from spectui.backends.labeller import LlamaCppLabeller  # noqa: E402
from spectui.backends.llamacpp import LlamaCppBackend  # noqa: E402
from spectui.backends.sse import iter_payloads  # noqa: E402
from spectui.core.events import StreamStarted  # noqa: E402
from spectui.core.figures import SideRecorder  # noqa: E402
from spectui.core.runner import compare_prompt  # noqa: E402
from spectui.core.types import GenerationParams  # noqa: E402
from spectui.machine import assets  # noqa: E402
from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv  # noqa: E402
from spectui.store.prompts import load_set  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"


def recorded() -> list[tuple[str, float, float | None]]:
    rows = []
    for path in sorted(DATA.glob("llamacpp-*.sse")):
        lab, rec = LlamaCppLabeller(), SideRecorder("x")
        rec.feed(StreamStarted(0, ""))
        payloads = list(iter_payloads(path.read_text().splitlines()))
        for i, obj in enumerate(payloads):
            for ev in lab.feed(obj, (i + 1) * 1_000_000):
                rec.feed(ev)
        server = payloads[-1]["timings"]["predicted_per_second"]
        rows.append((path.name, rec.figures.decode_tps / server, None))  # recorded without arrival times
    return rows


async def live(max_tokens: int) -> list[tuple[str, float, float | None, bool]]:
    found = assets.ensure_all()
    draft = ["-md", str(found.draft_model), "--spec-type", "draft-simple", "--spec-draft-n-max", "8"]
    launcher = Launcher()
    base = launcher.add(ServerProcess("baseline", llama_server_argv(found.llama_server, found.model, 0)))
    cand = launcher.add(ServerProcess("candidate", llama_server_argv(found.llama_server, found.model, 0, extra=draft)))
    rows = []
    try:
        for s in (base, cand):
            s.argv[s.argv.index("--port") + 1] = str(s.port)
        launcher.start_all(timeout=120)
        async with httpx.AsyncClient() as client:
            b, c = LlamaCppBackend(base.url, client), LlamaCppBackend(cand.url, client)
            for x in (b, c):
                await x.identify()
            for prompt in load_set("default")[1]:
                r = await compare_prompt(b, c, prompt, GenerationParams(max_tokens=max_tokens, cache_prompt=False))
                for rec in (r.baseline, r.candidate):
                    f, t = rec.figures, rec.finished.timings if rec.finished else {}
                    server = t.get("predicted_per_second")
                    if not server or not f.decode_tps:
                        continue
                    ttft_ok = f.ttft_ms is None or f.ttft_ms >= (t.get("prompt_ms") or 0)
                    rows.append(
                        (
                            f"{prompt.id}/{rec.name}",
                            f.decode_tps / server,
                            f.observed_tps / server if f.observed_tps else None,
                            ttft_ok,
                        )
                    )
    finally:
        launcher.stop_all()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-tokens", type=int, default=96)
    args = ap.parse_args()
    print(f"{'stream':<48} {'decode/server':>13} {'observed/server':>15}")
    for name, ratio, _ in recorded():
        print(f"{name:<48} {ratio:>13.4f} {'—':>15}")
    rows = asyncio.run(live(args.max_tokens))
    for name, ratio, obs, ttft_ok in rows:
        print(
            f"{name:<48} {ratio:>13.4f} {obs if obs is None else format(obs, '.4f'):>15}"
            + ("" if ttft_ok else "  TTFT below prompt_ms!")
        )
    ratios = [r[1] for r in rows]
    observed = [r[2] for r in rows if r[2] is not None]
    print(f"TTFT below the server's prompt_ms: {sum(1 for r in rows if not r[3])} of {len(rows)}")
    print(
        f"observed/server median {statistics.median(observed):.4f} (min {min(observed):.4f}, max {max(observed):.4f})"
    )
    print(f"decode/server over {len(ratios)} live streams: min {min(ratios):.4f}, max {max(ratios):.4f}")


if __name__ == "__main__":
    main()
