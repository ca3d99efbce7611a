"""Labels for servers that stream one engine step per chunk (vLLM, SGLang).

Under speculation a step's chunk holds its accepted drafts followed by the target's own token, so a
chunk of n tokens is read as n−1 `accepted` and one `target` — inferred from chunking. When the server
reports each step's accepted and drafted counts at the end (vLLM's per-request detailed metrics), the
labels and the rejected count per step are made exact from them. A chunk's bytes are given to its last
token (the server does not split them by token).
"""

from __future__ import annotations

from spectui.core.events import TokenEvent


class ChunkLabeller:
    """`speculative`: True (the server speculates), False (it does not), None (it does not say: every
    token after the first is `unknown`, never guessed)."""

    def __init__(self, speculative: bool | None) -> None:
        self.speculative = speculative
        self.index = 0
        self.chunks: list[int] = []  # tokens per chunk after the first
        self.step = 0

    def feed(self, data: bytes, ids: list[int] | None, n: int, t_ns: int) -> list[TokenEvent]:
        out: list[TokenEvent] = []
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
            elif self.speculative is None:
                label, step = "unknown", None
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
