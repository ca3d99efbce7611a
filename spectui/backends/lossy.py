"""What a server's command line and environment say about exactness: the settings that make speculation lossy
by design (a draft accepted without the target's agreement), and the settings that promise determinism.

Lossy by design, recognised where spectui can read them:
- llama.cpp `--spec-synth-len L` / `--spec-synth-rates P0,P1,…`: drafts accepted at random, "benchmarking only"
  (tools/server/server-context.cpp, `server_sample_and_accept_synth`: "accept draft tokens at random instead of
  by match with the target"; common/arg.cpp `--spec-synth-len`);
- vLLM `--speculative-config` with a synthetic or relaxed acceptance (`rejection_sample_method` other than the
  standard one, the FLy method, `acceptance_method: typical_acceptance_sampler` — Medusa's typical acceptance);
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
    if method and method not in _STANDARD_REJECTION:
        found.append(f"--speculative-config rejection_sample_method={method}")
    if str(config.get("method") or "").lower() == "fly":
        found.append("--speculative-config method=fly")
    if str(config.get("acceptance_method") or "").lower() == "typical_acceptance_sampler":
        found.append("--speculative-config acceptance_method=typical_acceptance_sampler")
    if any("use_relaxed_acceptance_for_thinking" in a and "false" not in a.lower() for a in args):
        found.append("use_relaxed_acceptance_for_thinking")
    return found


def determinism_claims(argv: Sequence[str] | None, env: Mapping[str, str] | None = None) -> list[str]:
    """Each setting by which a server promises the same output for the same input whatever the batch."""
    claims: list[str] = []
    if has_flag(argv, "--enable-deterministic-inference"):
        claims.append("SGLang --enable-deterministic-inference")
    value = (env or {}).get("VLLM_BATCH_INVARIANT")
    if value is not None and str(value).strip() not in ("", "0", "false", "False"):
        claims.append("VLLM_BATCH_INVARIANT=1 (batch-invariant mode)")
    return claims
