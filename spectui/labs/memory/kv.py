"""Quantised KV caches: each server's flags, what they cost, and the memory they save.

Memory is computed from the model's own dimensions, read from its GGUF header (layers, KV heads, head
size): bytes = 2 (K and V) × layers × context × KV heads × head size × bytes per element. A quantised KV
cache is not lossless: outputs can and do change (spectui flags it when it sees it).
"""

from __future__ import annotations

from pathlib import Path

from spectui.core.errors import InputError
from spectui.machine.gguf import optional_positive_int, read_config_json, read_gguf_header

# bytes per element of llama.cpp's KV cache types (block formats: 32 values per block)
KV_BYTES = {
    "f32": 4.0,
    "f16": 2.0,
    "bf16": 2.0,
    "q8_0": 34 / 32,
    "q5_1": 24 / 32,
    "q5_0": 22 / 32,
    "q4_1": 20 / 32,
    "q4_0": 18 / 32,
    "iq4_nl": 18 / 32,
    # vLLM's and SGLang's --kv-cache-dtype: one byte per element (used by the memory plan)
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
}

FLAGS = [
    (
        "llama.cpp",
        "-ctk TYPE -ctv TYPE",
        "f16 (default), q8_0, q5_1, q5_0, q4_1, q4_0, iq4_nl; a quantised V needs -fa on",
        "q8_0 about halves the cache with small drift; q4_0 quarters it and changes outputs sooner",
    ),
    (
        "vLLM",
        "--kv-cache-dtype auto|fp8|fp8_e4m3|fp8_e5m2",
        "fp8 halves the cache against bf16/f16",
        "needs hardware fp8 support to be fast; scales may be calibrated; not bit-exact",
    ),
    (
        "SGLang",
        "--kv-cache-dtype fp8_e5m2|fp8_e4m3",
        "fp8 halves the cache",
        "e5m2 keeps range, e4m3 keeps precision; not bit-exact",
    ),
]


def model_dims(path: str | Path) -> dict:
    """Layers, KV heads and head sizes (and the trained context) from a GGUF header (machine.gguf)."""
    h = read_gguf_header(path, tensors=False)
    arch = h.arch

    def get(key: str) -> int | None:
        return optional_positive_int(h.arch_value(key), path, f"{arch}.{key}")

    layers, heads = get("block_count"), get("attention.head_count")
    kv_heads = get("attention.head_count_kv") or heads
    emb = get("embedding_length")
    head_k = get("attention.key_length") or (emb // heads if emb and heads else None)
    head_v = get("attention.value_length") or head_k
    if not (layers and kv_heads and head_k):
        raise InputError(f"{path}: the GGUF header lacks the attention dimensions spectui needs")
    return {
        "arch": arch,
        "layers": layers,
        "kv_heads": kv_heads,
        "head_k": head_k,
        "head_v": head_v or head_k,
        "context_trained": get("context_length"),
    }


def hf_model_dims(folder: str | Path) -> dict:
    """The same dimensions from a Hugging Face folder's config.json (plus its weight dtype and vocabulary)."""
    path, cfg = read_config_json(folder)

    def get(key: str) -> int | None:
        return optional_positive_int(cfg.get(key), path, key)

    layers, heads, hidden = get("num_hidden_layers"), get("num_attention_heads"), get("hidden_size")
    kv_heads = get("num_key_value_heads") or heads
    head = get("head_dim") or (hidden // heads if hidden and heads else None)
    if not (layers and kv_heads and head):
        raise InputError(f"{path}: lacks num_hidden_layers, num_key_value_heads or head_dim")
    return {
        "arch": cfg.get("model_type", "unknown"),
        "layers": layers,
        "kv_heads": kv_heads,
        "head_k": head,
        "head_v": head,
        "context_trained": get("max_position_embeddings"),
        "dtype": cfg.get("torch_dtype") or cfg.get("dtype"),
        "vocab": get("vocab_size"),
    }


def kv_bytes(dims: dict, ctx: int, type_k: str = "f16", type_v: str | None = None) -> int:
    type_v = type_v or type_k
    for t in (type_k, type_v):
        if t not in KV_BYTES:
            raise InputError(f"unknown KV cache type {t!r}", hint=f"one of {', '.join(KV_BYTES)}")
    per_layer = ctx * dims["kv_heads"] * (dims["head_k"] * KV_BYTES[type_k] + dims["head_v"] * KV_BYTES[type_v])
    return int(dims["layers"] * per_layer)


def kv_text(model: str | Path, ctx: int) -> str:
    dims = model_dims(model)
    base = kv_bytes(dims, ctx, "f16")
    lines = [
        f"model {Path(model).name}: {dims['layers']} layers, {dims['kv_heads']} KV heads × {dims['head_k']} "
        f"(computed from the GGUF header); context {ctx}",
        "",
        f"{'KV type':<10} {'memory':>10} {'saved vs f16':>13}",
    ]
    for t in ("f16", "q8_0", "q5_1", "q4_0"):
        b = kv_bytes(dims, ctx, t)
        lines.append(f"{t:<10} {b / 2**20:>8.1f} MiB {(1 - b / base):>12.0%}")
    lines += ["", "flags and costs (a quantised KV cache is not lossless: outputs can change):"]
    for server, flag, what, cost in FLAGS:
        lines.append(f"  {server:<9} {flag}\n  {'':<9} {what}; {cost}")
    return "\n".join(lines)


def server_cost(model: str | Path, ctx: int) -> str:
    """What one more llama-server of `model` holds, in one line: its weights (the GGUF file's size, as the memory
    plan measures a model) and its KV cache at `ctx` tokens (f16, from the GGUF header)."""
    path = Path(model)
    weights = path.stat().st_size
    try:
        kv: int | None = kv_bytes(model_dims(path), ctx)
    except (InputError, KeyError, TypeError):
        kv = None
    mib = 2**20
    kv_part = f"KV cache {kv / mib:,.0f} MiB at {ctx:,} tokens (f16)" if kv is not None else "KV cache not known"
    total = f"{(weights + kv) / mib:,.0f} MiB" if kv is not None else f"at least {weights / mib:,.0f} MiB"
    return f"{total}: weights {weights / mib:,.0f} MiB (the GGUF file {path.name}) + {kv_part}"
