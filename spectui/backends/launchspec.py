"""A server's command line read once into what spectui needs to know of it: the speculation and cache
configuration as launched (llama.cpp, vLLM, SGLang flags), for triage, the draft probe and the panes."""

from __future__ import annotations

import json
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
    def from_argv(cls, argv: list[str] | tuple[str, ...] | None) -> LaunchSpec:
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
