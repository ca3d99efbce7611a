"""Byte-for-byte comparison of two completions, whole or as they stream in."""

from __future__ import annotations

import bisect
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Divergence:
    byte: int  # first differing byte offset (or where the shorter output ends)
    baseline_token: int | None  # index of the token holding that byte on each side (None: past the end)
    candidate_token: int | None
    baseline_excerpt: bytes
    candidate_excerpt: bytes
    excerpt_start: int
    kind: str = "bytes"  # what differs: "bytes", "ids" (same bytes, other tokens) or "count" (tokens never sent)
    detail: str = ""

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "detail": self.detail,
            "byte": self.byte,
            "baseline_token": self.baseline_token,
            "candidate_token": self.candidate_token,
            "baseline_excerpt": escape_bytes(self.baseline_excerpt),
            "candidate_excerpt": escape_bytes(self.candidate_excerpt),
            "excerpt_start": self.excerpt_start,
            # the excerpts' exact bytes, so a recorded divergence reads back as it was found
            "baseline_excerpt_hex": self.baseline_excerpt.hex(),
            "candidate_excerpt_hex": self.candidate_excerpt.hex(),
        }

    @classmethod
    def from_json(cls, d: object) -> Divergence:
        """A recorded divergence; TypeError/ValueError say what is wrong with a damaged one."""
        if not isinstance(d, dict):
            raise TypeError(f"divergence is {type(d).__name__}, not an object")

        def num(key: str, optional: bool = False) -> int | None:
            v = d.get(key)
            if v is None and optional:
                return None
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"divergence {key} is {v!r}")
            return v

        def excerpt(side: str) -> bytes:
            raw = d.get(f"{side}_excerpt_hex")
            if isinstance(raw, str):
                return bytes.fromhex(raw)
            text = d.get(f"{side}_excerpt", "")  # older records: the escaped text only
            return text.encode("utf-8", errors="surrogateescape") if isinstance(text, str) else b""

        kind, detail = d.get("kind", "bytes"), d.get("detail", "")
        if kind not in ("bytes", "ids", "count") or not isinstance(detail, str):
            raise ValueError(f"divergence kind {kind!r}")
        return cls(
            num("byte") or 0,
            num("baseline_token", True),
            num("candidate_token", True),
            excerpt("baseline"),
            excerpt("candidate"),
            num("excerpt_start", True) or 0,
            kind,
            detail,
        )


def escape_bytes(data: bytes) -> str:
    """Printable text with non-printable bytes and invalid UTF-8 escaped (\\n, \\x00, …)."""
    text = data.decode("utf-8", errors="backslashreplace")
    out = []
    for ch in text:
        if ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif not ch.isprintable() and ch != " ":
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def first_difference(a: bytes, b: bytes) -> int | None:
    """Offset of the first differing byte; the shorter length when one is a prefix; None if equal."""
    if a == b:
        return None
    n = min(len(a), len(b))
    # compare in blocks first: outputs are usually long and equal for a long way
    lo = 0
    block = 4096
    while lo + block <= n and a[lo : lo + block] == b[lo : lo + block]:
        lo += block
    for i in range(lo, n):
        if a[i] != b[i]:
            return i
    return n


def token_at(ends: list[int], offset: int) -> int | None:
    """Index of the token whose bytes contain `offset`, given each token's cumulative end offset.

    Tokens that carry no bytes (withheld or held back) are skipped: the byte belongs to the token
    that delivered it. None when the offset is past the last byte.
    """
    i = bisect.bisect_right(ends, offset)
    return i if i < len(ends) else None


def compare_tokens(baseline: list[bytes], candidate: list[bytes], context: int = 24) -> Divergence | None:
    """Compare two outputs given as the bytes of each token; None when byte-identical."""
    a = b"".join(baseline)
    b = b"".join(candidate)
    at = first_difference(a, b)
    if at is None:
        return None
    return _divergence(a, b, _ends(baseline), _ends(candidate), at, context)


def _ends(tokens: list[bytes]) -> list[int]:
    ends, total = [], 0
    for t in tokens:
        total += len(t)
        ends.append(total)
    return ends


def _divergence(a: bytes, b: bytes, ends_a: list[int], ends_b: list[int], at: int, context: int) -> Divergence:
    start = max(0, at - context)
    return Divergence(
        byte=at,
        baseline_token=token_at(ends_a, at),
        candidate_token=token_at(ends_b, at),
        baseline_excerpt=a[start : at + context],
        candidate_excerpt=b[start : at + context],
        excerpt_start=start,
    )


class LiveComparer:
    """Watches two streams as they arrive and reports the first divergence the moment it is seen.

    A divergence is certain as soon as both sides have a differing byte at the same offset; a
    "one is a prefix of the other" divergence is only known when the shorter side has finished.
    """

    def __init__(self) -> None:
        self.data = {"baseline": bytearray(), "candidate": bytearray()}
        self.ends: dict[str, list[int]] = {"baseline": [], "candidate": []}
        self.done = {"baseline": False, "candidate": False}
        self._checked = 0  # bytes known equal on both sides
        self.divergence: Divergence | None = None

    def add(self, side: str, data: bytes) -> Divergence | None:
        """Add one token's bytes (possibly empty) to a side."""
        buf = self.data[side]
        buf += data
        self.ends[side].append(len(buf))
        return self._check()

    def add_tail(self, side: str, data: bytes) -> Divergence | None:
        """Bytes released by the final event without a token of their own."""
        if data:
            self.data[side] += data
            if self.ends[side]:
                self.ends[side][-1] = len(self.data[side])
            else:
                self.ends[side].append(len(self.data[side]))
        return self._check()

    def finish(self, side: str) -> Divergence | None:
        self.done[side] = True
        return self._check()

    @property
    def identical(self) -> bool | None:
        """True/False once decided; None while both are still streaming and agree so far."""
        if self.divergence is not None:
            return False
        if all(self.done.values()):
            return True
        return None

    def _check(self) -> Divergence | None:
        if self.divergence is not None:
            return self.divergence
        a, b = self.data["baseline"], self.data["candidate"]
        n = min(len(a), len(b))
        if n > self._checked:
            at = first_difference(bytes(a[self._checked : n]), bytes(b[self._checked : n]))
            if at is not None:
                return self._found(self._checked + at)
            self._checked = n
        if (self.done["baseline"] and len(a) > len(b) and self.done["candidate"]) or (
            self.done["candidate"] and len(b) > len(a) and self.done["baseline"]
        ):
            return self._found(n)
        # one side finished and the other already has more bytes: certain divergence
        if (self.done["baseline"] and len(b) > len(a)) or (self.done["candidate"] and len(a) > len(b)):
            return self._found(n)
        return None

    def _found(self, at: int) -> Divergence:
        a, b = bytes(self.data["baseline"]), bytes(self.data["candidate"])
        self.divergence = _divergence(a, b, self.ends["baseline"], self.ends["candidate"], at, 24)
        return self.divergence


def compare_ids(baseline_ids: list[int | None], candidate_ids: list[int | None]) -> int | None:
    """Index of the first token whose id differs (or where one sequence ends); None if equal.

    Only meaningful when both sides run the same tokenizer and every id is known.
    """
    n = min(len(baseline_ids), len(candidate_ids))
    for i in range(n):
        if baseline_ids[i] != candidate_ids[i]:
            return i
    return None if len(baseline_ids) == len(candidate_ids) else n


def token_divergence(
    baseline: list[bytes], candidate: list[bytes], index: int, kind: str, detail: str, context: int = 24
) -> Divergence:
    """A divergence at token `index` (same bytes so far, other tokens): placed at that token's first byte."""
    a, b = b"".join(baseline), b"".join(candidate)
    at = sum(len(x) for x in baseline[:index])
    start = max(0, at - context)
    return Divergence(
        at,
        index if index < len(baseline) else None,
        index if index < len(candidate) else None,
        a[start : at + context],
        b[start : at + context],
        start,
        kind,
        detail,
    )
