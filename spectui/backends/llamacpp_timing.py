"""llama-server's own timings for one non-streamed completion of token ids: what the cost lab reads
(LlamaCppBackend.timed_completion; capabilities.prompt_timings).

`timings.prompt_ms` runs from the slot starting on the prompt to its first sampled token
(server-common.h, server_slot_stats: t_prompt_last − t_start), over `prompt_n` tokens processed after
`cache_n` reused from the slot's cache; `predicted_ms` covers the `predicted_n − 1` decode steps after
that first token. With the prompt cache on and the request pinned to one slot, a prompt that repeats a
cached prefix and adds k tokens makes the server process exactly those k in one batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from spectui.core.errors import NotLlamaServer


@dataclass(frozen=True)
class CompletionTimings:
    cache_n: int  # prompt tokens reused from the slot's cache
    prompt_n: int  # prompt tokens processed
    prompt_ms: float
    predicted_n: int  # tokens generated, the first (made by the prompt batch) included
    predicted_ms: float  # the predicted_n − 1 decode steps after the first token
    drafted: int  # draft_n: 0 where nothing was drafted (the request did not speculate)

    @property
    def decode_ms_per_token(self) -> float | None:
        """One plain decode step: llama.cpp times decoding from the first sampled token."""
        return self.predicted_ms / (self.predicted_n - 1) if self.predicted_n > 1 and self.predicted_ms > 0 else None


def completion_body(ids: list[int], n_predict: int, slot: int | None) -> dict:
    """POST /completion's body: a prompt of token ids, greedy, prompt cache on, pinned to `slot`."""
    body: dict = {
        "prompt": list(ids),
        "n_predict": n_predict,
        "temperature": 0,
        "cache_prompt": True,
        "stream": False,
        "return_tokens": False,
    }
    if slot is not None:
        body["id_slot"] = slot
    return body


def timings_from(reply: dict, url: str) -> CompletionTimings:
    """The reply's `timings`, each a number, else NotLlamaServer naming the field."""
    t = reply.get("timings")
    if not isinstance(t, dict):
        raise NotLlamaServer(f"{url}/completion gave no timings")

    def num(key: str, kind=float):
        v = t.get(key, 0)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise NotLlamaServer(f"{url}/completion timings.{key} is {v!r}, not a number")
        return kind(v)

    return CompletionTimings(
        num("cache_n", int),
        num("prompt_n", int),
        num("prompt_ms"),
        num("predicted_n", int),
        num("predicted_ms"),
        num("draft_n", int),
    )
