"""Where the headless commands write files: every path checked before the run, and a write that fails
afterwards turned into one line that says what was kept (a bad --notebook, --save,
--svg or -o used to end in a traceback after the run, with the printed report lost).
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
from pathlib import Path

from spectui.core.errors import InputError, describe
from spectui.machine.gguf import require_gguf
from spectui.store import notebook


def check_output(path: str | Path | None, flag: str, kinds: tuple[str, ...] | None = None) -> Path | None:
    """Before any server is asked: a path a file can be written at (atomically: a temporary beside it,
    then a rename), new, empty or a file of the kinds the flag writes (`kinds`, default OWN_KINDS[flag]),
    or one line saying why not. None passes (the option was not given)."""
    if path is None:
        return None
    p = Path(path).expanduser()
    if p.is_symlink():
        p = p.resolve()
    if p.is_dir():
        raise InputError(f"{flag} {p} is a folder", hint=f"give {flag} a file name")
    if p.exists() and not p.is_file():
        raise InputError(f"{flag} {p} is not a regular file (a device or a pipe)", hint=f"give {flag} a file name")
    folder = p.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # the nearest folder that exists: the missing ones are made in it
    if not folder.is_dir():
        raise InputError(f"{flag} {p}: {folder} is not a folder", hint=f"give {flag} a path in a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {p}: cannot write in {folder} (permission denied)", hint="give a writable folder")
    if p.exists() and not os.access(p, os.W_OK):
        raise InputError(f"{flag} {p} is read-only", hint=f"give {flag} a file spectui may replace")
    own = OWN_KINDS.get(flag, ()) if kinds is None else kinds
    if own and p.is_file() and not is_own(p, own):
        raise InputError(
            f"{flag} {p} exists and is not a {' or '.join(own)} spectui wrote: left untouched",
            hint=f"give {flag} a new file name, or move that file away first",
        )
    return p


# What each output flag writes over or appends to (`report -o model.gguf` replaced a
# model): an existing file is written only when it is empty or one of these.
OWN_KINDS: dict[str, tuple[str, ...]] = {
    "--save": ("session", "sweep result"),
    "--svg": ("SVG chart",),
    "--notebook": ("notebook",),
    "-o": ("report", "certificate"),
}
READ_MAX = 64 << 20  # a file larger than this is none of spectui's documents


def is_own(p: Path, kinds: tuple[str, ...]) -> bool:
    """Whether the existing file `p` is empty or one of `kinds` as spectui writes them (bounded reads)."""
    try:
        if p.stat().st_size > READ_MAX:
            return False
        data = p.read_bytes()
    except OSError:
        return False
    if not data.strip():
        return True
    return any(_looks_like(kind, data) for kind in kinds)


def _looks_like(kind: str, data: bytes) -> bool:
    head = data[:4096]
    if kind == "session":
        return _json_doc(data.split(b"\n", 1)[0]).get("format") == "spectui-session"
    if kind == "SVG chart":
        return head.lstrip().startswith((b"<svg", b"<?xml")) and b"<svg" in head
    if kind == "notebook":
        try:
            doc = tomllib.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
            return False
        return set(doc) <= {"measurement"}
    if kind == "report":
        if head.startswith((b"# spectui", b"baseline ")) or (
            head.startswith(b"<!DOCTYPE html>") and b"spectui" in head
        ):
            return True
        return {"baseline", "candidate", "params", "prompts"} <= set(_json_doc(data))
    doc = _json_doc(data)
    if kind == "certificate":
        return doc.get("format") == "spectui-certificate"
    if kind == "formats table":  # `spectui formats` -o (labs.formats.table)
        return doc.get("kind") == "spectui-formats"
    return kind == "sweep result" and {"baseline", "candidate", "params", "levels"} <= set(doc)


def _json_doc(data: bytes) -> dict:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return {}
    return doc if isinstance(doc, dict) else {}


def check_notebook(args) -> None:
    """--notebook [PATH], when given: the notebook, its lock file and its side file live in one folder."""
    if getattr(args, "notebook", None) is None:
        return

    check_output(notebook.notebook_path(args.notebook or None), "--notebook")


def write_failed(what: str, exc: BaseException, kept: str) -> None:
    """A file that could not be written after the run: one line, saying what was kept."""
    print(f"spectui: error: {what} not written ({describe(exc)}); {kept}", file=sys.stderr)


def session_failed(writer) -> bool:
    """After the run: whether --save's session stopped taking lines (a full disk), said in one line."""
    if writer is None or writer.error is None:
        return False
    print(
        f"spectui: error: the session {writer.path} stopped being written ({writer.error}); the report above is "
        "complete, and the file holds the run up to that point",
        file=sys.stderr,
    )
    return True


def check_gguf(path: str | Path | None, flag: str) -> Path | None:
    """A model file given on the command line: a regular file (a FIFO is refused unopened) that is a GGUF."""
    if path is None:
        return None
    return require_gguf(Path(path).expanduser(), flag)
