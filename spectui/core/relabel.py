"""Labels made exact after the fact, from per-step counts a server reports at the end of a request."""

from __future__ import annotations

import dataclasses

from spectui.core.events import StepEvent, TokenEvent


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
