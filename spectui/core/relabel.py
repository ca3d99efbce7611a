"""Labels made exact after the fact, from per-step counts a server reports at the end of a request."""

from __future__ import annotations

import dataclasses
import sys

from spectui.core.events import Label, StepEvent, TokenEvent


def chunks_of(tokens: list[TokenEvent]) -> list[list[int]] | None:
    """Token indices per streamed chunk after the prefill chunk (ChunkLabeller numbers chunks in `step`);
    None when the tokens carry no chunk numbers."""
    groups: list[list[int]] = []
    last = object()
    for i, tok in enumerate(tokens):
        if i == 0 or tok.step is None:
            if i and groups:
                return None  # a token outside any chunk after the first: not chunk-numbered
            continue
        if tok.step != last:
            groups.append([])
            last = tok.step
        groups[-1].append(i)
    return groups if groups else None


def align(sizes: list[int], accepted: list[int]) -> tuple[list[int | None] | None, bool]:
    """Which reported step each chunk is (None: a step that drafted nothing), and whether that is unique.

    vLLM's per-step lists hold only steps that carried drafts (its scheduler tests: an empty step leaves
    no entry). A chunk of s tokens is a drafted step with s − 1 accepted; a chunk of 1 token may also be a
    step that drafted nothing; the last chunk can be cut short by a stop or the limit. Every alignment
    gives the same labels (s − 1 accepted, then the target's token); only where a step's rejected drafts
    sit can differ, which `unique` reports. (None, False) when no alignment exists (a chunk holding two
    engine steps, as vLLM's output collector makes when the client lags).
    """
    n, m = len(sizes), len(accepted)
    memo: dict[tuple[int, int], int] = {}

    def ways(i: int, j: int) -> int:
        if i == n:
            return 1 if j == m else 0
        key = (i, j)
        if key not in memo:
            w = 0
            if j < m and (sizes[i] == accepted[j] + 1 or (i == n - 1 and sizes[i] <= accepted[j] + 1)):
                w += ways(i + 1, j + 1)
            if sizes[i] == 1:
                w += ways(i + 1, j)
            memo[key] = min(w, 2)
        return memo[key]

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * n + 100))
    total = ways(0, 0)
    if total == 0:
        return None, False
    out: list[int | None] = []
    i = j = 0
    while i < n:
        if (
            j < m
            and (sizes[i] == accepted[j] + 1 or (i == n - 1 and sizes[i] <= accepted[j] + 1))
            and ways(i + 1, j + 1)
        ):
            out.append(j)
            j += 1
        else:
            out.append(None)
        i += 1
    return out, total == 1


def aligned_labels(
    tokens: list[TokenEvent], per_step_accepted: list[int], per_step_drafted: list[int], t_ns: int
) -> tuple[list[TokenEvent], list[StepEvent], str] | None:
    """Labels from the server's per-step counts placed on the streamed chunks; None when they do not fit.

    Returns (tokens, steps, note): note is "" when exact, else says what is not.
    """
    groups = chunks_of(tokens)
    if groups is None:
        return None
    mapping, unique = align([len(g) for g in groups], per_step_accepted)
    if mapping is None:
        return None
    out = list(tokens)
    steps = [
        StepEvent(i + 1, int(d), int(a), t_ns) for i, (a, d) in enumerate(zip(per_step_accepted, per_step_drafted))
    ]
    for g, j in zip(groups, mapping):
        for k, idx in enumerate(g):
            if j is None:
                out[idx] = dataclasses.replace(out[idx], label="target", step=None, rejected=0)
                continue
            s = steps[j]
            label: Label = "accepted" if k < len(g) - 1 else "target"
            cut = len(g) < s.accepted + 1  # the last step, cut short: its last token is still a draft
            if cut:
                label = "accepted"
            out[idx] = dataclasses.replace(
                out[idx], label=label, step=s.step, rejected=s.drafted - s.accepted if label == "target" else 0
            )
    note = "" if unique else "; where rejected drafts sit is ambiguous for steps of one token"
    return out, steps, note


def exact_labels(
    tokens: list[TokenEvent], per_step_accepted: list[int], per_step_drafted: list[int], t_ns: int
) -> tuple[list[TokenEvent], list[StepEvent], bool]:
    """Relabel from the server's per-step counts in order (one step per chunk, no empty steps);
    returns (tokens, steps, whether chunking agreed)."""
    out = list(tokens)
    steps = [
        StepEvent(i + 1, int(d), int(a), t_ns) for i, (a, d) in enumerate(zip(per_step_accepted, per_step_drafted))
    ]
    # the first token comes from prefill; each step then yields accepted + 1 tokens (the last can be cut short)
    i = 1
    agreed = True
    for s in steps:
        complete = i + s.accepted + 1 <= len(out)  # the last step can be cut short by a stop or the limit
        for k in range(s.accepted + 1):
            if i >= len(out):
                break
            tok = out[i]
            want: Label = "accepted" if k < s.accepted else "target"
            label = want
            rejected = s.drafted - s.accepted if label == "target" else 0
            if tok.label != label and complete:
                agreed = False
            out[i] = dataclasses.replace(tok, label=label, step=s.step, rejected=rejected)
            i += 1
    if i < len(out):
        agreed = False
    return out, steps, agreed


def expand_chunks(
    tokens: list[TokenEvent], per_step_accepted: list[int], completion_tokens: int | None
) -> list[TokenEvent]:
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
