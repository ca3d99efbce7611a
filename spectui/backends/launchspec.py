"""A server's command line read once into what spectui needs to know of it: the speculation and cache
configuration as launched (llama.cpp, vLLM, SGLang flags), for triage, the draft probe and the panes; and
what each engine's argv asks of the GPU (engine_args, the memory plan's input). Every reader of a server's
argv goes through this module (flag_value, has_flag)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

# llama.cpp's defaults where a flag is absent: common/common.h, common_params_speculative_ngram_map
NGRAM_SIMPLE_DEFAULT = (12, 48)

_VALUE_FLAGS = {
    "--spec-type": "spec",
    "-md": "draft",
    "--model-draft": "draft",
    "--spec-draft-model": "draft",
    "--spec-draft-n-max": "n_max",
    "--spec-draft-sampling": "draft_sampling",
    "--spec-ngram-simple-size-n": "ngram_n",
    "--spec-ngram-simple-size-m": "ngram_m",
    "--lookup-cache-static": "lookup_static",
    "-lcs": "lookup_static",
    "-ctk": "K",
    "--cache-type-k": "K",
    "-ctv": "V",
    "--cache-type-v": "V",
    "--kv-cache-dtype": "kv",
    "--speculative-algorithm": "spec",
    "--speculative-config": "spec-config",
    # threads, offload and context, for the probes that time a model as the server runs it (common/arg.cpp)
    "-m": "model",
    "--model": "model",
    "-t": "threads",
    "--threads": "threads",
    "-tb": "threads_batch",
    "--threads-batch": "threads_batch",
    "-ngl": "ngl",
    "--gpu-layers": "ngl",
    "--n-gpu-layers": "ngl",
    "-c": "ctx",
    "--ctx-size": "ctx",
    "-td": "threads_draft",
    "--threads-draft": "threads_draft",
    "--spec-draft-threads": "threads_draft",
    "-ngld": "ngl_draft",
    "--gpu-layers-draft": "ngl_draft",
    "--n-gpu-layers-draft": "ngl_draft",
    "--spec-draft-ngl": "ngl_draft",
}
_CACHE_OFF = ("--no-cache-prompt", "--disable-radix-cache", "--no-enable-prefix-caching")
_CACHE_ON = ("--cache-prompt", "--enable-prefix-caching")
# KV-cache types that are not lossless against f16/bf16 (llama.cpp -ctk/-ctv, vLLM/SGLang --kv-cache-dtype)
_LOSSLESS_KV = {"f16", "bf16", "f32", "auto"}


@dataclass(frozen=True)
class LaunchSpec:
    """What a launch command line configures, each value as given (None: not on the command line)."""

    argv: tuple[str, ...] = ()
    values: dict[str, str] = field(default_factory=dict)  # spectui's names above → the value given
    prefix_cache: bool | None = None

    @classmethod
    def from_argv(cls, argv: Sequence[str] | None) -> LaunchSpec:
        if not argv:
            return cls()
        values: dict[str, str] = {}
        cache = None
        args = list(argv)
        for i, a in enumerate(args):
            name, eq, inline = a.partition("=")
            if name in _VALUE_FLAGS and (eq or i + 1 < len(args)):
                values[_VALUE_FLAGS[name]] = inline if eq else args[i + 1]
            elif a in _CACHE_OFF:
                cache = False
            elif a in _CACHE_ON:
                cache = True
        spec = values.get("spec-config")
        if spec is not None:  # vLLM's JSON: its method names the speculation
            try:
                method = json.loads(spec).get("method")
            except (ValueError, AttributeError):
                method = None
            if isinstance(method, str):
                values.setdefault("spec", method)
        return cls(tuple(args), values, cache)

    @property
    def launched(self) -> bool:
        return bool(self.argv)

    @property
    def draft_model(self) -> Path | None:
        v = self.values.get("draft")
        return Path(v) if v else None

    @property
    def spec_type(self) -> str | None:
        return self.values.get("spec")

    def _int(self, key: str, default: int) -> int:
        try:
            return int(self.values[key])
        except (KeyError, ValueError):
            return default

    @property
    def ngram_sizes(self) -> tuple[int, int] | None:
        """ngram-simple's N and M as launched (llama.cpp's defaults where absent); None if not launched."""
        if not self.launched:
            return None
        return self._int("ngram_n", NGRAM_SIMPLE_DEFAULT[0]), self._int("ngram_m", NGRAM_SIMPLE_DEFAULT[1])

    def draft_server_args(self) -> list[str]:
        """The flags that make a draft model's own llama-server run it as this candidate runs its draft:
        b11434 gives the draft the candidate's threads unless -td says otherwise (common/arg.cpp:889
        postprocess_cpu_params(draft.cpuparams, &cpuparams)) and offloads it by -ngld
        (common/speculative.cpp:2553-2556); the context as the candidate's -c. Empty where not launched."""
        out: list[str] = []
        threads = self.values.get("threads_draft") or self.values.get("threads")
        if threads:
            out += ["-t", threads]
        if self.values.get("threads_batch"):
            out += ["-tb", self.values["threads_batch"]]
        if self.values.get("ngl_draft"):
            out += ["-ngl", self.values["ngl_draft"]]
        if self.values.get("ctx"):
            out += ["-c", self.values["ctx"]]
        return out

    @property
    def quantised_kv(self) -> bool:
        """The KV cache was launched in a type that is not lossless (a divergence is then expected)."""
        return any(v.lower() not in _LOSSLESS_KV for k, v in self.values.items() if k in ("K", "V", "kv"))

    def note(self) -> str:
        """`as launched: spec=draft-simple draft=d.gguf n_max=8 prefix cache off` (for panes and triage)."""
        if not self.launched:
            return ""
        shown = ("spec", "draft", "n_max", "K", "V", "kv", "spec-config")
        notes = []
        for key in shown:
            if key in self.values:
                v = self.values[key]
                notes.append(f"{key}={v.rsplit('/', 1)[-1] if key == 'draft' else v}")
        if self.prefix_cache is not None:
            notes.append("prefix cache " + ("on" if self.prefix_cache else "off"))
        return "as launched: " + (" ".join(notes) if notes else "defaults")


# -- reading flags: every reader of a server's argv goes through these ----------------------------------------
def flag_value(argv: Sequence[str] | None, *names: str) -> str | None:
    """The value given to any of `names` (`--flag v` or `--flag=v`), the last one given winning as in
    llama.cpp's, vLLM's and SGLang's parsers; None where absent or given no value (has_flag tells those apart)."""
    found = None
    args = list(argv or ())
    for i, arg in enumerate(args):
        name, eq, val = arg.partition("=")
        if name in names:
            found = val if eq else (args[i + 1] if i + 1 < len(args) else None)
    return found


def has_flag(argv: Sequence[str] | None, *names: str) -> bool:
    """Any of `names` is on the command line (alone or as `--flag=value`)."""
    return any(a.partition("=")[0] in names for a in argv or ())


def without_flags(argv: Sequence[str], names: set[str] | frozenset[str]) -> list[str]:
    """argv without any of `names` and its value (`--flag v` and `--flag=v` alike), e.g. to give a flag anew."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name, eq, _ = arg.partition("=")
        if name in names:
            skip = not eq  # the value is the next argument unless written --flag=value
            continue
        out.append(arg)
    return out


def count_arg(text: str | None) -> int | None:
    """A count as an engine takes it: 4096; vLLM also takes 8k (×1000) and 8K (×1024), m and M alike."""
    if text is None:
        return None
    m = re.fullmatch(r"(\d+)([kKmM]?)", text.strip())
    if not m:
        return None
    scale = {"": 1, "k": 1000, "K": 1024, "m": 10**6, "M": 2**20}[m.group(2)]
    return int(m.group(1)) * scale


@dataclass
class EngineArgs:
    """What an engine's argv asks of the GPU: its models, context, KV types and slots (the memory plan's input)."""

    target: str | None
    draft: str | None = None
    draft_kind: str = "draft"  # draft | eagle head
    algorithm: str | None = None  # the speculation method, as the engine names it
    ctx: int | None = None
    kv_k: str = "auto"
    kv_v: str = "auto"
    kv_draft: tuple[str, str] = ("f16", "f16")  # the draft's KV types (llama.cpp's own flags; else the target's)
    parallel: int | None = None


def _llamacpp_args(argv: Sequence[str]) -> EngineArgs:
    return EngineArgs(
        target=flag_value(argv, "-m", "--model"),
        draft=flag_value(argv, "-md", "--spec-draft-model", "--model-draft"),
        algorithm=flag_value(argv, "--spec-type"),
        ctx=count_arg(flag_value(argv, "-c", "--ctx-size")),
        kv_k=flag_value(argv, "-ctk", "--cache-type-k") or "f16",
        kv_v=flag_value(argv, "-ctv", "--cache-type-v") or "f16",
        kv_draft=(
            flag_value(argv, "-ctkd", "--spec-draft-type-k", "--cache-type-k-draft") or "f16",
            flag_value(argv, "-ctvd", "--spec-draft-type-v", "--cache-type-v-draft") or "f16",
        ),
        parallel=count_arg(flag_value(argv, "-np", "--parallel")),
    )


def _vllm_args(argv: Sequence[str]) -> EngineArgs:
    kv = flag_value(argv, "--kv-cache-dtype") or "auto"
    target = flag_value(argv, "--model")
    args = list(argv)
    if target is None and "serve" in args and args.index("serve") + 1 < len(args):
        target = args[args.index("serve") + 1]  # `vllm serve MODEL`
    out = EngineArgs(target, ctx=count_arg(flag_value(argv, "--max-model-len")), kv_k=kv, kv_v=kv, kv_draft=(kv, kv))
    raw = flag_value(argv, "--speculative-config", "--speculative_config")
    if raw:
        # the JSON carries {variables} inside its strings: keep their names, then parse
        try:
            cfg = json.loads(re.sub(r"\{([a-z_][a-z0-9_]*)\}", r"@@\1@@", raw))
        except ValueError:
            cfg = {}
        out.algorithm = str(cfg.get("method", "")) or None
        model = cfg.get("model")
        if model and out.algorithm not in ("ngram", "mtp", "suffix"):
            out.draft = re.sub(r"@@([a-z_][a-z0-9_]*)@@", r"{\1}", str(model))
            out.draft_kind = "eagle head" if out.algorithm and "eagle" in out.algorithm else "draft"
    return out


def _sglang_args(argv: Sequence[str]) -> EngineArgs:
    kv = flag_value(argv, "--kv-cache-dtype") or "auto"
    algorithm = flag_value(argv, "--speculative-algorithm")
    return EngineArgs(
        target=flag_value(argv, "--model-path", "--model"),
        draft=flag_value(argv, "--speculative-draft-model-path"),
        draft_kind="eagle head" if algorithm and "EAGLE" in algorithm.upper() else "draft",
        algorithm=algorithm.upper() if algorithm else None,
        ctx=count_arg(flag_value(argv, "--context-length")),
        kv_k=kv,
        kv_v=kv,
        kv_draft=(kv, kv),
    )


# the engines spectui launches and sizes, each with its reader (an OpenAI-compatible server is not launched)
_ENGINE_ARGS = {"llama.cpp": _llamacpp_args, "vllm": _vllm_args, "sglang": _sglang_args}


def engine_args(backend: str, argv: Sequence[str]) -> EngineArgs:
    """What a server of kind `backend` is launched to hold; EngineArgs(None) for a kind spectui does not launch."""
    reader = _ENGINE_ARGS.get(backend)
    return reader(argv) if reader is not None else EngineArgs(None)
