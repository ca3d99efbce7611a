"""A target model's shape (hidden size, layers, heads, vocabulary, parameters), read from a GGUF file's
header and tensor table or from a Hugging Face folder's config.json.

The GGUF reader walks the whole header: key/values (array lengths kept, e.g. the tokenizer's token
list gives the vocabulary) and every tensor's dimensions, so the parameter count of a GGUF is exact.
A config.json gives no tensor table: its count is computed for a Llama-style decoder (the formula is
shown with the figures).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from spectui.core.errors import InputError
from spectui.machine.gguf import (
    flag,
    head_size,
    optional_positive_int,
    positive_int,
    read_config_json,
    read_gguf_header,
)

# bytes per parameter of the dtypes a config.json names
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "int8": 1}


@dataclass(frozen=True)
class ModelShape:
    source: str  # the file or folder it came from
    kind: str  # "gguf" | "hf"
    arch: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    params: int  # all the target's parameters
    params_how: str  # "exact (GGUF tensor table)" or the formula used
    dtype: str  # what the weights are stored as ("Q4_1 (GGUF file type 3)", "bfloat16")
    tied_embeddings: bool = False
    attention_bias: bool = False
    file_bytes: int | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


# llama.cpp's general.file_type values (llama_ftype) for the names people know
FILE_TYPES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    12: "Q3_K_M",
    15: "Q4_K_M",
    17: "Q5_K_M",
    18: "Q6_K",
    32: "BF16",
}


def shape_from_gguf(path: str | Path) -> ModelShape:
    h = read_gguf_header(path)
    meta = h.meta
    arch = h.arch

    def get(key: str) -> int | None:
        return optional_positive_int(h.arch_value(key), path, f"{arch}.{key}")

    hidden, layers, heads = get("embedding_length"), get("block_count"), get("attention.head_count")
    if not (hidden and layers and heads):
        missing = next(
            k for k, v in (("embedding_length", hidden), ("block_count", layers), ("head_count", heads)) if not v
        )
        raise InputError(f"{path}: the GGUF header lacks {arch}.{missing}", hint="is it a language model?")
    kv_heads = get("attention.head_count_kv") or heads
    head_dim = get("attention.key_length") or head_size(hidden, heads, path, f"{arch}.attention.head_count")
    intermediate = get("feed_forward_length") or 0
    embd = h.tensors.get("token_embd.weight")
    if embd and embd[0] != hidden:  # the header's number against the tensor table the weights are read by
        raise InputError(
            f"{path}: {arch}.embedding_length is {hidden:,} but token_embd.weight's rows are {embd[0]:,} long",
            hint="the GGUF header is damaged",
        )
    vocab = get("vocab_size") or h.array_lengths.get("tokenizer.ggml.tokens") or (embd[1] if embd else 0)
    if not vocab:
        raise InputError(f"{path}: cannot tell the vocabulary size from the GGUF header")
    params = sum(math.prod(d) for d in h.tensors.values())
    ftype = meta.get("general.file_type")
    dtype = f"{FILE_TYPES.get(ftype, 'type')} (GGUF file type {ftype})" if ftype is not None else "unknown"
    return ModelShape(
        source=str(path),
        kind="gguf",
        arch=arch,
        hidden=int(hidden),
        layers=int(layers),
        heads=int(heads),
        kv_heads=int(kv_heads),
        head_dim=int(head_dim),
        intermediate=int(intermediate),
        vocab=int(vocab),
        params=int(params),
        params_how=f"exact: the {len(h.tensors)} tensors of the GGUF",
        dtype=dtype,
        tied_embeddings="output.weight" not in h.tensors,
        attention_bias="blk.0.attn_q.bias" in h.tensors,
        file_bytes=Path(path).stat().st_size,
    )


def llama_params(
    hidden: int,
    layers: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    intermediate: int,
    vocab: int,
    tied: bool,
    attention_bias: bool = False,
) -> int:
    """Parameters of a Llama-style decoder: embeddings, per layer attention (q,k,v,o) + SwiGLU MLP + 2
    RMSNorms, a final norm, and an LM head unless tied to the embeddings."""
    attn = hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + heads * head_dim * hidden
    if attention_bias:
        attn += heads * head_dim + 2 * kv_heads * head_dim
    layer = attn + 3 * hidden * intermediate + 2 * hidden
    return vocab * hidden + layers * layer + hidden + (0 if tied else vocab * hidden)


def shape_from_hf(folder: str | Path) -> ModelShape:
    cfg_path, cfg = read_config_json(folder)

    def need(key: str) -> int:
        if cfg.get(key) is None:
            raise InputError(f"{cfg_path}: key {key!r} missing or not a positive integer")
        return positive_int(cfg[key], cfg_path, key)

    def optional(key: str) -> int | None:
        return optional_positive_int(cfg.get(key), cfg_path, key)

    hidden, layers, heads, vocab = (
        need("hidden_size"),
        need("num_hidden_layers"),
        need("num_attention_heads"),
        need("vocab_size"),
    )
    kv_heads = optional("num_key_value_heads") or heads
    head_dim = optional("head_dim") or head_size(hidden, heads, cfg_path, "num_attention_heads")
    intermediate = need("intermediate_size")
    tied = flag(cfg.get("tie_word_embeddings"), cfg_path, "tie_word_embeddings")
    bias = flag(cfg.get("attention_bias"), cfg_path, "attention_bias") or cfg.get("model_type") == "qwen2"
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    params = llama_params(hidden, layers, heads, kv_heads, head_dim, intermediate, vocab, tied, bias)
    notes = []
    if cfg.get("num_local_experts") or cfg.get("num_experts"):
        notes.append("a mixture-of-experts config: the count assumes one dense MLP a layer and is too low")
    return ModelShape(
        source=str(cfg_path),
        kind="hf",
        arch=str(cfg.get("model_type", "llama")),
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=int(kv_heads),
        head_dim=int(head_dim),
        intermediate=intermediate,
        vocab=vocab,
        params=params,
        params_how="computed from config.json: V·h + layers·(attention + 3·h·I + 2h) + h"
        + ("" if tied else " + V·h (untied LM head)"),
        dtype=dtype,
        tied_embeddings=tied,
        attention_bias=bias,
        notes=notes,
    )


def read_shape(model: str | Path) -> ModelShape:
    """A GGUF file or a Hugging Face folder (or its config.json)."""
    p = Path(model).expanduser()
    if not p.exists():
        raise InputError(f"model {p} does not exist", hint="give a .gguf file or a folder with config.json")
    if p.is_dir() or p.name.endswith(".json"):
        return shape_from_hf(p)
    return shape_from_gguf(p)
