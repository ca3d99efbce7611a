"""JSON read strictly, for documents whose every field decides something (certificates): a key given
twice, a NaN or Infinity, or a whole number too long to be a count is refused (the file itself is read
through store.bounded: a regular file, its size and nesting checked first). Python's json module keeps the LAST of two equal keys while other readers keep
the first, so a document with a key twice says two things at once; it is refused, not read either way."""

from __future__ import annotations

import json
from pathlib import Path

MAX_DIGITS = 18  # any count or time a document states fits in 18 digits (10**18 ns is 31 years)


class StrictJSONError(ValueError):
    """Why the text is not strict JSON, in one line."""


def _pairs(pairs: list[tuple[str, object]]) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise StrictJSONError(f'the key "{k[:40]}" is given twice in one object')
        out[k] = v
    return out


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise StrictJSONError(f"a whole number of {len(text.lstrip('-'))} digits (at most {MAX_DIGITS})")
    return int(text)


def _constant(name: str):
    raise StrictJSONError(f"{name} is not a number JSON allows")


def _float(text: str) -> float:
    v = float(text)
    if v != v or v in (float("inf"), float("-inf")):
        raise StrictJSONError(f"{text[:20]} is out of range for a number")
    return v


def loads_strict(text: str):
    """The JSON value of `text`; StrictJSONError (one line) for a duplicate key, NaN/Infinity, a number
    out of range or a whole number longer than MAX_DIGITS; json.JSONDecodeError for text that is not JSON."""
    return json.loads(text, object_pairs_hook=_pairs, parse_int=_int, parse_constant=_constant, parse_float=_float)


def first_duplicate_key(path: Path) -> str | None:
    """Where a JSON Lines file (a session) gives a key twice in one object, as `line N: why`; None where
    no line does. Lines that are not JSON are the session reader's to report, not this."""
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.count(b'"') < 4:
                continue
            try:
                json.loads(line, object_pairs_hook=_pairs)
            except StrictJSONError as exc:
                return f"line {lineno}: {exc}"
            except ValueError:
                continue
    return None
