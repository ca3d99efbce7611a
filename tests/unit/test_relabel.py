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
        ([2], [1], [0], True),  # one step, one way
        ([3, 3], [2, 3], [0, 1], True),  # the last chunk one short of its step
        ([3], [2, 1], None, False),  # more steps reported than chunks
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


def brute_align(sizes: list[int], accepted: list[int]) -> tuple[list[int | None] | None, bool]:
    """Every way to give each chunk a reported step (in order) or none, by enumeration: a chunk of s tokens
    is a step that accepted s − 1 (the last chunk: at most that, it can be cut short), only a chunk of one
    token may be a step that drafted nothing, and every reported step is used. The first way in the
    order 'a step before none' is the one taken; unique when there is one way."""
    n, m = len(sizes), len(accepted)
    ways: list[list[int | None]] = []

    def fits(i: int, j: int) -> bool:
        return sizes[i] == accepted[j] + 1 or (i == n - 1 and sizes[i] <= accepted[j] + 1)

    def walk(i: int, j: int, got: list[int | None]) -> None:
        if i == n:
            if j == m:
                ways.append(list(got))
            return
        if j < m and fits(i, j):
            walk(i + 1, j + 1, got + [j])
        if sizes[i] == 1:
            walk(i + 1, j, got + [None])

    walk(0, 0, [])
    return (ways[0], len(ways) == 1) if ways else (None, False)


def test_align_agrees_with_enumerating_every_way():
    import itertools

    cases = 0
    for n in range(5):
        for sizes in itertools.product(range(1, 5), repeat=n):
            for m in range(4):
                for accepted in itertools.product(range(4), repeat=m):
                    assert align(list(sizes), list(accepted)) == brute_align(list(sizes), list(accepted)), (
                        sizes,
                        accepted,
                    )
                    cases += 1
    assert cases > 10_000


def test_a_prefill_chunk_of_several_tokens_is_not_a_chunk():
    # withheld UTF-8 in the prompt's answer: the first chunk held two tokens, neither chunk-numbered
    toks = [TokenEvent(0, 0, b"", 1, "first"), TokenEvent(1, 1, b"\xc3\xa9", 1, "target")]
    toks += [TokenEvent(i, i, b"x", 2, "unknown", 4) for i in range(2, 5)]
    assert chunks_of(toks) == [[2, 3, 4]]


def test_a_chunk_that_drafted_nothing_carries_no_rejected_count():
    toks = chunked([3, 1, 2])
    toks[4] = TokenEvent(4, 4, b"e", 12, "target", 2, 7)  # a stale count on the one-token chunk
    out, _, _ = aligned_labels(toks, [2, 1], [4, 3], 0)
    assert (out[4].label, out[4].step, out[4].rejected) == ("target", None, 0)


def test_exact_labels_number_steps_by_the_servers_order_not_the_chunks():
    toks = chunked([3, 2])
    toks = [
        TokenEvent(t.index, t.token_id, t.data, t.t_ns, t.label, (t.step or 0) + 6 if t.index else None) for t in toks
    ]
    out, _, _ = exact_labels(toks, [2, 1], [3, 3], 0)
    assert [t.step for t in out] == [None, 1, 1, 1, 2, 2]


def test_whether_the_last_step_was_complete_decides_what_a_mismatch_means():
    # the chunker marks each chunk's last token as the target's
    def marked(sizes):
        toks, out = chunked(sizes), []
        ends = {sum(sizes[: k + 1]) for k in range(len(sizes))}  # the chunks' last token indices
        for t in toks:
            out.append(
                TokenEvent(
                    t.index,
                    t.token_id,
                    t.data,
                    t.t_ns,
                    "first" if not t.index else ("target" if t.index in ends else "accepted"),
                    t.step,
                )
            )
        return out

    # the last step cut short (2 of its 3 tokens): the chunker's "target" there is no disagreement
    assert exact_labels(marked([3, 2]), [2, 2], [2, 2], 0)[2] is True
    assert exact_labels(marked([3, 1]), [2, 2], [2, 2], 0)[2] is True
    # the last step whole (3 of 3) but the counts say otherwise: a disagreement
    assert exact_labels(marked([3, 3]), [2, 1], [2, 2], 0)[2] is False
    assert exact_labels(marked([3, 3]), [2, 2], [2, 2], 0)[2] is True


def test_expanded_tokens_carry_no_id():
    toks = [TokenEvent(0, 5, b"p", 1, "first"), TokenEvent(1, 6, b"abc", 2, "unknown")]
    out = expand_chunks(toks, [2], 4)
    assert [t.token_id for t in out] == [None] * 4 and [t.data for t in out] == [b"p", b"", b"", b"abc"]


def test_a_mismatch_in_a_last_step_that_came_whole_is_a_disagreement():
    toks = [
        TokenEvent(0, 0, b"p", 1, "first"),
        TokenEvent(1, 1, b"a", 2, "target"),
        TokenEvent(2, 2, b"b", 2, "target"),
    ]
    out, _, agreed = exact_labels(toks, [1], [1], 0)  # one step: a draft then the target, exactly 2 tokens
    assert agreed is False and [t.label for t in out] == ["first", "accepted", "target"]
