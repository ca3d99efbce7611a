"""What a server says about itself (/props, /server_info, /v1/models, /version, /slots), normalised at
the boundary: each field spectui keeps has one type, whatever the server sent, so a session records
both servers' identities and replay reads them back (a `build_info` sent as a number, a `total_slots`
of "four" or a `model_path` that is not text once made the whole record unreadable, or a traceback).

A value of the wrong type becomes None (the field is then shown as '?', not guessed), except a build
sent as a number, which is still the build's name.
"""

from __future__ import annotations

import math


def obj(v) -> dict:
    """An object field, or {} for anything else."""
    return v if isinstance(v, dict) else {}


def text(v) -> str | None:
    """Text, or None (a number or a list is not a name)."""
    return v if isinstance(v, str) and v else None


def name(v) -> str | None:
    """A name that may come as a number (a build number): text, or the number written out."""
    if isinstance(v, str):
        return v or None
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    return None


def count(v) -> int | None:
    """A whole number ≥ 0 (slots, context length), or None; 4.0 is 4, "four" and true are not counts."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if v >= 0 else None
    if isinstance(v, float) and math.isfinite(v) and v.is_integer() and v >= 0:
        return int(v)
    return None


def flag(v) -> bool | None:
    return v if isinstance(v, bool) else None


def scalar(v):
    """A value kept for display (a draft length, a probability): text, a finite number or true/false."""
    if isinstance(v, (str, bool)):
        return v
    if isinstance(v, (int, float)) and math.isfinite(v):
        return v
    return None


def basename(path) -> str | None:
    path = text(path)
    if not path:
        return None
    return path.replace("\\", "/").rsplit("/", 1)[-1] or None
