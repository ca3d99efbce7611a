"""Every position's outputs added to the measured batch times: llama-server's prompt_ms times a batch that
computes logits for its last token only (tools/server/server-context.cpp:3867), while a verification batch
outputs and samples every position (:570-573, :4268) — and so does each sequence's token in a batch of n
concurrent decodes (the sweep's B(n)). The difference is timed by the verification-batch probe
(machine.verify_probe) on the baseline's own model, threads and offload, and added to CostCurve.target_ms.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from spectui.backends.launchspec import LaunchSpec
from spectui.core.errors import describe
from spectui.labs.theory.curve import CostCurve, Samples, is_local
from spectui.machine import verify_probe

PROMPT_ONLY = (
    "measured: the baseline's prompt_ms for k tokens on a cached prefix, which outputs the last token's logits "
    "only (server-context.cpp:3867); a verification batch outputs every position: V(k) is low by those rows"
)


def _int(spec: LaunchSpec, key: str) -> int | None:
    try:
        return int(spec.values[key])
    except (KeyError, ValueError):
        return None


def probe_settings(spec: LaunchSpec) -> tuple[int, int, int, str]:
    """threads, batch threads, offloaded layers for the probe, from the baseline's command line, and how
    they were known."""
    threads = _int(spec, "threads")
    said = "the baseline's own -t/-tb/-ngl" if threads is not None else "-t 1 (the baseline's threads not known)"
    threads = threads or 1
    return threads, _int(spec, "threads_batch") or threads, _int(spec, "ngl") or 0, said


async def add_outputs(
    curve: CostCurve,
    baseline,
    spec: LaunchSpec,
    prefix: list[int],
    ks: Sequence[int],
    repeats: int,
    say: Callable[[str], None] | None = None,
) -> None:
    """Time the every-position outputs on the probe and put them in `curve` (output_extra, and
    sources["verify"] saying how V(k) was measured); where it cannot run, the label says V(k) is a prompt
    batch's."""
    if not curve.measured:
        return
    prior = curve.sources.get("verify", "")
    caveat = f"; {prior}" if "not the candidate's" in prior else ""  # measured on another model: still said
    curve.sources["verify"] = PROMPT_ONLY + caveat
    model_path = spec.values.get("model") or (baseline.info.model_path if baseline.info else None)
    model = Path(model_path) if model_path else None
    if not is_local(baseline.url) or model is None or not model.is_file():
        curve.sources["verify"] += " (not corrected: the baseline's model file is not on this machine)"
        return
    binary, why = verify_probe.find_or_build()
    if binary is None:
        curve.sources["verify"] += f" (not corrected: {why})"
        return
    threads, threads_batch, ngl, said = probe_settings(spec)
    if say is not None:
        say(f"timing every position's outputs on the verification-batch probe ({model.name}, {said}) …")
    try:
        got = await verify_probe.measure(
            binary, model, prefix, sorted(set(ks) | {1}), repeats, threads, threads_batch, ngl
        )
    except Exception as exc:  # the probe failed: the prompt-batch figure stands, labelled
        curve.sources["verify"] += f" (not corrected: {describe(exc)})"
        return
    short = [k for k in got.all if got.outputs.get((k, verify_probe.ALL)) != k]
    if short:
        curve.sources["verify"] += f" (not corrected: the probe gave fewer outputs than tokens at k = {short})"
        return
    extra = got.extra()
    extra[1] = [0.0] * max(1, len(extra.get(1, [])))
    curve.output_extra = {k: Samples(tuple(v)) for k, v in extra.items() if v}
    curve.sources["verify"] = (
        "measured as the server verifies: the baseline's prompt_ms for k tokens on a cached prefix, plus what "
        f"every position's logits, sampled, add over the last one's (the verification-batch probe on {model.name}, "
        f"libllama b11434, {said}, {repeats} repeats){caveat}"
    )


async def add_draft_decode(
    curve: CostCurve,
    draft_path: str,
    candidate: LaunchSpec,
    prefix: list[int],
    repeats: int,
    say: Callable[[str], None] | None = None,
) -> None:
    """Time the draft model's one-token decode and its sampling on the probe, at the candidate's draft
    threads and offload: what a draft decode inside the candidate costs (common/speculative.cpp decodes and
    samples top-k 10 per token; the probe takes the argmax, one pass over the vocabulary as well), without
    llama-server's per-token loop that the draft server's decode step includes. c is then this over t."""
    if curve.target_step is None or curve.draft_step is None:
        return
    model = Path(draft_path)
    binary, why = verify_probe.find_or_build() if model.is_file() else (None, "the draft model's file is not here")
    if binary is None:
        curve.sources["c"] += f" (the server's loop not removed: {why})"
        return
    threads = _int(candidate, "threads_draft") or _int(candidate, "threads") or 1
    batch = _int(candidate, "threads_batch") or threads
    ngl = _int(candidate, "ngl_draft") or 0
    if say is not None:
        say(f"timing the draft's decode as the candidate runs it ({model.name}, -t {threads}) …")
    try:
        got = await verify_probe.measure(binary, model, prefix, [1], max(repeats, 3), threads, batch, ngl)
    except Exception as exc:  # the probe failed: the draft server's step stands, labelled
        curve.sources["c"] += f" (the server's loop not removed: {describe(exc)})"
        return
    if not got.all.get(1):
        return
    curve.draft_decode = Samples(tuple(got.all[1]))
    curve.sources["c"] = (
        f"measured: {model.name}'s one-token decode and its sampling as the candidate runs it (the "
        f"verification-batch probe, libllama b11434, -t {threads}, -ngl {ngl}: no server loop), over t"
    )
