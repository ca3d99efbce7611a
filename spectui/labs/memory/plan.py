"""The memory plan: whether a comparison's two servers fit on one GPU together, and the share each may take.

For each server of the pair: weights (the model and draft files' sizes, safetensors sizes for Hugging Face
folders, or the profile's stated figures where a file is not on this machine), the KV cache for its context
and slots (spectui.labs.memory.kv), and runtime overhead (figures and sources below), against the GPU's total
and free memory from NVML. If both fit, each engine gets an explicit share that does not overlap the other's
(vLLM --gpu-memory-utilization, SGLang --mem-fraction-static, llama.cpp -ngl/-c); if not, the plan says so
with the numbers and decides one server at a time, each with the GPU to itself.

It lives in labs, not machine, because it reads profiles (store) and the KV calculator (labs).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from spectui.backends.launchspec import EngineArgs, engine_args
from spectui.core.errors import InputError
from spectui.labs.memory.kv import hf_model_dims, kv_bytes, model_dims
from spectui.machine.launcher import MemoryShare, share_flags
from spectui.machine.probes import GPUMemory, GPUProbe
from spectui.store.profiles import Comparison, Profile, StatedModel, variable_value

GIB = 1024**3
MIB = 1024**2

# -- overhead: what a server takes beyond its weights and KV cache -------------------------------------
# The CUDA context every GPU process creates, outside each engine's own accounting. "Depending on the CUDA
# version, used device etc. you might see an allocation of ~700+MB" (PyTorch's maintainer on
# discuss.pytorch.org/t/high-gpu-memory-overhead/81330); lazy module loading (the default on Linux since
# CUDA 12.2) makes it smaller, so 0.75 GiB errs high.
CUDA_CONTEXT = int(0.75 * GIB)
# llama.cpp's compute buffer: an estimate, not a measurement. The logits of one 512-token micro-batch (its
# default -ub) over a 128,256-token vocabulary are 0.24 GiB in f32; doubled for the attention and FFN
# scratch that share the buffer. llama.cpp's own --fit keeps a further 1 GiB free per device by default
# (fit_params_target in common/common.h of the pinned build): the plan's 0.5 GiB margin is smaller.
LLAMACPP_WORKSPACE = int(0.5 * GIB)
# vLLM: what its memory profiler found besides weights and KV cache for Meta-Llama-3-8B (non-torch memory
# 1.79 GiB + PyTorch activation peak 1.26 GiB; the log in vllm-project/vllm PR 10511), plus 1 GiB of CUDA
# graphs, the low end of vLLM's own warning "CUDA graphs can take additional 1~3 GiB memory per GPU"
# (quoted in mlcommons/inference issue 2267). The graphs count inside --gpu-memory-utilization only where
# vLLM's memory profiler estimates them (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, off by default), so a vLLM
# server the plan sizes is launched with it set (machine.launcher.share_env): then all of this sits inside
# the share vLLM is given. Smaller models need less.
VLLM_WORKSPACE = int((1.79 + 1.26 + 1.0) * GIB)
# the plan leaves this much of the free memory unassigned: NVML's free figure moves as the driver and other
# processes allocate, and the overheads above are estimates
MARGIN = int(0.5 * GIB)


def sglang_workspace(total: int, algorithm: str | None, draft_weights: int) -> int:
    """SGLang's own reserve outside --mem-fraction-static (activations, CUDA graphs), by its rule.

    sglang python/sglang/srt/server_args.py, _handle_gpu_memory_settings: 512 MiB + 1.5 MiB per token of
    chunked prefill (2048 under 35 GiB, 8192 under 160 GiB, else 16384) + 2 MiB per CUDA-graph batch size
    (24, 256, 512 in the same classes) + 128 MiB (tp·pp/8 GiB at tp = pp = 1); on a 24 GB card 3760 MiB.
    Speculation adds 2 GiB (EAGLE) or 6 GiB (STANDALONE) "for draft models and cuda graphs"; the draft's
    weights are counted on their own here, so only the rest of that reserve is added.
    """
    gib = total / GIB
    chunk, graph_bs = (2048, 24) if gib < 35 else (8192, 256) if gib < 160 else (16384, 512)
    reserve = (512 + 1.5 * max(chunk, 2048) + 2 * graph_bs + 128) * MIB
    extra = {"STANDALONE": 6 * GIB}.get(algorithm or "", 2 * GIB if algorithm and algorithm != "NGRAM" else 0)
    return int(reserve + max(0, extra - draft_weights))


OVERHEAD_SOURCES = [
    "CUDA context 0.75 GiB per server: '~700+MB' (PyTorch forum, discuss.pytorch.org/t/81330), less with lazy loading",
    "vLLM 4.05 GiB: non-torch 1.79 + activation peak 1.26 GiB profiled for Meta-Llama-3-8B (vLLM PR 10511)"
    " + 1 GiB CUDA graphs (vLLM: 'can take additional 1~3 GiB'), counted inside its share: spectui launches it"
    " with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 (off by default in vLLM)",
    "SGLang: its own reserve rule (server_args.py _handle_gpu_memory_settings), 3.67 GiB on a 24 GB card,"
    " + the part of its speculative reserve (2 GiB EAGLE, 6 GiB STANDALONE) the draft's weights leave",
    "llama.cpp 0.5 GiB compute buffer: estimated (512-token logits over a 128k vocabulary = 0.24 GiB, doubled)",
    "margin 0.5 GiB of the free memory left unassigned",
]


# -- the plan's data ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Term:
    """One line of a server's need: what (weights | KV cache | overhead), of what, how many bytes, from where."""

    kind: str
    label: str
    bytes: int
    source: str


@dataclass
class ServerNeed:
    side: str
    backend: str
    terms: list[Term] = field(default_factory=list)
    ctx: int | None = None
    slots: int = 1
    layers: int | None = None
    draft_layers: int | None = None
    unknown: list[str] = field(default_factory=list)
    workspace: int = 0  # the engine's own overhead (without the CUDA context)

    @property
    def total(self) -> int:
        return sum(t.bytes for t in self.terms)

    def of(self, kind: str) -> int:
        return sum(t.bytes for t in self.terms if t.kind == kind)


@dataclass
class MemoryPlan:
    """The plan for one comparison: `decision` is together | one-at-a-time | too-big | unknown | not-planned."""

    profile: str
    comparison: str
    title: str
    gpu: GPUMemory | None
    servers: list[ServerNeed]
    decision: str
    reason: str
    shares: dict[str, MemoryShare] = field(default_factory=dict)
    margin: int = MARGIN

    @property
    def fits(self) -> bool:
        """Both servers fit on the GPU at once (each gets its share in `shares`)."""
        return self.decision == "together"

    @property
    def one_at_a_time(self) -> bool:
        """They do not fit together but each fits alone: run them one after the other."""
        return self.decision == "one-at-a-time"

    @property
    def usable(self) -> int:
        return max(0, self.gpu.free - self.margin) if self.gpu else 0

    def gpu_line(self) -> str:
        if self.gpu is None:
            return "GPU: none planned"
        g = self.gpu
        return f"GPU: {g.name}, {_g(g.total)} GiB total, {_g(g.free)} GiB free ({g.source})"

    def lines(self, detail: bool = False, with_gpu: bool = True) -> list[str]:
        """The plan as text: each server's need (term by term with `detail`), the decision, the shares."""
        out = [f"{self.comparison} — {self.title}"]
        if with_gpu and self.gpu is not None:
            out.append("  " + self.gpu_line())
        for s in self.servers:
            parts = " + ".join(f"{k} {_g(s.of(k))}" for k in ("weights", "KV cache", "overhead") if s.of(k))
            known = "?" if s.unknown else _g(s.total)
            out.append(f"  {s.side:<9} {s.backend:<9} {known:>5} GiB = {parts or '—'}")
            if detail:
                for t in s.terms:
                    out.append(f"      {t.kind:<8} {t.label:<13} {_g(t.bytes, 2):>6} GiB  {t.source}")
            out += [f"      unknown: {u}" for u in s.unknown]
        out.append(f"  → {self.reason}")
        for side, share in self.shares.items():
            flags = " ".join(share_flags(self._backend(side), share))
            alone = " alone" if share.alone else ""
            out.append(
                f"  {side}{alone}: {share.gib:.1f} GiB ({share.fraction:.1%} of the GPU){': ' + flags if flags else ''}"
            )
        return out

    def _backend(self, side: str) -> str:
        return next((s.backend for s in self.servers if s.side == side), "")

    def to_json(self) -> dict:
        return {
            "comparison": self.comparison,
            "decision": self.decision,
            "reason": self.reason,
            "gpu": None if self.gpu is None else vars(self.gpu),
            "servers": [
                {
                    "side": s.side,
                    "backend": s.backend,
                    "total_bytes": s.total,
                    "terms": [vars(t) for t in s.terms],
                    "unknown": s.unknown,
                }
                for s in self.servers
            ],
            "shares": {side: vars(sh) for side, sh in self.shares.items()},
        }


def _g(n: int, digits: int = 1) -> str:
    return f"{n / GIB:.{digits}f}"


# -- the GPU ------------------------------------------------------------------------------------------------
def gpu_for(profile: Profile, gpu: GPUMemory | None = None, probe: GPUProbe | None = None) -> GPUMemory:
    """The GPU to plan against: the one given, else NVML's first GPU, else the profile's stated floor."""
    if gpu is not None:
        return gpu
    probe = probe or GPUProbe()
    found = probe.memory(0)
    return found if found is not None else floor_gpu(profile, probe.error or "NVML found no GPU")


def floor_gpu(profile: Profile, why: str = "") -> GPUMemory:
    """The track's hardware as the profile states it: a GPU of its floor size, all of it free."""
    floor = int(profile.min_gpu_memory_gib * GIB)
    name = f"track {profile.track or profile.name}'s {profile.min_gpu_memory_gib:g} GiB floor"
    return GPUMemory(floor, floor, name, "assumed all free: no NVIDIA GPU here" + (f", {why}" if why else ""))


# -- the models ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelSize:
    weights: int | None
    dims: dict | None
    source: str
    dtype_bytes: float = 2.0  # of the weights, for an engine's "auto" KV type


def _weights_on_disk(path: Path) -> tuple[int | None, str]:
    if path.is_file():
        return path.stat().st_size, f"file {path.name}"
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            total = json.loads(index.read_text(encoding="utf-8"))["metadata"]["total_size"]
            return int(total), f"{path.name}/model.safetensors.index.json total_size"
        except (OSError, ValueError, KeyError, TypeError):
            pass
    files = sorted(path.glob("*.safetensors")) or sorted(path.glob("*.bin"))
    if files:
        kind = files[0].suffix[1:]
        return sum(f.stat().st_size for f in files), f"{len(files)} {kind} file(s) in {path.name}"
    return None, f"{path.name} holds no .safetensors or .bin weights"


_DTYPE_BYTES = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0, "f32": 4.0, "f16": 2.0, "bf16": 2.0}


def _measure(path: Path) -> ModelSize:
    st = path.stat()
    return _measure_once(str(path.resolve()), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _measure_once(path_text: str, _size: int, _mtime_ns: int) -> ModelSize:
    """Read a model's size and shape once per file version: a GGUF header walk reads every tokenizer string,
    and a profile names the same files in every comparison (x-gpu's plan: 0.82 s here without this, 0.18 s)."""
    path = Path(path_text)
    weights, where = _weights_on_disk(path)
    try:
        dims = hf_model_dims(path) if path.is_dir() else model_dims(path)
        shape = "config.json" if path.is_dir() else "GGUF header"
    except InputError as exc:
        dims, shape = None, exc.one_line()
    dtype = _DTYPE_BYTES.get(str((dims or {}).get("dtype")), 2.0)
    return ModelSize(weights, dims, f"measured: {where}; shape from {shape}", dtype)


def _stated(st: StatedModel, why: str) -> ModelSize:
    size = f"{st.size_gib:g} GiB" if st.size_gib is not None else f"{st.params_b:g}B × {st.dtype}"
    dtype = 4.0 if st.dtype == "f32" else 2.0
    return ModelSize(st.weight_bytes, st.dims(), f"stated: {size} ({st.source}; {why})", dtype)


def size_model(profile: Profile, arg: str, values: dict | None) -> ModelSize:
    """Size a model argv names: `{variable}` (measured where its file is here, else the profile's stated
    figures) or a literal path."""
    m = re.fullmatch(r"\{([a-z_][a-z0-9_]*)\}", arg)
    if not m:
        path = Path(arg)
        return _measure(path) if path.exists() else ModelSize(None, None, f"{arg} is not on this machine")
    name = m.group(1)
    var = profile.variables.get(name)
    value, origin = variable_value(profile, name, values)
    stated = var.stated if var else None
    set_by_user = var is not None and not origin.startswith(var.env + " not set")
    if stated is not None and var is not None and not set_by_user:
        return _stated(stated, f"{var.env} not set")
    if value and Path(value).exists():
        size = _measure(Path(value))
        return ModelSize(size.weights, size.dims, f"{size.source} ({origin})", size.dtype_bytes)
    if stated is not None:
        return _stated(stated, f"{value} is not on this machine")
    how = f"set {var.env}" if var else "run `spectui setup`"
    return ModelSize(None, None, f"{{{name}}}: {origin}" + (f" ({value} not found)" if value else "") + f"; {how}")


# -- each engine's way with memory (what its argv asks for: backends.launchspec.engine_args) ---------------
def _floor3(x: float) -> float:
    return math.floor(x * 1000) / 1000


@dataclass(frozen=True)
class EngineMemory:
    """What the plan knows of one engine it launches."""

    # a KV pool for the profile's [memory] slots sequences of full context (vLLM, SGLang: vLLM will not start
    # with less than one); else the argv's context is the whole cache, shared by its slots (llama.cpp -c, -np)
    kv_per_slot: bool
    # (GPU total, its argv, the draft's weights) → its own overhead without the CUDA context, and its source
    workspace: Callable[[int, EngineArgs, int], tuple[int, str]]
    # (its need, the bytes it is given, the GPU, free memory at its start) → the share flag's fraction; None for
    # an engine that takes what its layers and context need (llama.cpp: all layers and -c), given no spare
    fraction: Callable[[ServerNeed, int, GPUMemory, int], float] | None = None


def _vllm_fraction(need: ServerNeed, gib_bytes: int, gpu: GPUMemory, free_at_start: int) -> float:
    # vLLM's share is a fraction of the GPU's total, counted after its CUDA context exists
    return _floor3((gib_bytes - CUDA_CONTEXT) / gpu.total)


def _sglang_fraction(need: ServerNeed, gib_bytes: int, gpu: GPUMemory, free_at_start: int) -> float:
    # SGLang's is the static part (weights + KV pool) as a fraction of the memory free at its start,
    # measured after its CUDA context; its activations and graphs come out of the rest
    return _floor3((gib_bytes - CUDA_CONTEXT - need.workspace) / max(1, free_at_start - CUDA_CONTEXT))


def _sglang_ws(total: int, args: EngineArgs, draft_weights: int) -> tuple[int, str]:
    how = "SGLang's own reserve rule for this GPU size" + (f", {args.algorithm}" if args.algorithm else "")
    return sglang_workspace(total, args.algorithm, draft_weights), how


ENGINES = {
    "llama.cpp": EngineMemory(
        False, lambda *_: (LLAMACPP_WORKSPACE, "compute buffer, estimated (see overhead figures)")
    ),
    "vllm": EngineMemory(
        True,
        lambda *_: (VLLM_WORKSPACE, "vLLM activations, non-torch memory, CUDA graphs (vLLM's profile of an 8B)"),
        _vllm_fraction,
    ),
    "sglang": EngineMemory(True, _sglang_ws, _sglang_fraction),
}


def _kv_type(engine_type: str, model: ModelSize) -> str:
    if engine_type in ("auto", "bfloat16", "float16", "half"):
        return "f32" if model.dtype_bytes == 4.0 else "f16"  # vLLM/SGLang "auto": the model's own dtype
    return engine_type


def server_need(profile: Profile, side: str, backend: str, argv: list[str], total: int, values=None) -> ServerNeed:
    """What one server of the pair needs on the GPU, term by term, with where each figure came from."""
    need = ServerNeed(side, backend)
    args = engine_args(backend, argv)
    if args.target is None:
        need.unknown.append("argv names no model")
        return need
    engine = ENGINES.get(backend)
    if engine is None:
        need.unknown.append(f"{backend}: spectui does not launch or size this engine")
        return need
    target = size_model(profile, args.target, values)
    draft = size_model(profile, args.draft, values) if args.draft else None
    models = [("target", target)] + ([(args.draft_kind, draft)] if draft else [])
    for label, m in models:
        if m.weights is None:
            need.unknown.append(f"{label} weights: {m.source}")
        else:
            need.terms.append(Term("weights", label, m.weights, m.source))
    ctx = args.ctx or (target.dims or {}).get("context_trained")
    need.ctx = int(ctx) if ctx else None
    need.slots = profile.slots if engine.kv_per_slot else (args.parallel or 1)
    tokens = (need.ctx or 0) * profile.slots if engine.kv_per_slot else need.ctx
    slots = f" × {profile.slots} slot{'s' if profile.slots > 1 else ''}" if engine.kv_per_slot else ""
    why_ctx = "" if args.ctx else " (no context flag: the model's trained context)"
    for label, m in models:
        kinds = args.kv_draft if label != "target" else (args.kv_k, args.kv_v)
        if m.dims is None or not need.ctx:
            need.unknown.append(f"{label} KV cache: shape or context unknown ({m.source})")
            continue
        k, v = (_kv_type(t, m) for t in kinds)
        try:
            b = kv_bytes(m.dims, tokens or 0, k, v)
        except InputError as exc:
            need.unknown.append(f"{label} KV cache: {exc.one_line()}")
            continue
        n = m.dims["layers"]
        shape = f"{n} layer{'s' if n > 1 else ''} × {m.dims['kv_heads']} KV heads × {m.dims['head_k']}"
        need.terms.append(Term("KV cache", label, b, f"{need.ctx} tokens{slots}{why_ctx}, {shape}, {k}/{v}"))
    need.layers = (target.dims or {}).get("layers")
    need.draft_layers = (draft.dims or {}).get("layers") if draft else None
    need.workspace, ws_src = engine.workspace(total, args, (draft.weights or 0) if draft else 0)
    need.terms.append(Term("overhead", "CUDA context", CUDA_CONTEXT, "per process (see overhead figures)"))
    need.terms.append(Term("overhead", "engine", need.workspace, ws_src))
    return need


# -- the decision ---------------------------------------------------------------------------------------------
def _share(need: ServerNeed, gib_bytes: int, gpu: GPUMemory, free_at_start: int, alone: bool) -> MemoryShare:
    fraction = gib_bytes / gpu.total
    engine = ENGINES[need.backend]
    if engine.fraction is not None:
        share = engine.fraction(need, gib_bytes, gpu, free_at_start)
        return MemoryShare(round(gib_bytes / GIB, 2), round(fraction, 3), share, None, None, None, alone)
    # it takes what its layers and context need: all layers (+1, the output layer) and -c
    layers = need.layers + 1 if need.layers else None
    ngld = need.draft_layers + 1 if need.draft_layers else None
    return MemoryShare(round(gib_bytes / GIB, 2), round(fraction, 3), None, layers, ngld, need.ctx, alone)


def decide(
    profile: Profile, comparison: Comparison, gpu: GPUMemory, servers: list[ServerNeed], margin: int = MARGIN
) -> MemoryPlan:
    plan = MemoryPlan(profile.name, comparison.id, comparison.title, gpu, servers, "unknown", "", margin=margin)
    unknown = [f"{s.side}: {u}" for s in servers for u in s.unknown]
    if unknown:
        plan.reason = "cannot plan until every size is known: " + "; ".join(unknown)
        return plan
    usable = plan.usable
    needs = [s.total for s in servers]
    room = f"{_g(usable)} GiB usable (free {_g(gpu.free)} − {_g(margin)} margin)"
    if sum(needs) <= usable:
        spare = usable - sum(needs)
        growers = [s for s in servers if ENGINES[s.backend].fraction is not None]  # their KV pools use the spare
        free_at_start = gpu.free
        for s in servers:
            extra = spare // len(growers) if s in growers else 0
            plan.shares[s.side] = _share(s, s.total + extra, gpu, free_at_start, alone=False)
            free_at_start -= s.total + extra  # they start one after the other (Launcher.start_all)
        plan.decision = "together"
        plan.reason = f"together {_g(sum(needs))} GiB ≤ {room}: both at once, each with its own share"
        return plan
    too_big = [s for s in servers if s.total > usable]
    if too_big:
        plan.decision = "too-big"
        plan.reason = "does not fit even alone: " + ", ".join(
            f"{s.side} needs {_g(s.total)} GiB > {room}" for s in too_big
        )
        return plan
    for s in servers:
        plan.shares[s.side] = _share(s, usable, gpu, gpu.free, alone=True)
    plan.decision = "one-at-a-time"
    plan.reason = (
        f"together {_g(sum(needs))} GiB > {room}: one server at a time, each alone "
        f"({', '.join(f'{s.side} {_g(s.total)}' for s in servers)} GiB)"
    )
    return plan


def plan_pair(
    profile: Profile, comparison: Comparison, gpu: GPUMemory | None = None, values: dict | None = None
) -> MemoryPlan:
    """The memory plan for one comparison of a profile, against `gpu` (default: NVML, else the profile's floor)."""
    if profile.gpu_vendor != "nvidia":
        where = {"none": "the CPU and host RAM", "apple": "Apple unified memory (no NVML figures)"}
        why = where.get(profile.gpu_vendor, "whatever this machine has")
        return MemoryPlan(
            profile.name, comparison.id, comparison.title, None, [], "not-planned", f"runs on {why}: no GPU plan"
        )
    gpu = gpu_for(profile, gpu)
    servers = [
        server_need(profile, side, spec.backend, spec.argv, gpu.total, values)
        for side, spec in (("baseline", comparison.baseline), ("candidate", comparison.candidate))
    ]
    return decide(profile, comparison, gpu, servers)


def plan_profile(profile: Profile, gpu: GPUMemory | None = None, values: dict | None = None) -> list[MemoryPlan]:
    """Plans for every comparison of a profile, against one reading of the GPU."""
    if profile.gpu_vendor == "nvidia":
        gpu = gpu_for(profile, gpu)
    return [plan_pair(profile, c, gpu, values) for c in profile.comparisons]


def summary(plan: MemoryPlan) -> str:
    """One line for a list: the decision and the two needs."""
    if plan.decision == "not-planned":
        return f"{plan.comparison}: {plan.reason}"
    if plan.decision == "unknown":
        return f"{plan.comparison}: sizes unknown ({len([u for s in plan.servers for u in s.unknown])} missing)"
    needs = " + ".join(_g(s.total) for s in plan.servers)
    word = {"together": "both at once", "one-at-a-time": "one at a time", "too-big": "does not fit"}[plan.decision]
    return f"{plan.comparison}: {word} ({needs} GiB of {_g(plan.usable)} usable)"
