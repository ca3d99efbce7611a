"""Quantised KV caches: each server's flags, what they cost, and the memory they save.

Memory is computed from the model's own dimensions, read from its GGUF header (layers, KV heads, head
size): bytes = 2 (K and V) × layers × context × KV heads × head size × bytes per element. A quantised KV
cache is not lossless: outputs can and do change (spectui flags it when it sees it).
"""

from __future__ import annotations

import struct
from pathlib import Path

from spectui.core.errors import InputError

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

_GGUF_TYPES = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def read_gguf_metadata(path: str | Path, wanted: set[str] | None = None) -> dict:
    """The key/value metadata of a GGUF file (arrays are skipped); stops once `wanted` keys are found."""
    p = Path(path)
    try:
        fh = open(p, "rb")
    except OSError as exc:
        raise InputError(f"cannot read model {p}: {exc.strerror}") from None
    with fh:
        if fh.read(4) != b"GGUF":
            raise InputError(f"{p} is not a GGUF file")
        (version,) = struct.unpack("<I", fh.read(4))
        if version < 2:
            raise InputError(f"{p}: GGUF version {version} is too old")
        _tensors, n_kv = struct.unpack("<QQ", fh.read(16))
        out: dict = {}

        def read_str() -> str:
            (n,) = struct.unpack("<Q", fh.read(8))
            return fh.read(n).decode("utf-8", errors="replace")

        def read_value(t: int):
            if t == 8:
                return read_str()
            if t == 9:
                at, n = struct.unpack("<IQ", fh.read(12))
                if at in _GGUF_TYPES:
                    fh.seek(n * struct.calcsize("<" + _GGUF_TYPES[at]), 1)
                else:
                    for _ in range(n):
                        read_value(at)
                return None
            fmt = "<" + _GGUF_TYPES[t]
            return struct.unpack(fmt, fh.read(struct.calcsize(fmt)))[0]

        for _ in range(n_kv):
            key = read_str()
            (t,) = struct.unpack("<I", fh.read(4))
            value = read_value(t)
            if value is not None:
                out[key] = value
            if wanted and wanted <= out.keys():
                break
        return out


def model_dims(path: str | Path) -> dict:
    meta = read_gguf_metadata(path)
    arch = meta.get("general.architecture", "llama")

    def get(k):
        return meta.get(f"{arch}.{k}")

    layers, heads = get("block_count"), get("attention.head_count")
    kv_heads = get("attention.head_count_kv") or heads
    emb = get("embedding_length")
    head_k = get("attention.key_length") or (emb // heads if emb and heads else None)
    head_v = get("attention.value_length") or head_k
    if not (layers and kv_heads and head_k):
        raise InputError(f"{path}: the GGUF header lacks the attention dimensions spectui needs")
    return {
        "arch": arch,
        "layers": int(layers),
        "kv_heads": int(kv_heads),
        "head_k": int(head_k),
        "head_v": int(head_v or head_k),
        "context_trained": get("context_length"),
    }


def hf_model_dims(folder: str | Path) -> dict:
    """The same dimensions from a Hugging Face folder's config.json (plus its weight dtype and vocabulary)."""
    import json

    path = Path(folder) / "config.json"
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    cfg = cfg.get("text_config") or cfg  # multimodal configs nest the language model's
    layers, heads = cfg.get("num_hidden_layers"), cfg.get("num_attention_heads")
    kv_heads = cfg.get("num_key_value_heads") or heads
    head = cfg.get("head_dim") or (cfg["hidden_size"] // heads if cfg.get("hidden_size") and heads else None)
    if not (layers and kv_heads and head):
        raise InputError(f"{path}: lacks num_hidden_layers, num_key_value_heads or head_dim")
    return {
        "arch": cfg.get("model_type", "unknown"),
        "layers": int(layers),
        "kv_heads": int(kv_heads),
        "head_k": int(head),
        "head_v": int(head),
        "context_trained": cfg.get("max_position_embeddings"),
        "dtype": cfg.get("torch_dtype") or cfg.get("dtype"),
        "vocab": cfg.get("vocab_size"),
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
