"""core/compare against oracles written here: a plain byte-by-byte loop for where two outputs part, the
token holding a byte counted by hand, excerpts sliced by hand, and the live comparer fed every split of
random outputs, checked against the same loop (never against compare_tokens, which it shares code with)."""

from __future__ import annotations

import random

import pytest

from spectui.core.compare import (
    Divergence,
    LiveComparer,
    compare_ids,
    compare_tokens,
    escape_bytes,
    first_difference,
    token_at,
    token_divergence,
)
from tests.oracles import first_difference as by_hand


def token_holding(tokens: list[bytes], byte: int) -> int | None:
    """The index of the token whose bytes hold `byte`, by walking them; None past the end."""
    seen = 0
    for i, t in enumerate(tokens):
        seen += len(t)
        if byte < seen:
            return i
    return None


@pytest.mark.parametrize("at", [0, 1, 4095, 4096, 4097, 8191, 8192, 12000])
def test_first_difference_on_long_outputs_around_the_block_size(at):
    a = bytes(i % 251 for i in range(12_288))
    b = a[:at] + bytes([(a[at] + 1) % 256]) + a[at + 1 :]
    assert first_difference(a, b) == at == by_hand(a, b)


@pytest.mark.parametrize("n", [0, 5, 4096, 8192])
def test_a_prefix_parts_where_the_shorter_ends(n):
    a = b"x" * n
    assert first_difference(a, a + b"y") == n and first_difference(a + b"y", a) == n
    assert first_difference(a, a) is None


def test_token_at_skips_tokens_that_carry_no_bytes():
    ends = [1, 1, 3, 3, 6]  # tokens of 1, 0, 2, 0, 3 bytes
    assert [token_at(ends, b) for b in range(7)] == [0, 2, 2, 4, 4, 4, None]


@pytest.mark.parametrize("context", [0, 3, 24])
def test_compare_tokens_names_the_byte_tokens_and_excerpts(context):
    base = [b"The ", b"quick ", b"brown ", b"fox"]
    cand = [b"The ", b"qu", b"ick ", b"black ", b"fox"]
    a, b = b"".join(base), b"".join(cand)
    d = compare_tokens(base, cand, context)
    at = by_hand(a, b)
    assert d.byte == at == 11 and (d.baseline_token, d.candidate_token) == (
        token_holding(base, at),
        token_holding(cand, at),
    )
    start = max(0, at - context)
    assert (d.excerpt_start, d.baseline_excerpt, d.candidate_excerpt) == (
        start,
        a[start : at + context],
        b[start : at + context],
    )
    assert d.kind == "bytes" and d.detail == ""


def test_a_divergence_reads_back_as_it_was_found():
    d = compare_tokens([b"caf\xc3\xa9 \x00ok"], [b"caf\xc3\xa9 \x01ok"])
    j = d.to_json()
    assert j["baseline_excerpt"] == "café \\x00ok" and j["candidate_excerpt_hex"] == b"caf\xc3\xa9 \x01ok".hex()
    assert (j["kind"], j["detail"], j["byte"], j["excerpt_start"]) == ("bytes", "", 6, 0)
    assert Divergence.from_json(j) == d
    old = {k: v for k, v in j.items() if not k.endswith("_hex")}  # an older record: escaped text only
    back = Divergence.from_json(old)
    assert back.baseline_excerpt == "café \\x00ok".encode() and back.byte == 6
    assert Divergence.from_json({"byte": 3}) == Divergence(3, None, None, b"", b"", 0)


@pytest.mark.parametrize(
    "bad,why",
    [
        ([], "divergence is list"),
        ({"byte": -1}, "divergence byte is -1"),
        ({"byte": True}, "divergence byte is True"),
        ({"byte": "3"}, "divergence byte is '3'"),
        ({"byte": 1, "baseline_token": -2}, "divergence baseline_token is -2"),
        ({"byte": 1, "kind": "words"}, "divergence kind 'words'"),
        ({"byte": 1, "detail": 5}, "divergence kind 'bytes'"),
    ],
)
def test_a_damaged_divergence_says_what_is_wrong(bad, why):
    with pytest.raises((TypeError, ValueError)) as exc:
        Divergence.from_json(bad)
    assert str(exc.value).startswith(why)


def test_escape_bytes_shows_every_invisible_character():
    assert escape_bytes(b"a\tb\rc\nd") == "a\\tb\\rc\\nd"
    assert escape_bytes(b"\x7f \xff") == "\\x7f \\xff"
    assert escape_bytes("\u2028x\u00a0".encode()) == "\\u2028x\\xa0"
    assert escape_bytes("é😀".encode()) == "é😀"


def test_compare_ids_and_token_divergence():
    assert compare_ids([1, 2, 3], [1, 2, 3]) is None
    assert compare_ids([1, 2, 3], [1, 5, 3]) == 1
    assert compare_ids([1, 2], [1, 2, 3]) == 2 and compare_ids([1, 2, 3], [1]) == 1
    d = token_divergence([b"ab", b"cd", b"ef"], [b"ab", b"cd"], 2, "count", "3 vs 2 tokens", context=1)
    assert (d.byte, d.baseline_token, d.candidate_token, d.kind, d.detail) == (4, 2, None, "count", "3 vs 2 tokens")
    assert (d.excerpt_start, d.baseline_excerpt, d.candidate_excerpt) == (3, b"de", b"d")


def live(pieces: list[tuple[str, bytes]], finish: tuple[str, ...] = ("baseline", "candidate")) -> LiveComparer:
    c = LiveComparer()
    for side, data in pieces:
        c.add(side, data)
    for side in finish:
        c.finish(side)
    return c


def cut(data: bytes, rng: random.Random) -> list[bytes]:
    """The bytes as tokens of 0 to 3 bytes (an empty one is a withheld token)."""
    out, i = [], 0
    while i < len(data):
        n = rng.randint(0, 3)
        out.append(data[i : i + n])
        i += n
    return out


def test_the_live_comparer_agrees_with_the_loop_on_any_interleaving():
    rng = random.Random(27)
    for _ in range(400):
        a = bytes(rng.choice(b"ab") for _ in range(rng.randint(0, 12)))
        b = bytes(rng.choice(b"ab") for _ in range(rng.randint(0, 12)))
        ta = cut(a, rng)
        tb = cut(b, rng)
        sides = ["baseline"] * len(ta) + ["candidate"] * len(tb)
        rng.shuffle(sides)  # the two streams interleaved at random, each side's tokens in order
        order = {"baseline": iter(ta), "candidate": iter(tb)}
        pieces = [(s, next(order[s])) for s in sides]
        c = live(pieces)
        at = by_hand(a, b)
        assert c.identical is (at is None)
        if at is not None:
            d = c.divergence
            assert (
                d.byte == at
                and d.baseline_token == token_holding(ta, at)
                and d.candidate_token == token_holding(tb, at)
            )


def test_a_prefix_is_known_only_when_the_shorter_side_has_finished():
    c = live([("baseline", b"abc"), ("candidate", b"ab")], finish=())
    assert c.divergence is None and c.identical is None
    assert c.finish("baseline") is None and c.identical is None  # the candidate may still send "c"
    d = c.finish("candidate")
    assert d is not None and d.byte == 2 and c.identical is False
    # the shorter side finished first while the other already has more: certain at once
    c = live([("baseline", b"ab"), ("candidate", b"abc")], finish=("baseline",))
    assert c.divergence.byte == 2 and (c.divergence.baseline_token, c.divergence.candidate_token) == (None, 0)
    c = live([("baseline", b"abc"), ("candidate", b"ab")], finish=("candidate",))
    assert c.divergence.byte == 2 and c.identical is False


def test_the_first_divergence_stays_the_one_reported():
    c = live([("baseline", b"axc"), ("candidate", b"ayd")], finish=())
    first = c.divergence
    assert first.byte == 1 and c.add("baseline", b"zz") is first and c.finish("baseline") is first


def test_a_tail_counts_as_the_last_tokens_bytes():
    c = LiveComparer()
    c.add("baseline", b"ab")
    c.add("candidate", b"ab")
    assert c.add_tail("baseline", b"") is None and c.ends["baseline"] == [2]
    c.add_tail("candidate", b"X")
    c.finish("baseline")
    c.finish("candidate")
    assert c.divergence.byte == 2 and c.divergence.candidate_token == 0 and c.ends["candidate"] == [3]
    only = LiveComparer()
    only.add_tail("baseline", b"zz")  # a tail with no token before it is a token of its own
    assert only.ends["baseline"] == [2] and bytes(only.data["baseline"]) == b"zz"


# -- the killable survivors of core/compare's mutmut run --------------------------------------------------
def test_the_default_context_is_24_bytes_each_side():
    a = bytes(range(65, 65 + 60))
    b = a[:40] + b"!" + a[41:]
    d = compare_tokens([a], [b])
    assert (d.byte, d.excerpt_start, d.baseline_excerpt, d.candidate_excerpt) == (40, 16, a[16:64], b[16:64])
    c = LiveComparer()
    c.add("baseline", a)
    c.add("candidate", b)
    assert (c.divergence.excerpt_start, c.divergence.baseline_excerpt) == (16, a[16:64])
    t = token_divergence([a[:2], a[2:]], [a[:2], b"x"], 1, "ids", "other ids from token 1")
    assert (t.byte, t.excerpt_start, t.baseline_token, t.candidate_token) == (2, 0, 1, 1)
    assert t.baseline_excerpt == a[:26]


def test_a_token_divergence_past_the_baseline_names_no_baseline_token():
    t = token_divergence([b"ab"], [b"ab", b"c"], 1, "count", "1 vs 2 tokens")
    assert (t.byte, t.baseline_token, t.candidate_token) == (2, None, 1)


def test_every_field_of_a_divergence_survives_its_record():
    for d in (
        Divergence(0, 0, 0, b"", b"x", 0),
        Divergence(30, 4, 5, b"\xffab", b"\xfeab", 6, "ids", "same text, different token ids from token 4"),
        Divergence(7, None, 2, b"abc", b"abd", 3, "count", "3 vs 4 tokens"),
    ):
        assert Divergence.from_json(d.to_json()) == d
    with pytest.raises(ValueError, match="divergence byte is None"):
        Divergence.from_json({})


def test_an_older_records_excerpts_read_as_well_as_they_can():
    d = Divergence.from_json({"byte": 1, "baseline_excerpt": 5, "candidate_excerpt": "caf\udcc3"})
    assert d.baseline_excerpt == b"" and d.candidate_excerpt == b"caf\xc3"  # a lone surrogate: its byte
