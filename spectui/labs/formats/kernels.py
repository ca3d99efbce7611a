"""Which weight formats llama.cpp's CPU backend multiplies in batches (pinned source b11434), and the
formats the lesson makes by default.

A verification batch of k + 1 tokens costs about one decode step where a batched matrix kernel reads each
weight once for the whole batch, and about k + 1 steps where the format has none and runs row by row:
- llamafile's sgemm (ggml/src/ggml-cpu/llamafile/sgemm.cpp, llamafile_sgemm's `case GGML_TYPE_…` list):
  F32, BF16, F16, Q8_0, Q4_0, Q5_0, IQ4_NL;
- the repacked kernels (ggml/src/ggml-cpu/repack.cpp, ggml_repack_get_optimal_repack_type): Q4_0, Q4_K,
  IQ4_NL.
Q4_1 (spectui's bundled SmolLM2) has neither. The lesson reads the kernel from the measured V(k), never from
this list alone: the list is the why beside the measurement.
"""

from __future__ import annotations

SGEMM = frozenset({"F32", "BF16", "F16", "Q8_0", "Q4_0", "Q5_0", "IQ4_NL"})
REPACK = frozenset({"Q4_0", "Q4_K", "IQ4_NL"})
# what llama-quantize makes (its type names) in the order the lesson's table shows them; F32 and F16 copies
# are large and slow to decode on a CPU, so they are asked for by name (--formats)
DEFAULT_FORMATS = ("Q4_1", "Q4_0", "IQ4_NL", "Q8_0", "Q4_K_M")
KNOWN_FORMATS = (
    "F32",
    "F16",
    "BF16",
    "Q8_0",
    "Q6_K",
    "Q5_0",
    "Q5_1",
    "Q5_K_M",
    "Q5_K_S",
    "Q4_0",
    "Q4_1",
    "Q4_K_M",
    "Q4_K_S",
    "IQ4_NL",
    "IQ4_XS",
    "Q3_K_M",
    "Q2_K",
    "IQ2_XS",  # these two need an importance matrix: llama-quantize refuses them here, said in one line
    "IQ2_XXS",
)


def main_type(fmt: str) -> str:
    """The tensor type a llama-quantize format stores most weights in: Q4_K_M → Q4_K (its _M/_S mix adds
    some Q5_K/Q6_K rows)."""
    for suffix in ("_M", "_S", "_L"):
        if fmt.endswith(suffix) and "_K" in fmt:
            return fmt[: -len(suffix)]
    return fmt


def kernels(fmt: str) -> list[str]:
    """The batched CPU kernels b11434 has for a format's main type: 'sgemm', 'repack', both or none."""
    t = main_type(fmt)
    return [name for name, types in (("sgemm", SGEMM), ("repack", REPACK)) if t in types]


def kernel_words(fmt: str) -> str:
    found = kernels(fmt)
    if not found:
        return f"no batched CPU kernel for {main_type(fmt)} (not in sgemm.cpp's type list nor repack.cpp's)"
    where = {"sgemm": "llamafile/sgemm.cpp", "repack": "repack.cpp"}
    return f"{main_type(fmt)} has batched CPU kernels: " + ", ".join(where[k] for k in found)
