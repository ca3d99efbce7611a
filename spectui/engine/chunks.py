"""Labels for servers that stream one engine step per chunk (vLLM, SGLang).

Under speculation a step's chunk holds its accepted drafts followed by the target's own token, so a
chunk of n tokens is read as n−1 `accepted` and one `target` — inferred from chunking. When the server
reports each step's accepted and drafted counts at the end (vLLM's per-request detailed metrics), the
labels and the rejected count per step are made exact from them. A chunk's bytes are given to its last
token (the server does not split them by token).
"""

from __future__ import annotations

import dataclasses

from spectui.engine.events import StepEvent, TokenEvent


class ChunkLabeller:
    def __init__(self, speculative: bool) -> None:
        self.speculative = speculative
        self.index = 0
        self.chunks: list[int] = []  # tokens per chunk after the first
        self.step = 0

    def feed(self, data: bytes, ids: list[int] | None, n: int, t_ns: int) -> list[TokenEvent]:
        out = []
        if n <= 0:
            return out
        first_chunk = self.index == 0
        if not first_chunk:
            self.chunks.append(n)
            self.step += 1
        id_list: list[int | None] = list(ids) if ids is not None and len(ids) == n else [None] * n
        for k in range(n):
            if self.index == 0:
                label, step = "first", None
            elif not self.speculative:
                label, step = "target", None
            elif first_chunk:
                label, step = "unknown", None  # tokens after the first in the prefill chunk: no step info
            else:
                label, step = ("accepted" if k < n - 1 else "target"), self.step
            chunk = data if k == n - 1 else b""
            out.append(TokenEvent(self.index, id_list[k], chunk, t_ns, label, step, 0))  # type: ignore[arg-type]
            self.index += 1
        return out


def exact_labels(tokens: list[TokenEvent], per_step_accepted: list[int], per_step_drafted: list[int],
                 t_ns: int) -> tuple[list[TokenEvent], list[StepEvent], bool]:
    """Relabel from the server's per-step counts; returns (tokens, steps, whether chunking agreed)."""
    out = list(tokens)
    steps = [StepEvent(i + 1, int(d), int(a), t_ns) for i, (a, d) in enumerate(zip(per_step_accepted, per_step_drafted))]
    # the first token comes from prefill; each step then yields accepted + 1 tokens (the last can be cut short)
    i = 1
    agreed = True
    for s in steps:
        complete = i + s.accepted + 1 <= len(out)  # the last step can be cut short by a stop or the limit
        for k in range(s.accepted + 1):
            if i >= len(out):
                break
            tok = out[i]
            label = "accepted" if k < s.accepted else "target"
            rejected = s.drafted - s.accepted if label == "target" else 0
            if tok.label != label and complete:
                agreed = False
            out[i] = dataclasses.replace(tok, label=label, step=s.step, rejected=rejected)
            i += 1
    if i < len(out):
        agreed = False
    return out, steps, agreed


def expand_chunks(tokens: list[TokenEvent], per_step_accepted: list[int], completion_tokens: int | None) -> list[TokenEvent]:
    """When a stream carried no token ids (one event per chunk), split each chunk into its tokens using
    the server's per-step counts: the prefill chunk is one token, each later chunk accepted+1 (the last
    cut to what completion_tokens leaves)."""
    if completion_tokens is None or len(tokens) >= completion_tokens or len(tokens) != len(per_step_accepted) + 1:
        return tokens
    out: list[TokenEvent] = []
    sizes = [1] + [a + 1 for a in per_step_accepted]
    left = completion_tokens
    for tok, size in zip(tokens, sizes):
        size = min(size, left)
        for k in range(size):
            out.append(dataclasses.replace(tok, index=len(out), token_id=None, data=tok.data if k == size - 1 else b""))
        left -= size
        if left <= 0:
            break
    return out
