"""Frozen event and result dataclasses shared by live streams, replay and the UI."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Label = Literal["first", "accepted", "target", "unknown"]


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """One generated token as it arrived.

    `data` is the bytes that arrived with this token: llama.cpp withholds a token ending in incomplete
    UTF-8 and sends its bytes with the next one, and holds back text that may begin a stop string, so a
    token's bytes can be empty and a later token can carry several tokens' bytes.
    """

    index: int
    token_id: int | None
    data: bytes
    t_ns: int  # monotonic, taken when the bytes arrived
    label: Label
    step: int | None = None  # verification step this token belongs to (1-based), None outside steps
    rejected: int = 0  # drafts rejected at this position (only on the target token that ends a step)


@dataclass(frozen=True, slots=True)
class StepEvent:
    """A verification step: `drafted` drafts were checked, `accepted` kept, the rest rejected."""

    step: int
    drafted: int
    accepted: int
    t_ns: int

    @property
    def rejected(self) -> int:
        return self.drafted - self.accepted


@dataclass(frozen=True, slots=True)
class StreamStarted:
    t_ns: int
    prompt: str


@dataclass(frozen=True, slots=True)
class SpecReport:
    """What a server says at the end of a request about its speculation (None fields: not reported).

    Backends fill it from their own field names, so figures need no server quirks: per-step counts
    make labels exact; totals alone leave the chunk-inferred labels and set the counts.
    """

    source: str
    per_step_accepted: list[int] | None = None
    per_step_drafted: list[int] | None = None
    steps: int | None = None
    accepted: int | None = None
    drafted: int | None = None
    completion_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class StreamFinished:
    t_ns: int
    stop_type: str
    timings: dict = field(default_factory=dict)
    tokens_evaluated: int | None = None
    tail: bytes = b""  # bytes released only by the final event
    settings: dict = field(default_factory=dict)  # the server's speculative.* generation settings
    spec: SpecReport | None = None  # end-of-request speculation counts (vLLM, SGLang); llama.cpp streams them
    tokens_predicted: int | None = None  # the server's own count of generated tokens (llama.cpp)


@dataclass(frozen=True, slots=True)
class StreamFailed:
    t_ns: int
    message: str


StreamEvent = TokenEvent | StepEvent | StreamStarted | StreamFinished | StreamFailed
