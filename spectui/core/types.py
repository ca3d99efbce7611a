"""Plain data shared by every layer: generation parameters, a server's identity, a prompt, counters."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from spectui.core.errors import InputError, printable, redact

# the two sides of every comparison, in the order they are shown, run and written
SIDES = ("baseline", "candidate")


@dataclass
class GenerationParams:
    """What every request asks for (`checked_params` builds one from user input)."""

    max_tokens: int = 128
    temperature: float = 0.0
    seed: int = 42
    cache_prompt: bool | None = None  # None: the server's default
    idle_timeout: float = 120.0  # seconds without an event (keep-alives do not count) before a side fails
    deadline: float | None = 3600.0  # seconds a whole request may take
    top_p: float | None = None  # nucleus sampling (None: the server's default)


@dataclass
class ServerInfo:
    """What a server says about itself, as shown in a pane header and saved with a session."""

    url: str
    backend: str = "llama.cpp"
    build: str | None = None
    model: str | None = None
    n_ctx: int | None = None
    slots: int | None = None
    speculative: dict = field(default_factory=dict)  # as reported: type, draft model, n_max…
    kv_cache: dict = field(default_factory=dict)  # type_k / type_v where reported
    cache_prompt: bool | None = None
    has_chat_template: bool = False
    metrics_enabled: bool | None = None
    model_path: str | None = None  # as the server reports it (for sizing its KV cache locally)

    def describe_speedup(self) -> str:
        """One line naming the speed-up configuration as the server reports it."""
        parts = []
        spec = self.speculative
        stype = spec.get("type")
        if stype and stype != "none":
            s = "speculation on (type reported after the first request)" if stype == "on" else f"spec {stype}"
            if spec.get("draft_model"):
                s += f" draft={spec['draft_model']}"
            if spec.get("n_max") is not None:
                s += f" n_max={spec['n_max']}"
            parts.append(s)
        elif spec.get("n_max") and spec.get("draft_model"):
            parts.append(f"spec draft={spec['draft_model']} n_max={spec['n_max']}")
        else:
            parts.append("no speculation")
        kv = {k: v for k, v in self.kv_cache.items() if k != "from"}  # "from": where the types were read
        if kv:
            parts.append("kv " + "/".join(str(v) for v in kv.values()))
        elif self.kv_cache.get("from"):  # run.kvtypes: a server whose command line spectui could not read
            parts.append(f"KV types {self.kv_cache['from']}")
        if self.cache_prompt is not None:
            parts.append("prompt cache " + ("on" if self.cache_prompt else "off"))
        return ", ".join(parts)

    def to_json(self) -> dict:
        return {
            "url": redact(self.url),
            "backend": self.backend,
            "build": self.build,
            "model": self.model,
            "n_ctx": self.n_ctx,
            "slots": self.slots,
            "speculative": self.speculative,
            "kv_cache": self.kv_cache,
            "cache_prompt": self.cache_prompt,
        }


@dataclass(frozen=True)
class Prompt:
    id: str
    category: str = ""
    messages: list[dict] = field(default_factory=list)
    raw: str | None = None

    def __post_init__(self) -> None:
        # an id or category is a name shown on the terminal: control characters from a prompt file or a
        # session are escaped once, here, so no view prints them raw
        for name in ("id", "category"):
            v = getattr(self, name)
            if isinstance(v, str) and printable(v) != v:
                object.__setattr__(self, name, printable(v))

    @property
    def preview(self) -> str:
        text = self.raw if self.raw is not None else (self.messages[-1]["content"] if self.messages else "")
        text = " ".join(text.split())
        return text if len(text) <= 60 else text[:57] + "…"

    def to_json(self) -> dict:
        d: dict = {"id": self.id, "category": self.category}
        if self.raw is not None:
            d["raw"] = self.raw
        else:
            d["messages"] = self.messages
        return d


def checked_params(
    max_tokens: int,
    temperature: float,
    seed: int,
    cache_prompt: bool | None,
    idle_timeout: float = 120.0,
    deadline: float | None = 3600.0,
) -> GenerationParams:
    """GenerationParams from user input, with a one-line error for values no server should get."""
    for name, v in (("--idle-timeout", idle_timeout), ("--deadline", deadline)):
        if v is not None and not (math.isfinite(v) and v > 0):
            raise InputError(f"{name} must be a positive number of seconds, not {v}")
    if max_tokens < 1:
        raise InputError(f"--max-tokens must be at least 1, not {max_tokens}")
    if not math.isfinite(temperature) or temperature < 0:
        raise InputError(f"--temperature must be a finite number >= 0, not {temperature}")
    return GenerationParams(
        max_tokens=max_tokens,
        temperature=temperature,
        seed=seed,
        cache_prompt=cache_prompt,
        idle_timeout=idle_timeout,
        deadline=deadline,
    )


@dataclass(frozen=True)
class SlotResult:
    """What a slot save/restore/erase did, in spectui's terms (None: the server did not say)."""

    action: str  # "save" | "restore" | "erase"
    slot: int
    tokens: int | None = None  # saved, restored or erased
    file_bytes: int | None = None  # written or read
    filename: str | None = None
    ms: float | None = None  # the server's own timing of the save or restore


@dataclass(frozen=True)
class ServerCounters:
    """A server's cumulative counters in spectui's terms (None: the server does not export it).

    Each backend maps its own metric names onto these, so callers never read a server's names.
    """

    drafted: float | None = None
    accepted: float | None = None
    steps: float | None = None
    accepted_per_position: tuple[float, ...] | None = None
    prompt_tokens: float | None = None
    prompt_cached: float | None = None

    def minus(self, before: ServerCounters | None) -> ServerCounters:
        """These counters less an earlier reading (a field missing in either stays missing)."""
        if before is None:
            return ServerCounters()

        def d(a, b):
            return None if a is None else a - (b or 0.0)

        pos = None
        if self.accepted_per_position is not None:
            prev = before.accepted_per_position or ()
            pos = tuple(v - (prev[i] if i < len(prev) else 0.0) for i, v in enumerate(self.accepted_per_position))
        return ServerCounters(
            d(self.drafted, before.drafted),
            d(self.accepted, before.accepted),
            d(self.steps, before.steps),
            pos,
            d(self.prompt_tokens, before.prompt_tokens),
            d(self.prompt_cached, before.prompt_cached),
        )
