"""The verification-cost lesson's three-way table beside a speculative result on an F32 copy.

On a CPU, verifying k tokens in F32 costs far less than k steps (reading the weights is the cost, as on a
GPU) while in Q4_1 it costs nearly k (dequantising is compute): speculation that loses on Q4_1 can win on
F32, and plain Q4_1 may still beat both. So a speculative F32 result is never shown as "faster" alone: where
`spectui prove` compared a speculative candidate with a plain baseline serving the F32 copy spectui made
(`llama-quantize --allow-requantize MODEL F32`, machine.assets.f32_path), the quantised MODEL is started
plain here, on 127.0.0.1 with the baseline's threads, and run against the baseline (B C / C B, the proof's
prompts and parameters): plain quantised rate, plain F32 rate, speculative F32 rate, the ratios paired."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from spectui.backends.launchspec import flag_value
from spectui.core.runner import run_prompts
from spectui.labs.drafts.lesson import ThreeWay
from spectui.machine.assets import MODEL_NAME, f32_path, find_llama_server
from spectui.run.drafts_lesson_measure import certificate_figures
from spectui.run.lesson_serving import Serving, Tools, backends_for, median_or_none
from spectui.store.locations import atomic_write


def quantised_sibling(model_path: str | None) -> Path | None:
    """The GGUF whose F32 copy this is (NAME.QUANT.gguf beside NAME.F32.gguf); None for any other file."""
    if not model_path or not model_path.endswith(".F32.gguf"):
        return None
    path = Path(model_path)
    try:
        found = sorted(p for p in path.parent.glob("*.gguf") if p != path and f32_path(p) == path)
    except OSError:
        return None
    plain = [p for p in found if "draft" not in p.name.lower()]  # not spectui's Q2_K draft beside it
    # the bundled Q4_1 before the other formats `spectui setup` and `spectui formats` make beside it
    plain.sort(key=lambda p: p.name != MODEL_NAME)
    return plain[0] if plain else None


def applies(doc: dict, baseline_model_path: str | None) -> Path | None:
    """The quantised model to measure, where the candidate speculated on an F32 baseline's weights."""
    servers = doc["measured_on"]["servers"]
    spec = servers["candidate"].get("speculative") or {}
    if spec.get("type") in (None, "none") or (servers["baseline"].get("speculative") or {}).get("type") not in (
        None,
        "none",
    ):
        return None
    return quantised_sibling(baseline_model_path)


def _threads(doc: dict) -> int:
    argv = doc["measured_on"]["servers"]["baseline"].get("launch_argv") or []
    t = flag_value(argv, "-t", "--threads")
    return int(t) if t and str(t).isdigit() else 1


async def beside(doc: dict, baseline, prompts, params, runs: int, out: Path, say=None) -> ThreeWay | None:
    """Measure the plain quantised rate against the proof's baseline and write out/three-way.json; None where
    the table does not apply (no F32 copy, no speculation) or llama-server is not here."""
    path = baseline.info.model_path if baseline.info else None
    quantised = applies(doc, path)
    server = find_llama_server()
    if quantised is None or server is None or path is None:
        return None
    if say is not None:
        say(f"the three-way table: plain {quantised.name} against the plain F32 baseline, {runs} run(s) a prompt …")
    tools = Tools(server, quantised, quantised)
    async with Serving(tools, _threads(doc), [("quantised", quantised, [])]) as srv:
        (q,) = await backends_for(baseline.client, srv.urls)
        results = await run_prompts(q, baseline, prompts, params, repeat=max(1, runs))
    fig = certificate_figures(doc)
    tw = ThreeWay(
        quantised.name,
        Path(path).name,
        median_or_none(r.baseline.figures.decode_tps for r in results),
        fig["plain_tps"],
        fig["spec_tps"],
        median_or_none(r.speedup for r in results),
        fig["speedup"],
    )

    atomic_write(out / "three-way.json", json.dumps({**asdict(tw), "runs": len(results)}, indent=2) + "\n")
    return tw


def table_text(tw: ThreeWay) -> str:
    """The table as the prove command prints it after the certificate."""
    rows = tw.rows()
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["three-way (a speculative F32 result is read beside the plain quantised rate):"]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.append("  " + tw.line())
    return "\n".join(lines) + "\n"
