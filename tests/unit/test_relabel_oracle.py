"""core/relabel on hand-made chunks: labels, steps and rejected counts placed from a server's per-step
counts, each expected value worked out here from the rule in the module's docstrings (vLLM's lists hold
only steps that drafted; a chunk of s tokens is s − 1 accepted drafts and the target's token)."""

from __future__ import annotations

import pytest

from spectui.core.events import TokenEvent
from spectui.core.relabel import align, aligned_labels, chunks_of, exact_labels, expand_chunks


def chunked(sizes: list[int], ids: bool = True) -> list[TokenEvent]:
    """A prefill token, then chunks of the given sizes numbered 1, 2, … in `step` (as ChunkLabeller does)."""
    toks = [TokenEvent(0, 0 if ids else None, b"p", 10, "first")]
    for n, size in enumerate(sizes, 1):
        for _ in range(size):
            i = len(toks)
            toks.append(TokenEvent(i, i if ids else None, bytes([97 + i]), 10 + n, "unknown", n))
    return toks


def test_chunks_of_groups_the_tokens_after_prefill_by_their_chunk_number():
    assert chunks_of(chunked([3, 1, 2])) == [[1, 2, 3], [4], [5, 6]]
    assert chunks_of(chunked([])) is None  # only the prefill token: no chunks
    toks = chunked([2])
    toks.append(TokenEvent(3, 3, b"z", 20, "unknown", None))  # a token outside any chunk after the first
    assert chunks_of(toks) is None
    same = chunked([2, 2])
    same[3:5] = [TokenEvent(t.index, t.token_id, t.data, t.t_ns, t.label, 1) for t in same[3:5]]
    assert chunks_of(same) == [[1, 2, 3, 4]]  # one number: one chunk


@pytest.mark.parametrize(
    "sizes,accepted,mapping,unique",
    [
        ([3, 1, 1, 2], [2, 1], [0, None, None, 1], True),  # two chunks of one token drafted nothing
        ([1, 1], [0], [0, None], False),  # either chunk could be the step: the first is taken, not unique
        ([3, 2], [2, 3], [0, 1], True),  # the last step cut short (2 of its 4 tokens) still fits
        ([3, 4], [2, 2], None, False),  # a chunk of 4 where a step gives 3, not at the end: no alignment
        ([5], [1, 2], None, False),  # one chunk holding two engine steps
        ([2, 2], [1], None, False),  # more drafted chunks than steps
        ([], [], [], True),
    ],
)
def test_align_by_hand(sizes, accepted, mapping, unique):
    assert align(sizes, accepted) == (mapping, unique)


def test_aligned_labels_places_each_steps_counts():
    toks = chunked([3, 1, 2])
    out, steps, note = aligned_labels(toks, [2, 1], [4, 3], 99)
    assert [(t.label, t.step, t.rejected) for t in out] == [
        ("first", None, 0),
        ("accepted", 1, 0),
        ("accepted", 1, 0),
        ("target", 1, 2),  # drafted 4, accepted 2: 2 rejected, marked on the target's token
        ("target", None, 0),  # a step that drafted nothing
        ("accepted", 2, 0),
        ("target", 2, 2),
    ]
    assert [(s.step, s.drafted, s.accepted, s.t_ns) for s in steps] == [(1, 4, 2, 99), (2, 3, 1, 99)]
    assert note == "" and [t.data for t in out] == [t.data for t in toks]  # bytes untouched


def test_a_last_step_cut_short_keeps_its_tokens_as_drafts():
    out, _, _ = aligned_labels(chunked([3, 2]), [2, 3], [3, 4], 0)
    # the second step accepted 3 but only 2 tokens came (the limit): both were accepted drafts
    assert [t.label for t in out] == ["first", "accepted", "accepted", "target", "accepted", "accepted"]
    assert [t.rejected for t in out] == [0, 0, 0, 1, 0, 0]


def test_an_ambiguous_alignment_says_so_and_no_alignment_is_none():
    _, _, note = aligned_labels(chunked([1, 1]), [0], [2], 0)
    assert note == "; where rejected drafts sit is ambiguous for steps of one token"
    assert aligned_labels(chunked([5]), [1, 2], [2, 2], 0) is None
    assert aligned_labels(chunked([]), [], [], 0) is None


def test_exact_labels_in_order_and_whether_the_chunks_agreed():
    # tokens already labelled as the chunks suggested: first, then a a t, then a t
    toks = chunked([3, 2])
    labels = ["first", "accepted", "accepted", "target", "accepted", "target"]
    toks = [TokenEvent(t.index, t.token_id, t.data, t.t_ns, lab, t.step) for t, lab in zip(toks, labels)]
    out, steps, agreed = exact_labels(toks, [2, 1], [3, 3], 7)
    assert agreed is True and [t.label for t in out] == labels
    assert [t.rejected for t in out] == [0, 0, 0, 1, 0, 2] and [t.step for t in out][1:] == [1, 1, 1, 2, 2]
    assert [(s.step, s.drafted, s.accepted, s.t_ns) for s in steps] == [(1, 3, 2, 7), (2, 3, 1, 7)]
    _, _, agreed = exact_labels(toks, [1, 2], [3, 3], 7)  # the same tokens, other counts: they disagree
    assert agreed is False
    _, _, agreed = exact_labels(toks, [2], [3], 7)  # tokens left over after the last step
    assert agreed is False


def test_exact_labels_of_a_step_cut_short_still_agree():
    toks = chunked([3, 1])
    labels = ["first", "accepted", "accepted", "target", "accepted"]
    toks = [TokenEvent(t.index, t.token_id, t.data, t.t_ns, lab, t.step) for t, lab in zip(toks, labels)]
    out, _, agreed = exact_labels(toks, [2, 2], [2, 2], 0)  # the second step's 3 tokens cut to 1
    assert agreed is True and [t.label for t in out] == labels


def test_expand_chunks_splits_each_chunk_by_the_servers_counts():
    # no ids: one event per chunk; prefill "p", then steps of accepted 2 and 1 (chunks of 3 and 2 tokens)
    toks = [
        TokenEvent(0, None, b"p", 1, "first"),
        TokenEvent(1, None, b"abc", 2, "unknown"),
        TokenEvent(2, None, b"de", 3, "unknown"),
    ]
    out = expand_chunks(toks, [2, 1], 6)
    assert [(t.index, t.token_id, t.data, t.t_ns) for t in out] == [
        (0, None, b"p", 1),
        (1, None, b"", 2),
        (2, None, b"", 2),
        (3, None, b"abc", 2),  # a chunk's bytes go with its last token
        (4, None, b"", 3),
        (5, None, b"de", 3),
    ]
    cut = expand_chunks(toks, [2, 1], 5)  # the limit cut the last step to one token
    assert len(cut) == 5 and cut[-1].data == b"de" and cut[-1].t_ns == 3
    assert expand_chunks(toks, [2, 1], None) is toks  # no count: nothing to split by
    assert expand_chunks(toks, [2, 1], 3) is toks  # already as many tokens as the server generated
    assert expand_chunks(toks, [2], 6) is toks  # chunks and steps do not pair up
