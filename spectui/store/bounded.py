"""The one bounded, typed loader for every file spectui reads (sessions' lines, lesson.json, stored terms,
notebooks, prompt files, profiles, themes, the settings file).

Every limit is checked before the work it bounds, so a hostile or damaged file costs a stat and a scan,
never the whole memory of the machine or Python's stack:

1. the file type, on the open descriptor: a FIFO, a device or a folder is refused (the open itself is
   non-blocking, so a FIFO with no writer never hangs the reader);
2. the size, from fstat and again while reading (limit + 1 bytes at most);
3. UTF-8;
4. the nesting depth, by a scan of the text before any parser sees it (Python's json and tomllib recurse
   once a level: a few thousand `[` end in RecursionError); the parse is guarded for it all the same;
5. the types of the fields read, with `typed_field()`: each error names the file and the key.

Everything refused is an InputError of one line naming the file (and the key), never a traceback.
Names say what they load (`load_json_file`, `parse_toml_text` …), so a narrower loader elsewhere (a
certificate's) can be folded in here by name.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any

from spectui.core.errors import InputError

MAX_DEPTH = 64  # no file spectui writes nests deeper than 8; 64 leaves room for a person's hand-written TOML
CONFIG_MAX = 1 << 20  # a profile, theme, prompt set or settings file a person wrote is far below 1 MiB
RECORD_MAX = 16 << 20  # lesson.json, a terms record, a certificate: well below 16 MiB
LINE_MAX = 64 << 20  # one line of a session or a data file (an answer with its logprobs)


def _open_regular(path: Path, what: str) -> int:
    """A read-only descriptor on a regular file: opened without blocking (a FIFO with no writer would hang
    a plain open), then checked by fstat; InputError for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist") from None
    except OSError as exc:
        raise InputError(f"{what} {path} cannot be read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise InputError(f"{what} {path} cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise InputError(f"{what} {path} is not a regular file ({kind_of(st.st_mode)})", hint="give a file")
    return fd


def kind_of(mode: int) -> str:
    """A file type in words, for the one-line refusals."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def check_regular(path: str | Path, what: str) -> Path:
    """A path given as an input file (a model, a target): it exists and is a regular file (not a FIFO, a
    device or a folder), checked by stat without opening it; InputError otherwise."""
    p = Path(path).expanduser()
    try:
        st = p.stat()
    except FileNotFoundError:
        raise InputError(f"{what} {p} does not exist") from None
    except OSError as exc:
        raise InputError(f"{what} {p} cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what} {p} is not a regular file ({kind_of(st.st_mode)})", hint="give a file")
    return p


def read_bytes_bounded(path: str | Path, what: str, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (checked before reading)."""
    p = Path(path).expanduser()
    fd = _open_regular(p, what)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise InputError(f"{what} {p} is {size:,} bytes, over the {limit:,}-byte limit")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise InputError(f"{what} {p} cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise InputError(f"{what} {p} grew over the {limit:,}-byte limit while it was read")
    return data


def read_text_bounded(path: str | Path, what: str, limit: int = CONFIG_MAX) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes (a leading BOM dropped)."""
    data = read_bytes_bounded(path, what, limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {path} is not UTF-8 text (byte {exc.start})") from None


_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_TOML_TOKENS = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*|[\[\]{}]')


def nesting_depth(text: str | bytes, toml: bool = False) -> int:
    """The deepest nesting of [ and { outside strings (and, in TOML, outside comments): what a recursive
    parser would recurse. One regular-expression pass over the brackets and strings (an unclosed string's
    brackets count: the parser refuses that file anyway)."""
    s = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    depth = deepest = 0
    for m in (_TOML_TOKENS if toml else _JSON_TOKENS).finditer(s):
        c = m.group()
        if c in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif c in ("]", "}"):
            depth = max(0, depth - 1)
    return deepest


def check_depth(text: str | bytes, source: str, toml: bool = False, limit: int = MAX_DEPTH) -> None:
    opens = text.count("[") + text.count("{") if isinstance(text, str) else text.count(b"[") + text.count(b"{")
    if opens <= limit:  # too few brackets to nest past the limit: no scan (nearly every real file)
        return
    d = nesting_depth(text, toml)
    if d > limit:
        raise InputError(f"{source} nests {d} levels deep, over the limit of {limit}", hint="it is not a spectui file")


def parse_json_text(text: str | bytes, source: str, limit: int = MAX_DEPTH) -> Any:
    """JSON parsed after its depth is checked; InputError naming `source` for anything that is not JSON.
    NaN and Infinity (which Python's json accepts and no JSON writer should emit) are refused too, naming
    the key that holds one."""
    check_depth(text, source, limit=limit)
    found: list[_Constant] = []

    def constant(name: str) -> _Constant:
        found.append(_Constant(name))
        return found[-1]

    try:
        doc = json.loads(text, parse_constant=constant)
    except RecursionError:
        raise InputError(f"{source} nests too deeply to read") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{source} is not JSON ({str(exc).splitlines()[0][:120]})") from None
    if found:  # only then is the parsed document walked, to name where the first one stands
        where = _key_of(doc, found[0]) or "a value"
        raise InputError(f"{source}: {where} is {found[0].name}, which is not a JSON number")
    return doc


class _Constant:
    """A NaN or Infinity literal met while parsing (kept as a marker so the key that holds it can be named)."""

    def __init__(self, name: str):
        self.name = name


def _key_of(doc: Any, marker: _Constant, prefix: str = "") -> str | None:
    """The dotted key (with [i] for list items) under which `marker` stands in `doc`, None if nowhere."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        key = f"{prefix}[{k}]" if isinstance(k, int) else (f"{prefix}.{k}" if prefix else str(k))
        if v is marker:
            return key
        if isinstance(v, (dict, list)) and (inner := _key_of(v, marker, key)) is not None:
            return inner
    return None


def parse_toml_text(text: str, source: str, limit: int = MAX_DEPTH) -> dict:
    """TOML parsed after its depth is checked; InputError naming `source` (and tomllib's line) otherwise."""
    check_depth(text, source, toml=True, limit=limit)
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise InputError(f"{source} nests too deeply to read") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{source} is not valid TOML ({exc})") from None


def load_json_file(path: str | Path, what: str, limit: int = RECORD_MAX, depth: int = MAX_DEPTH) -> Any:
    """A JSON file: regular, at most `limit` bytes, UTF-8, at most `depth` levels deep."""
    text = read_text_bounded(path, what, limit)
    return parse_json_text(text, f"{what} {path}", depth)


def load_json_object(path: str | Path, what: str, limit: int = RECORD_MAX) -> dict:
    doc = load_json_file(path, what, limit)
    if not isinstance(doc, dict):
        raise InputError(f"{what} {path} holds a JSON {type(doc).__name__}, not an object")
    return doc


def load_toml_file(path: str | Path, what: str, limit: int = CONFIG_MAX) -> dict:
    """A TOML file: regular, at most `limit` bytes, UTF-8, at most MAX_DEPTH levels deep."""
    return parse_toml_text(read_text_bounded(path, what, limit), f"{what} {path}")


_KIND_WORDS = {str: "text", int: "a whole number", float: "a number", bool: "true or false", list: "a list"}
_KIND_WORDS[dict] = "an object"


def typed_field(
    doc: dict,
    key: str,
    kinds: type | tuple[type, ...],
    source: str,
    *,
    required: bool = True,
    lo: float | None = None,
    hi: float | None = None,
) -> Any:
    """doc[key], checked: of one of `kinds` (an int is a float; a bool is neither), finite and within
    [lo, hi] where a number; None where absent (or null) and not required. InputError names the key."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    v = doc.get(key) if isinstance(doc, dict) else None
    if v is None:
        if required:
            raise InputError(f"{source}: {key!r} is missing")
        return None
    ok = any(
        isinstance(v, k) and not (isinstance(v, bool) and k is not bool) or (k is float and _is_int(v)) for k in kinds
    )
    if not ok:
        want = " or ".join(_KIND_WORDS.get(k, k.__name__) for k in kinds)
        raise InputError(f"{source}: {key!r} is {_shown(v)}, not {want}")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        check_number(v, f"{source}: {key!r}", lo, hi)
    return v


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _shown(v) -> str:
    r = repr(v)
    return f"{type(v).__name__} {r[:40] + '…' if len(r) > 40 else r}"


def check_number(v: float, name: str, lo: float | None = None, hi: float | None = None) -> float:
    """A figure read from a file or an option: finite and within [lo, hi]; InputError naming it."""
    if isinstance(v, float) and not math.isfinite(v):
        raise InputError(f"{name} is {v}, not a finite number")
    if lo is not None and v < lo:
        raise InputError(f"{name} is {v}, below {lo}")
    if hi is not None and v > hi:
        raise InputError(f"{name} is {v}, above {hi}")
    return v
