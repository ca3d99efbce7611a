"""The one contract every server backend implements, and the capabilities only some have.

    Backend (abstract)
    ├── LlamaCppBackend    llama.cpp llama-server: /completion with per-token timings and draft counters
    ├── OpenAIBackend      any OpenAI-compatible /v1/completions: text, timing and usage only
    │   ├── VLLMBackend    + token ids, per-request speculation metrics, /metrics, prefix-cache reset
    │   └── SGLangBackend  /generate with meta_info, /metrics, /flush_cache
    ├── ReplayBackend      recorded llama.cpp SSE payloads (tests, benchmarks)
    └── SessionBackend     one side of a saved session (replay; lives in store.replay)

Callers ask `backend.capabilities` what a server can do, never `hasattr`; an optional method a
backend lacks raises Unsupported with a line saying so. Server quirks (field names, metric names,
endpoints) stay inside each backend module: what leaves it is core types and events.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from spectui.backends.metrics import CounterNames, counters_from
from spectui.core.errors import Unsupported
from spectui.core.events import StreamEvent
from spectui.core.findings import ProbeResult, Triage
from spectui.core.types import GenerationParams, ServerCounters, ServerInfo, SlotResult
from spectui.core.verdict import Verdict

if TYPE_CHECKING:
    from spectui.backends.llamacpp_timing import CompletionTimings

OnWait = Callable[[str, float], None]


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do beyond the common contract (all off unless a backend says so)."""

    slots: bool = False  # per-slot state and KV use; save/restore/erase of a slot's cache
    cache_reset: bool = False  # can empty its prompt/prefix cache before a cold run
    cache_prompt_control: bool = False  # honours a per-request prompt-cache on/off
    per_step_counts: bool = False  # reports each verification step's drafted/accepted (exact labels)
    per_request_spec: bool = False  # reports a request's speculation totals at its end
    counters: bool = False  # exports cumulative speculation/cache counters (/metrics)
    logprobs: bool = False  # top log-probabilities per generated token
    token_ids: bool = False  # token ids for every generated token
    chat_template: bool = False  # renders chat prompts with the server's own template (else ChatML)
    # times each request's prompt apart from its decoding (llama.cpp's timings.prompt_ms over prompt_n
    # tokens after cache_n reused): what the cost lab and the sweep's prediction measure; see timed_completion
    prompt_timings: bool = False
    recorded: bool = False  # replays a recording: no live server behind it


class Backend(abc.ABC):
    """One server reached over HTTP (or a recording played as one)."""

    kind: ClassVar[str] = "?"
    capabilities: Capabilities = Capabilities()
    url: str
    info: ServerInfo | None = None

    @abc.abstractmethod
    async def wait_ready(self, timeout: float = 120.0, on_wait: OnWait | None = None) -> None:
        """Return once the server can take a request; ServerLoading when `timeout` runs out."""

    @abc.abstractmethod
    async def identify(self) -> ServerInfo:
        """What the server says about itself (build, model, speculation, KV cache)."""

    @abc.abstractmethod
    async def render_chat(self, messages: list[dict]) -> str:
        """The prompt text for a chat, as this server's template renders it."""

    @abc.abstractmethod
    def stream(self, prompt: str, params: GenerationParams) -> AsyncIterator[StreamEvent]:
        """Stream one completion as events; a failure ends it with StreamFailed, never raises."""

    def recorded_findings(self) -> tuple[Triage | None, ProbeResult | None]:
        """Triage's finding and the draft probe recorded with the prompt just played (a saved session's)."""
        return None, None

    def recorded_verdict(self) -> Verdict | None:
        """The verdict a recording holds for the prompt just played (a saved session's), else None: a live
        server's prompts are judged by the run (core.verdict.judge)."""
        return None

    async def metrics(self) -> dict[str, float] | None:
        """The raw /metrics samples, or None where the server has none."""
        return None

    counter_names: ClassVar[CounterNames | None] = None  # its /metrics names, where it exports counters

    async def counters(self) -> ServerCounters | None:
        """Cumulative counters in spectui's terms, or None where the server exports none."""
        if self.counter_names is None:
            return None
        m = await self.metrics()
        return counters_from(m, self.counter_names) if m is not None else None

    async def kv_usage(self) -> tuple[int, int] | None:
        """(used, capacity) of the KV cache where the server tells, else None."""
        return None

    async def top_logprobs(self, prompt: str, prefix_ids: list[int], n: int = 3) -> list[tuple[int | None, str, float]]:
        """The next token's top-n (id, text, log-probability) after the prompt and the given generated token
        ids, greedy and uncached. Needs capabilities.logprobs."""
        raise Unsupported(f"{self.kind} server at {self.url} gives no log-probabilities")

    async def own_decode_logprobs(
        self, prompt: str, params: GenerationParams, n_tokens: int, n: int = 3
    ) -> list[tuple[int | None, list[tuple[int | None, str, float]]]]:
        """The side's own request again (its prompt text and parameters, `n_tokens` tokens), each token with the
        top-n (id, text, log-probability) the server computed while decoding it: the per-token probabilities
        of the same computation as its stream, not a position asked apart. A token that comes with none (a
        speculative step's: llama.cpp sets no probabilities on verified tokens) has an empty list. Needs
        capabilities.logprobs."""
        raise Unsupported(f"{self.kind} server at {self.url} gives no per-token log-probabilities of its decode")

    async def top_logprobs_in_batch(
        self, prompt: str, prefix_ids: list[int], n: int, batch: int
    ) -> tuple[list[tuple[int | None, str, float]], int]:
        """The same position's top-n as top_logprobs, computed as the last of `batch` tokens evaluated together
        on a cached prefix (batch 1: a one-token decode; k + 1: the shape of a verification batch); also the
        number of tokens the server says it processed in that batch. Only servers with per-request prompt
        timings can show the shape."""
        raise Unsupported(f"{self.kind} server at {self.url} cannot be asked for a batch of a given shape")

    async def timed_completion(self, ids: list[int], n_predict: int, slot: int | None = 0) -> CompletionTimings:
        """A greedy completion of a prompt of token ids with the prompt cache on, pinned to `slot`, and the
        server's own timings of it. Needs capabilities.prompt_timings."""
        raise Unsupported(f"{self.kind} server at {self.url} reports no per-request prompt timings")

    async def tokenize(self, text: str) -> list[int]:
        """The token ids the server makes of a prompt text, as its completion endpoint would (special
        tokens parsed). Needs capabilities.token_ids."""
        raise Unsupported(f"{self.kind} server at {self.url} does not tokenize text")

    async def detokenize(self, ids: list[int]) -> str:
        """The text of token ids. Needs capabilities.token_ids."""
        raise Unsupported(f"{self.kind} server at {self.url} does not detokenize")

    async def greedy_ids(self, context: list[int], n: int, top: int = 2) -> list[tuple[int, list[tuple[int, float]]]]:
        """The model's n greedy next tokens after the context ids, each with its position's `top` best
        (id, log-probability). Needs capabilities.token_ids."""
        raise Unsupported(f"{self.kind} server at {self.url} cannot continue from token ids")

    async def slot_action(self, action: str, slot: int = 0, filename: str | None = None) -> SlotResult:
        """Save, restore or erase a slot's KV cache (a file name inside the server's save folder).
        Needs capabilities.slots."""
        raise Unsupported(f"{self.kind} server at {self.url} cannot save or restore slot caches")

    async def reset_cache(self) -> str:
        """Empty the server's prompt cache; returns what was done. Needs capabilities.cache_reset."""
        raise Unsupported(f"{self.kind} server at {self.url} offers no way to clear its cache")
