"""What a trained draft costs: Medusa heads, EAGLE-1, EAGLE-3 and draft-model speculation, for a given
target shape — trainable parameters, training memory, disk for offline hidden states and time — each
figure with the formula and inputs it came from, published figures beside them, and what data each
method needs and which servers serve it.

Counts follow the trainers' own module definitions:
- Medusa (FasterDecoding/Medusa medusa_model.py): per head L ResBlocks (Linear h→h with bias: h²+h) and
  an LM head h→V (no bias); the LM head starts as a copy of the target's. (That file builds the blocks
  as `[ResBlock(h)] * L`, one module repeated, so its heads hold h²+h whatever L; the paper's L
  distinct blocks are counted here.)
- EAGLE-1 (SafeAILab/EAGLE cnets.py): one Llama decoder layer without its input norm, and fc 2h→h with
  bias; embeddings and LM head are the target's, frozen.
- EAGLE-3 (SpecForge specforge/modeling/draft/llama3_eagle.py): fc 3h→h, one decoder layer whose q, k
  and v take 2h (embedding and hidden state side by side), hidden_norm + input_layernorm +
  post_attention_layernorm, a final norm, an LM head h→Vd onto a reduced draft vocabulary (32,000 by
  default) with d2t/t2d maps; embeddings frozen. SpecForge trains that LM head; vLLM's speculators
  (models/eagle3/core.py, model.py DraftVocabMixin) copies it from the target's (rows of the draft
  vocabulary) and keeps it frozen, with a frozen verifier_lm_head and verifier_norm beside it.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field

from spectui.backends.spectypes import SPEC_TYPES
from spectui.core.errors import ServerError
from spectui.core.runner import run_side
from spectui.core.types import GenerationParams
from spectui.labs.memory.shape import ModelShape

GIB = 1024**3
# mixed-precision Adam: bf16 weight 2 + bf16 gradient 2 + fp32 master, momentum and variance 12 bytes per
# trainable parameter (ZeRO, Rajbhandari et al. 2020, section 3.1: "2Ψ + 2Ψ + KΨ = 16Ψ" with K = 12)
BYTES_WEIGHT, BYTES_GRAD, BYTES_OPTIMIZER = 2, 2, 12
# activations of one transformer layer in 16-bit without recomputation: s·b·h·(34 + 5·a·s/h) bytes
# (Korthikanti et al. 2022, "Reducing Activation Recomputation", eq. 1); FlashAttention keeps no s×s
# attention matrix, which removes the 5·a·s/h term
ACT_BYTES_PER_LAYER_TOKEN_H = 34

# a GPU's dense BF16 tensor throughput (without sparsity) and memory, from the vendors' datasheets
GPUS = {
    "rtx-3090": (71.0, 24, "NVIDIA Ampere GA102 whitepaper: BF16 tensor, FP32 accumulate, 71 dense / 142 sparse"),
    "rtx-4090": (165.2, 24, "NVIDIA Ada Lovelace whitepaper: BF16 tensor, FP32 accumulate, 165.2 dense / 330.4 sparse"),
    "a100-80gb": (312.0, 80, "NVIDIA A100 datasheet: BF16 tensor 312 dense / 624 sparse"),
    "h100-sxm": (989.0, 80, "NVIDIA H100 datasheet: BF16 tensor 1,979 with sparsity, half that dense"),
    "h200": (989.0, 141, "NVIDIA H200 datasheet: BF16 tensor 1,979 with sparsity, half that dense"),
}
# the GPU a profile's track stands for where its own figures (memory floor) say no more
PROFILE_GPU = {"s-nvidia": "rtx-3090", "n-nvidia": "rtx-3090"}


@dataclass(frozen=True)
class Published:
    figure: str
    source: str


PUBLISHED = {
    "eagle1": [
        Published("0.24B trainable parameters for a 7B target, 0.99B for 70B", "SafeAILab/EAGLE README"),
        Published("trainable within 1–2 days on 8× RTX 3090 (70B)", "SafeAILab/EAGLE README"),
    ],
    "eagle3": [
        Published(
            "~10 min on 2× H100, offline, Llama-3.1-8B, 5k samples; ~17 min on 4× H100 online (Qwen3-8B)",
            "vLLM speculators tutorials (github.com/vllm-project/speculators, examples/)",
        ),
        Published(
            "offline hidden states ~1.6 TB per 50k samples",
            "vLLM speculators tutorials (github.com/vllm-project/speculators, examples/)",
        ),
        Published(
            "avg_seq_len × 4 layers × h × 2 bytes a sample: 268 MB at 8192 tokens for Llama-3.1-8B",
            "speculators docs/user_guide/tutorials/train.md, 'Estimating Disk Space' (commit c05b95b)",
        ),
        Published(
            "users report acceptance lengths ~1.9 after training; told to regenerate answers with the target "
            "and use far more samples (> 500k)",
            "SpecForge issue 128, speculators issue 751, EAGLE issue 194",
        ),
    ],
}

DATA_AND_SERVERS = [
    (
        "Medusa",
        "conversations, best answered by the target itself (self-distillation); trained online on the "
        "target's last hidden state",
        "vLLM --speculative-config method medusa; not llama.cpp b11434, not SGLang",
    ),
    (
        "EAGLE-1",
        "conversations plus the target's top-layer hidden state for every token (online, or saved: h × 2 B/token)",
        "vLLM method eagle; SGLang --speculative-algorithm EAGLE; not llama.cpp b11434",
    ),
    (
        "EAGLE-3",
        "conversations regenerated by the target, plus 3 layers' hidden states (low, mid, high) and the last "
        "layer's for every token (online, or saved: 4 × h × 2 B/token); a draft vocabulary from token counts",
        "llama.cpp --spec-type draft-eagle3 -md DRAFT.gguf (convert_hf_to_gguf.py --target-model-dir); "
        "vLLM method eagle3; SGLang --speculative-algorithm EAGLE3",
    ),
    (
        "draft model",
        "none if a smaller model with the same tokenizer exists; to distil one: the target's answers",
        "llama.cpp -md DRAFT.gguf --spec-type draft-simple; vLLM method draft_model; SGLang STANDALONE",
    ),
    (
        "lookup (n-gram cache)",
        "the target's own outputs as text (spectui drafts data), hashed into 2-gram counts — no GPU, no training",
        "llama.cpp --spec-type ngram-cache --lookup-cache-static FILE (built by llama-lookup-create)",
    ),
    *(
        # the rest of llama.cpp's --spec-type values (backends.spectypes): no training spectui costs here
        (
            f"{t.name} (llama.cpp)",
            f"{t.needs}; drafts with {t.drafts_with}"
            + (f"; keeps state {t.state} (a warm server drafts otherwise)" if t.stateful else ""),
            t.servers,
        )
        for t in SPEC_TYPES.values()
        if t.name
        in ("draft-mtp", "draft-dflash", "draft-dspark", "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod")
    ),
]


@dataclass(frozen=True)
class CostInputs:
    seq_len: int = 2048
    batch: int = 1
    samples: int = 5000
    tokens_per_sample: int | None = None  # the average; default seq_len
    epochs: int = 1
    medusa_heads: int = 4  # MedusaConfig's default medusa_num_heads
    medusa_layers: int = 1  # MedusaConfig's default medusa_num_layers
    draft_vocab: int = 32000  # SpecForge and speculators default draft_vocab_size
    ttt_steps: int = 3  # speculators Eagle3DraftModel.forward default ttt_steps (SpecForge's ttt_length: 7)
    target_bytes: int = 2  # the trainers load the frozen target in bf16
    mfu: float = 0.4  # fraction of peak the training reaches (an assumption, shown as such)
    gpu: str | None = None
    gpus: int = 1
    prompt_tps: float | None = None  # the target's prompt throughput measured on this machine
    prompt_tps_source: str | None = None

    @property
    def tokens(self) -> int:
        return self.samples * (self.tokens_per_sample or self.seq_len)


@dataclass(frozen=True)
class Part:
    """One figure and the formula it came from, numbers put in."""

    name: str
    value: float
    formula: str

    def to_json(self) -> dict:
        return {"name": self.name, "value": self.value, "formula": self.formula}


@dataclass
class MethodCost:
    method: str  # medusa | eagle1 | eagle3 | eagle3-speculators | draft-model
    title: str
    trainable: list[Part]
    frozen: list[Part]  # parameters held by the draft but not trained
    memory: list[Part]  # bytes while training, online (the target resident)
    disk_per_token: Part | None
    flops_per_token: list[Part]  # per training token per epoch
    target_online: bool  # the target runs a forward pass every epoch (no saved hidden states)
    time: list[Part] = field(default_factory=list)
    published: list[Published] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def trainable_params(self) -> int:
        return int(sum(p.value for p in self.trainable))

    @property
    def memory_bytes(self) -> float:
        return sum(p.value for p in self.memory)

    def to_json(self) -> dict:
        return {
            "method": self.method,
            "title": self.title,
            "trainable_params": self.trainable_params,
            "trainable": [p.to_json() for p in self.trainable],
            "frozen": [p.to_json() for p in self.frozen],
            "memory_bytes": self.memory_bytes,
            "memory": [p.to_json() for p in self.memory],
            "disk_per_token": self.disk_per_token.to_json() if self.disk_per_token else None,
            "flops_per_token": [p.to_json() for p in self.flops_per_token],
            "target_online": self.target_online,
            "time": [p.to_json() for p in self.time],
            "published": [{"figure": p.figure, "source": p.source} for p in self.published],
            "notes": self.notes,
        }


def n(x: float) -> str:
    """A count as people write it: 1,234,567."""
    return f"{int(round(x)):,}"


def attention_params(s: ModelShape, in_width: int) -> tuple[int, str]:
    """q, k, v from `in_width` and o back to h (no biases: the drafts' layers have none)."""
    q = in_width * s.heads * s.head_dim
    kv = 2 * in_width * s.kv_heads * s.head_dim
    o = s.heads * s.head_dim * s.hidden
    return q + kv + o, (
        f"q {in_width}·{s.heads}·{s.head_dim} + k,v 2·{in_width}·{s.kv_heads}·{s.head_dim} + o "
        f"{s.heads}·{s.head_dim}·{s.hidden}"
    )


def mlp_params(s: ModelShape) -> tuple[int, str]:
    return 3 * s.hidden * s.intermediate, f"gate, up, down 3·{s.hidden}·{s.intermediate}"


def _training_memory(s: ModelShape, inp: CostInputs, trainable: int, frozen: int, acts: list[Part]) -> list[Part]:
    per = BYTES_WEIGHT + BYTES_GRAD + BYTES_OPTIMIZER
    return [
        Part(
            "frozen target (online)",
            s.params * inp.target_bytes,
            f"{n(s.params)} params × {inp.target_bytes} B",
        ),
        Part("trainable weights (bf16)", trainable * BYTES_WEIGHT, f"{n(trainable)} × {BYTES_WEIGHT} B"),
        Part("gradients (bf16)", trainable * BYTES_GRAD, f"{n(trainable)} × {BYTES_GRAD} B"),
        Part(
            "Adam: fp32 master + m + v",
            trainable * BYTES_OPTIMIZER,
            f"{n(trainable)} × {BYTES_OPTIMIZER} B (16 B a trainable parameter in all: ZeRO §3.1; {per} here)",
        ),
        Part("frozen draft parts (bf16)", frozen * BYTES_WEIGHT, f"{n(frozen)} × {BYTES_WEIGHT} B"),
        *acts,
    ]


def _layer_acts(s: ModelShape, inp: CostInputs, times: int, label: str) -> Part:
    sb = inp.seq_len * inp.batch
    v = ACT_BYTES_PER_LAYER_TOKEN_H * sb * s.hidden * times
    return Part(
        f"activations: {label}",
        v,
        f"{ACT_BYTES_PER_LAYER_TOKEN_H}·s·b·h{f' × {times}' if times > 1 else ''} = "
        f"{ACT_BYTES_PER_LAYER_TOKEN_H}·{inp.seq_len}·{inp.batch}·{s.hidden}{f'·{times}' if times > 1 else ''} "
        "(Korthikanti et al. 2022 with FlashAttention)",
    )


def _logits(inp: CostInputs, vocab: int, times: int, label: str) -> Part:
    sb = inp.seq_len * inp.batch
    return Part(
        f"activations: {label}",
        4 * sb * vocab * times,
        f"fp32 logits s·b·V·4{f' × {times}' if times > 1 else ''} = {inp.seq_len}·{inp.batch}·{vocab}·4"
        f"{f'·{times}' if times > 1 else ''}",
    )


def medusa(s: ModelShape, inp: CostInputs) -> MethodCost:
    k, L, h, V = inp.medusa_heads, inp.medusa_layers, s.hidden, s.vocab
    blocks = k * L * (h * h + h)
    heads = k * h * V
    trainable = [
        Part("ResBlocks", blocks, f"k·L·(h²+h) = {k}·{L}·({h}²+{h})"),
        Part("LM heads", heads, f"k·h·V = {k}·{h}·{V}"),
    ]
    t = blocks + heads
    acts = [_logits(inp, V, k, f"{k} heads' logits")]
    return MethodCost(
        "medusa",
        f"Medusa-1 ({k} heads × {L} ResBlock)",
        trainable,
        [],
        _training_memory(s, inp, t, 0, acts),
        Part("offline hidden states", h * 2, f"the last hidden state: h × 2 B = {h}·2 (Medusa-1 trains online)"),
        [Part("heads forward+backward", 6 * t, f"6 × {n(t)}")],
        target_online=True,
        notes=[
            "Medusa's typical acceptance is not lossless; greedy (top-1) verification is",
            "medusa_model.py repeats one ResBlock L times ([ResBlock(h)] * L): its heads hold h²+h whatever L",
        ],
    )


def eagle1(s: ModelShape, inp: CostInputs) -> MethodCost:
    h, V = s.hidden, s.vocab
    attn, attn_f = attention_params(s, h)
    mlp, mlp_f = mlp_params(s)
    trainable = [
        Part("decoder layer: attention", attn, attn_f),
        Part("decoder layer: MLP", mlp, mlp_f),
        Part("decoder layer: post-attention norm", h, f"h = {h} (layer 0 has no input norm)"),
        Part("fc 2h→h with bias", 2 * h * h + h, f"2h·h + h = 2·{h}·{h} + {h}"),
    ]
    t = sum(int(p.value) for p in trainable)
    frozen = [Part("embeddings (the target's)", V * h, f"V·h = {V}·{h}")]
    acts = [
        _layer_acts(s, inp, 1, "the decoder layer"),
        Part(
            "activations: fc input",
            2 * inp.seq_len * inp.batch * 2 * h,
            f"s·b·2h·2 B = {inp.seq_len}·{inp.batch}·{2 * h}·2",
        ),
        _logits(inp, V, 1, "logits through the target's LM head"),
    ]
    return MethodCost(
        "eagle1",
        "EAGLE-1 (one decoder layer, fc 2h→h)",
        trainable,
        frozen,
        _training_memory(s, inp, t, V * h, acts),
        Part("offline hidden states", h * 2, f"1 layer × h × 2 B = {h}·2"),
        [
            Part("draft forward+backward", 6 * t, f"6 × {n(t)}"),
            Part("frozen LM head forward + input gradient", 4 * h * V, f"4·h·V = 4·{h}·{V}"),
        ],
        target_online=False,
        published=PUBLISHED["eagle1"],
    )


def _eagle3_parts(s: ModelShape, inp: CostInputs) -> tuple[list[Part], int]:
    h = s.hidden
    vd = min(inp.draft_vocab, s.vocab)
    attn, attn_f = attention_params(s, 2 * h)
    mlp, mlp_f = mlp_params(s)
    parts = [
        Part("fc 3h→h", 3 * h * h, f"3h·h = 3·{h}·{h}"),
        Part("decoder layer: attention, q/k/v from 2h", attn, attn_f),
        Part("decoder layer: MLP", mlp, mlp_f),
        Part("norms: hidden, input, post-attention, final", 4 * h, f"4h = 4·{h}"),
    ]
    return parts, vd


def _eagle3_activations(s: ModelShape, inp: CostInputs, vd: int) -> list[Part]:
    """What EAGLE-3's training holds in activations: the 3 fused layers' hidden states, the decoder layer and
    the draft logits over the test-time-training steps, the target's probabilities on the draft vocabulary."""
    h, T = s.hidden, inp.ttt_steps
    return [
        Part(
            "activations: the 3 layers' hidden states in",
            inp.seq_len * inp.batch * 3 * h * 2,
            f"s·b·3h·2 B = {inp.seq_len}·{inp.batch}·{3 * h}·2",
        ),
        _layer_acts(s, inp, T, f"the decoder layer over {T} test-time-training steps"),
        _logits(inp, vd, T, f"draft logits over {T} steps"),
        _logits(inp, vd, 1, "target's probabilities on the draft vocabulary"),
    ]


def eagle3(s: ModelShape, inp: CostInputs, trainer: str = "specforge") -> MethodCost:
    """EAGLE-3 as SpecForge trains it (its draft LM head trained) or as speculators does (frozen)."""
    h, V = s.hidden, s.vocab
    parts, vd = _eagle3_parts(s, inp)
    head = Part("LM head h→Vd", h * vd, f"h·Vd = {h}·{vd}")
    frozen = [Part("embeddings (the target's)", V * h, f"V·h = {V}·{h}")]
    if trainer == "specforge":
        trainable = [*parts, head]
        title, method = "EAGLE-3 (SpecForge: the draft LM head is trained)", "eagle3"
    else:
        trainable = parts
        frozen += [
            Part("LM head h→Vd (frozen)", h * vd, f"h·Vd = {h}·{vd}"),
            Part("verifier LM head h→Vd + verifier norm", h * vd + h, f"h·Vd + h = {h}·{vd} + {h}"),
        ]
        title, method = "EAGLE-3 (speculators: the draft LM head is copied and frozen)", "eagle3-speculators"
    t = sum(int(p.value) for p in trainable)
    fz = sum(int(p.value) for p in frozen)
    T = inp.ttt_steps
    acts = _eagle3_activations(s, inp, vd)
    layer = sum(int(p.value) for p in parts[1:])
    head_flops = 6 if trainer == "specforge" else 4
    return MethodCost(
        method,
        title,
        trainable,
        frozen,
        _training_memory(s, inp, t, fz, acts),
        Part("offline hidden states", 4 * h * 2, f"4 layers (3 fused + last) × h × 2 B = 4·{h}·2"),
        [
            Part("fc forward+backward", 6 * 3 * h * h, "6·3h·h, once"),
            Part(f"layer forward+backward × {T} steps", 6 * layer * T, f"6 × {n(layer)} × {T}"),
            Part(
                f"LM head × {T} steps",
                head_flops * h * vd * T,
                f"{head_flops}·h·Vd·{T} ({'trained' if trainer == 'specforge' else 'frozen: forward + input gradient'})",
            ),
        ],
        target_online=False,
        published=PUBLISHED["eagle3"],
        notes=[f"draft vocabulary {vd} of {V} tokens, mapped by d2t ({vd} × int64) and t2d ({V} × bool)"],
    )


def draft_model(s: ModelShape, inp: CostInputs, draft: ModelShape | None) -> MethodCost:
    if draft is None:
        return MethodCost(
            "draft-model",
            "draft model (an existing smaller model, same tokenizer)",
            [],
            [],
            [],
            None,
            [],
            target_online=False,
            notes=[
                "nothing to train when a smaller model of the same family exists (give --draft MODEL to cost "
                "distilling one); spectui setup's draft is SmolLM2 requantised to Q2_K"
            ],
        )
    t = draft.params
    acts = [
        _layer_acts(draft, inp, draft.layers, f"{draft.layers} layers of the draft"),
        _logits(inp, draft.vocab, 1, "draft logits"),
    ]
    return MethodCost(
        "draft-model",
        f"draft model distilled from the target ({draft.source})",
        [Part("the whole draft", t, draft.params_how)],
        [],
        _training_memory(s, inp, t, 0, acts),
        Part("saved data", 4, "token ids: 4 B a token (answers regenerated by the target)"),
        [
            Part("draft forward+backward", 6 * t, f"6 × {n(t)}"),
            Part("target forward for its logits", 2 * s.params, f"2 × {n(s.params)}"),
        ],
        target_online=True,
    )


def add_time(m: MethodCost, s: ModelShape, inp: CostInputs) -> None:
    """Time for the target's forward passes (measured here, where a server's prompt throughput is given)
    and for training on the GPU (its datasheet throughput × an assumed utilisation)."""
    tokens = inp.tokens
    if not m.trainable:
        return
    passes = inp.epochs if m.target_online else 1
    if inp.prompt_tps:
        m.time.append(
            Part(
                "target forward over the data, this machine",
                tokens * passes / inp.prompt_tps,
                f"{n(tokens)} tokens × {passes} pass{'es' if passes > 1 else ''} / {inp.prompt_tps:,.1f} tok/s "
                f"({inp.prompt_tps_source})",
            )
        )
        # the FLOP rate the machine showed on the target's prefill, applied to the draft's training FLOPs:
        # a lower bound (PyTorch training on a CPU does not reach llama.cpp's prefill kernels)
        rate = inp.prompt_tps * 2 * s.params
        train = sum(p.value for p in m.flops_per_token) * tokens * inp.epochs
        m.time.append(
            Part(
                "draft training at that FLOP rate (a lower bound)",
                train / rate,
                f"{train:.3g} FLOPs / ({inp.prompt_tps:,.1f} tok/s × 2 × {n(s.params)} = {rate:.3g} FLOP/s)",
            )
        )
    if inp.gpu:
        tflops, _, source = GPUS[inp.gpu]
        rate = tflops * 1e12 * inp.mfu * inp.gpus
        target = 2 * s.params * tokens * passes
        train = sum(p.value for p in m.flops_per_token) * tokens * inp.epochs
        gpu = f"{inp.gpus}× {inp.gpu}" if inp.gpus > 1 else inp.gpu
        m.time.append(
            Part(
                f"target forward, {gpu}",
                target / rate,
                f"2 × {n(s.params)} × {n(tokens)} × {passes} / ({tflops} TFLOPS × {inp.mfu} MFU × {inp.gpus}) "
                f"[{source}]",
            )
        )
        m.time.append(
            Part(
                f"draft training, {gpu}",
                train / rate,
                f"{train:.3g} FLOPs / ({tflops} TFLOPS × {inp.mfu} MFU × {inp.gpus})",
            )
        )


@dataclass
class CostReport:
    shape: ModelShape
    inputs: CostInputs
    methods: list[MethodCost]
    profile: str | None = None
    gpu_memory_gib: float | None = None  # the profile's (or the chosen GPU's) memory, for "fits"

    def to_json(self) -> dict:
        return {
            "target": self.shape.to_json(),
            "inputs": asdict(self.inputs) | {"tokens": self.inputs.tokens},
            "profile": self.profile,
            "gpu_memory_gib": self.gpu_memory_gib,
            "methods": [m.to_json() for m in self.methods],
            "data_and_servers": [{"method": a, "data": b, "servers": c} for a, b, c in DATA_AND_SERVERS],
        }


def estimate(
    shape: ModelShape,
    inputs: CostInputs,
    draft: ModelShape | None = None,
    profile: str | None = None,
    gpu_memory_gib: float | None = None,
) -> CostReport:
    methods = [
        medusa(shape, inputs),
        eagle1(shape, inputs),
        eagle3(shape, inputs, "specforge"),
        eagle3(shape, inputs, "speculators"),
        draft_model(shape, inputs, draft),
    ]
    for m in methods:
        add_time(m, shape, inputs)
    return CostReport(shape, inputs, methods, profile, gpu_memory_gib)


# a prompt of plain prose for timing the target's prefill: repeated to ~`words` words, sent raw
_PROSE = (
    "The river rose through the night, and by morning the low fields were under water. Farmers moved "
    "their animals to the ridge, counted what they had lost, and waited for the current to slow. "
)


async def measure_prompt_throughput(
    backend, words: int = 400, repeats: int = 3, idle_timeout: float = 120.0
) -> tuple[float, str]:
    """The target's prompt (prefill) throughput on this machine, in tokens/s: the median of `repeats`
    cold requests of one generated token each, timed by the server where it reports prompt timings,
    else by the first token's arrival (which includes one decode step)."""
    text = " ".join((_PROSE * (words // 30 + 1)).split()[:words])
    params = GenerationParams(max_tokens=1, temperature=0.0, seed=1, cache_prompt=False, idle_timeout=idle_timeout)
    rates, how = [], "server timings"
    for i in range(repeats):
        rec = await run_side("baseline", backend, f"[{i}] {text}", params)
        if rec.failed is not None:  # its own hint: the stream's names options (--idle-timeout) this command lacks
            raise ServerError(
                f"{backend.url}: timing the prompt failed: {rec.failed.message.split(' — ', 1)[0]}",
                hint=f"the target did not answer a one-token request within {idle_timeout:g} s: check that it is "
                "up and idle, or leave out --baseline for the estimate alone",
            )
        f = rec.figures
        if f.prompt_tokens and f.server_prompt_ms:
            rates.append(f.prompt_tokens / (f.server_prompt_ms / 1000))
        elif f.ttft_ms:
            n_tok = f.prompt_tokens or len(text.split()) * 4 // 3
            rates.append(n_tok / (f.ttft_ms / 1000))
            how = "first-token time (the server reports no prompt timings)"
    if not rates:
        raise ServerError(f"{backend.url}: no timing came back for the prompt")
    med = statistics.median(rates)
    model = getattr(backend.info, "model", None) or "?"
    return med, f"measured: median of {len(rates)} cold prompts of ~{words} words on {backend.url} ({model}), {how}"
