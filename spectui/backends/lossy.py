"""What a server's command line and environment say about exactness: the settings that make speculation lossy
by design (a draft accepted without the target's agreement), and the settings that promise determinism.

Lossy by design, recognised where spectui can read them:
- llama.cpp `--spec-synth-len L` / `--spec-synth-rates P0,P1,…`: drafts accepted at random, "benchmarking only"
  (tools/server/server-context.cpp, `server_sample_and_accept_synth`: "accept draft tokens at random instead of
  by match with the target"; common/arg.cpp `--spec-synth-len`);
- vLLM `--speculative-config` with a synthetic or relaxed acceptance: `rejection_sample_method: synthetic` (with
  `synthetic_acceptance_rates` / `synthetic_acceptance_length`: drafts accepted at set rates, for benchmarking),
  FLy (`method` or `rejection_sample_method` fly: loosely accepted drafts), `acceptance_method:
  typical_acceptance_sampler` (Medusa's typical acceptance). `rejection_sample_method: block` is block
  verification (Sun et al. 2024, arXiv 2403.10444): distribution-preserving, so named but not lossy;
- SGLang `--speculative-accept-threshold-single` / `--speculative-accept-threshold-acc` below 1;
- TensorRT-LLM MTP's `use_relaxed_acceptance_for_thinking` where it appears in a config passed on the line.

Determinism promised: vLLM's `VLLM_BATCH_INVARIANT=1` (environment), SGLang's `--enable-deterministic-inference`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from spectui.backends.launchspec import flag_value, has_flag

_LLAMA_SYNTH = ("--spec-synth-len", "--spec-synth-rates")
_SGLANG_THRESHOLDS = ("--speculative-accept-threshold-single", "--speculative-accept-threshold-acc")
_STANDARD_REJECTION = {"standard", "strict", "rejection_sampler", "default"}
# vLLM's rejection_sample_method values, each with what it does to the target's distribution
REJECTION_METHODS = {
    "standard": "standard rejection sampling (lossless)",
    "block": "block verification (distribution-preserving, arXiv 2403.10444)",
    "synthetic": "synthetic acceptance (benchmarking only: drafts accepted at set rates, lossy)",
    "fly": "FLy loose acceptance (lossy by design)",
}
_LOSSLESS_REJECTION = _STANDARD_REJECTION | {"block"}
_VLLM_SYNTH_KEYS = ("synthetic_acceptance_rates", "synthetic_acceptance_length")


def _spec_config(argv: Sequence[str]) -> dict:
    raw = flag_value(argv, "--speculative-config")
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def lossy_settings(argv: Sequence[str] | None) -> list[str]:
    """Each setting on a launch command line that makes speculation lossy by design, as `flag value`."""
    if not argv:
        return []
    args = list(argv)
    found: list[str] = []
    for flag in _LLAMA_SYNTH:
        if has_flag(args, flag):
            found.append(f"{flag} {flag_value(args, flag) or ''}".strip())
    for flag in _SGLANG_THRESHOLDS:
        v = flag_value(args, flag)
        try:
            if v is not None and float(v) < 1.0:
                found.append(f"{flag} {v}")
        except ValueError:
            continue
    config = _spec_config(args)
    method = str(config.get("rejection_sample_method") or "").lower()
    if method and method not in _LOSSLESS_REJECTION:
        found.append(f"--speculative-config rejection_sample_method={method}")
    for key in _VLLM_SYNTH_KEYS:
        if config.get(key) not in (None, [], ""):
            found.append(f"--speculative-config {key}={json.dumps(config[key])}")
    if str(config.get("method") or "").lower() == "fly":
        found.append("--speculative-config method=fly")
    if str(config.get("acceptance_method") or "").lower() == "typical_acceptance_sampler":
        found.append("--speculative-config acceptance_method=typical_acceptance_sampler")
    if any("use_relaxed_acceptance_for_thinking" in a and "false" not in a.lower() for a in args):
        found.append("use_relaxed_acceptance_for_thinking")
    return found


def verification_named(argv: Sequence[str] | None) -> list[str]:
    """How a server verifies drafts where its command line says it, each named with what it does: llama.cpp's
    --spec-synth-* and vLLM's rejection_sample_method (standard, block, synthetic, FLy)."""
    args = list(argv or ())
    out = [
        f"{flag} {flag_value(args, flag) or ''}: drafts accepted at random (lossy)".replace("  ", " ")
        for flag in _LLAMA_SYNTH
        if has_flag(args, flag)
    ]
    config = _spec_config(args)
    method = str(config.get("rejection_sample_method") or "").lower()
    if str(config.get("method") or "").lower() == "fly" and not method:
        method = "fly"
    if method:
        out.append(f"rejection_sample_method={method}: {REJECTION_METHODS.get(method, 'not a method spectui knows')}")
    return out


def determinism_claims(argv: Sequence[str] | None, env: Mapping[str, str] | None = None) -> list[str]:
    """Each setting by which a server promises the same output for the same input whatever the batch."""
    claims: list[str] = []
    if has_flag(argv, "--enable-deterministic-inference"):
        claims.append("SGLang --enable-deterministic-inference")
    value = (env or {}).get("VLLM_BATCH_INVARIANT")
    if value is not None and str(value).strip() not in ("", "0", "false", "False"):
        claims.append("VLLM_BATCH_INVARIANT=1 (batch-invariant mode)")
    return claims
