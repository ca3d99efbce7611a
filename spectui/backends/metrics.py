"""Prometheus /metrics text parsed with prometheus-client's parser, and counter deltas across a request."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from spectui.core.types import ServerCounters

# llama.cpp's speculative counters (llamacpp: prefix); they only move when a request finishes
SPEC_DRAFTED = "llamacpp:spec_decode_num_draft_tokens_total"
SPEC_ACCEPTED = "llamacpp:spec_decode_num_accepted_tokens_total"
SPEC_STEPS = "llamacpp:spec_decode_num_drafts_total"
PROMPT_TOKENS = "llamacpp:prompt_tokens_total"
PROMPT_CACHED = "llamacpp:prompt_tokens_cached_total"
PREDICTED = "llamacpp:tokens_predicted_total"
SPEC_PER_POS = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"


def parse_metrics(text: str) -> dict[str, float]:
    """Flatten a /metrics page to {'name{label="v"}': value}; sample names keep their suffixes."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if sample.labels:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                name = f"{name}{{{labels}}}"
            out[name] = float(sample.value)
    return out


def total(metrics: dict[str, float], name: str) -> float | None:
    """One counter summed over its label sets (vLLM labels every sample with engine and model_name)."""
    found = [v for k, v in metrics.items() if k == name or k.startswith(name + "{")]
    return sum(found) if found else None


def delta(before: dict[str, float] | None, after: dict[str, float] | None, name: str) -> float | None:
    """after − before for one counter; None when either scrape lacks it (missing, never zero)."""
    if before is None or after is None:
        return None
    a = total(after, name)
    if a is None:
        return None
    return a - (total(before, name) or 0.0)


def per_position(before: dict[str, float] | None, after: dict[str, float] | None, prefix: str) -> list[float] | None:
    """Per-draft-position accepted counts from a `…per_pos_total{position="i"}` family."""
    if after is None:
        return None
    pos: dict[int, float] = {}
    for key, value in after.items():
        if key.startswith(prefix + "{"):
            try:
                i = int(key.split('position="', 1)[1].split('"', 1)[0])
            except (IndexError, ValueError):
                continue
            pos[i] = pos.get(i, 0.0) + value - (before or {}).get(key, 0.0)
    if not pos:
        return None
    return [pos.get(i, 0.0) for i in range(max(pos) + 1)]


# vLLM V1's counterparts
VLLM_SPEC_DRAFTED = "vllm:spec_decode_num_draft_tokens_total"
VLLM_SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
VLLM_SPEC_STEPS = "vllm:spec_decode_num_drafts_total"
VLLM_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
VLLM_KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # the second before 0.10
VLLM_PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
VLLM_PREFIX_HITS = "vllm:prefix_cache_hits_total"
VLLM_PROMPT_CACHED = "vllm:prompt_tokens_cached_total"
VLLM_PROMPT_TOKENS = "vllm:prompt_tokens_total"


@dataclass(frozen=True)
class CounterNames:
    """One server's metric names for the counters spectui reads (ServerCounters' fields)."""

    drafted: str
    accepted: str
    steps: str
    per_position: str
    prompt_tokens: str
    prompt_cached: str


def counters_from(metrics: dict[str, float], names: CounterNames) -> ServerCounters:
    pos = per_position(None, metrics, names.per_position)
    return ServerCounters(
        total(metrics, names.drafted),
        total(metrics, names.accepted),
        total(metrics, names.steps),
        tuple(pos) if pos is not None else None,
        total(metrics, names.prompt_tokens),
        total(metrics, names.prompt_cached),
    )


LLAMACPP = CounterNames(SPEC_DRAFTED, SPEC_ACCEPTED, SPEC_STEPS, SPEC_PER_POS, PROMPT_TOKENS, PROMPT_CACHED)
VLLM = CounterNames(
    VLLM_SPEC_DRAFTED, VLLM_SPEC_ACCEPTED, VLLM_SPEC_STEPS, VLLM_PER_POS, VLLM_PROMPT_TOKENS, VLLM_PROMPT_CACHED
)
SGLANG = CounterNames(
    "sglang:spec_num_draft_tokens_total",
    "sglang:spec_num_accepted_tokens_total",
    "sglang:spec_verify_ct_total",
    "sglang:spec_accepted_per_pos_total",
    "sglang:prompt_tokens_total",
    "sglang:cached_tokens_total",
)
