"""The byte comparer: never calls different outputs identical, never flags identical ones."""

import random

from spectui.core.compare import LiveComparer, compare_tokens, escape_bytes, first_difference


def test_identical_outputs_are_identical_even_with_different_token_splits():
    assert compare_tokens([b"Hel", b"lo", b" world"], [b"H", b"ello wor", b"ld"]) is None


def test_first_difference_names_byte_and_tokens():
    d = compare_tokens([b"The ", b"cat", b" sat"], [b"The ", b"cap", b" sat"])
    assert d is not None
    assert d.byte == 6
    assert d.baseline_token == 1 and d.candidate_token == 1
    assert d.baseline_excerpt.startswith(b"The cat") and d.candidate_excerpt.startswith(b"The cap")


def test_prefix_divergence_is_where_the_shorter_ends():
    d = compare_tokens([b"abc", b"def"], [b"abc"])
    assert d.byte == 3
    assert d.baseline_token == 1
    assert d.candidate_token is None  # past the end of the candidate


def test_empty_tokens_do_not_own_bytes():
    # a withheld UTF-8 token carries no bytes; the byte belongs to the token that delivered it
    d = compare_tokens([b"a", b"", b"\xc3\xa9x"], [b"a", b"", b"\xc3\xa9y"])
    assert d.byte == 3 and d.baseline_token == 2


def test_randomised_against_plain_equality():
    rng = random.Random(7)
    for _ in range(500):
        a = bytes(rng.choice(b"ab") for _ in range(rng.randint(0, 30)))
        b = bytes(rng.choice(b"ab") for _ in range(rng.randint(0, 30)))
        ta = [a[i : i + 3] for i in range(0, len(a), 3)]
        tb = [b[i : i + 2] for i in range(0, len(b), 2)]
        d = compare_tokens(ta, tb)
        assert (d is None) == (a == b)
        if d is not None:
            assert a[: d.byte] == b[: d.byte]
            assert d.byte == len(a) or d.byte == len(b) or a[d.byte] != b[d.byte]


def test_large_equal_prefix_uses_block_compare():
    a = b"x" * 10000 + b"A"
    b = b"x" * 10000 + b"B"
    assert first_difference(a, b) == 10000


def test_live_comparer_flags_the_moment_bytes_differ():
    c = LiveComparer()
    assert c.add("baseline", b"Hello") is None
    assert c.add("candidate", b"Hel") is None
    assert c.identical is None
    d = c.add("candidate", b"p!")
    assert d is not None and d.byte == 3 and c.identical is False


def test_live_comparer_prefix_needs_the_shorter_side_finished():
    c = LiveComparer()
    c.add("baseline", b"abc")
    c.add("candidate", b"abcdef")
    assert c.divergence is None
    c.finish("candidate")
    assert c.divergence is None  # the baseline may still send "def"
    c.finish("baseline")
    assert c.divergence.byte == 3


def test_live_comparer_identical_after_both_finish():
    c = LiveComparer()
    c.add("baseline", b"same")
    c.add("candidate", b"sa")
    c.add("candidate", b"me")
    c.finish("baseline")
    c.finish("candidate")
    assert c.identical is True


def test_escape_bytes():
    assert escape_bytes(b"a\nb\x00\xff") == "a\\nb\\x00\\xff"
