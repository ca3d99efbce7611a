"""Output folders and data files a command writes: claimed before the work, locked while it runs.

- A folder given as -o (train-eagle3, train-lookup, the drafts lesson) is written only where it is new,
  empty, or marked as spectui's by the file MARK (written when spectui first claimed it). A folder holding
  files spectui did not write (a model named head.gguf, a user's notes) is refused, naming them; so is any
  symbolic link in it (spectui never makes one, and a link would send a write outside the folder). The
  run's own inputs (the --data file in the folder) may sit beside.
- While a command writes a folder or a data file it holds an exclusive, non-blocking fcntl.flock on a lock
  file beside it (the folder's LOCK, a file's .NAME.lock): a second command on the same output refuses in
  one line instead of answering every prompt twice or racing on a converter's output. The lock dies with
  the process (kill -9 included), so nothing is left to clean up by hand.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from spectui.core.errors import InputError
from spectui.store.locations import atomic_write

MARK = ".spectui-output.json"
LOCK = ".spectui.lock"


def _listing(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError as exc:
        raise InputError(f"{folder} cannot be listed ({exc.strerror or exc})") from None


def check_folder(
    folder: str | Path, flag: str, inputs: Iterable[str | Path] = (), legacy_mark: str | None = None
) -> Path:
    """Whether `folder` may be written: new, empty, marked as spectui's (or holding `legacy_mark`, the record
    a command wrote there before folders were marked), with only the run's `inputs` beside; no symbolic link
    in it. InputError (one line, naming what is in the way) otherwise. Writes nothing."""
    d = Path(folder).expanduser()
    if d.is_symlink() and not d.resolve().is_dir():
        raise InputError(f"{flag} {d} is a link to {d.resolve()}, not a folder", hint=f"give {flag} a new folder")
    if d.exists() and not d.is_dir():
        raise InputError(f"{flag} {d} is a file, not a folder", hint=f"give {flag} a new folder name")
    if not d.is_dir():
        return d
    own = {q.resolve() for p in inputs for q in (Path(p).expanduser(), lock_path(Path(p).expanduser()))}
    entries = _listing(d)
    links = [p.name for p in entries if p.is_symlink()]
    if links:
        raise InputError(
            f"{flag} {d} holds symbolic links ({', '.join(links[:3])}): spectui writes only files of its own",
            hint="remove the links or give a new folder",
        )
    marked = (d / MARK).is_file() or (legacy_mark is not None and (d / legacy_mark).is_file())
    if not marked:
        foreign = [p.name for p in entries if p.name != LOCK and p.resolve() not in own]
        if foreign:
            more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
            raise InputError(
                f"{flag} {d} holds files spectui did not write ({', '.join(foreign[:3])}{more}): left untouched",
                hint=f"give {flag} a new or empty folder",
            )
    return d


def claim_folder(
    folder: str | Path, flag: str, command: str, inputs: Iterable[str | Path] = (), legacy_mark: str | None = None
) -> Path:
    """check_folder, then the folder made and marked as spectui's. Call before any server starts."""
    d = check_folder(folder, flag, inputs, legacy_mark)
    try:
        d.mkdir(parents=True, exist_ok=True)
        if not (d / MARK).is_file():
            atomic_write(d / MARK, json.dumps({"format": "spectui-output", "command": command}) + "\n")
    except OSError as exc:
        raise InputError(f"{flag} {d} cannot be written ({exc.strerror or exc})") from None
    return d


def inside(folder: Path, path: str | Path, what: str) -> Path:
    """`path` (relative to `folder`, or absolute) resolved, and inside `folder`; InputError otherwise."""
    p = Path(path)
    full = (folder / p) if not p.is_absolute() else p
    base = folder.resolve()
    real = full.resolve()
    if real != base and base not in real.parents:
        raise InputError(f"{what} {path} is outside {folder}", hint="a lesson's files stay in its folder")
    return full


def lock_path(target: str | Path) -> Path:
    """The lock file of an output: a folder's LOCK inside it, a file's .NAME.lock beside it."""
    p = Path(target).expanduser()
    return p / LOCK if p.is_dir() else p.with_name(f".{p.name}.lock")


@contextlib.contextmanager
def locked(target: str | Path, flag: str) -> Iterator[Path]:
    """Hold the output's lock while the block runs; InputError at once where another process holds it."""
    lp = lock_path(target)
    try:
        lp.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lp, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as exc:
        raise InputError(f"{flag} {target}: its lock {lp} cannot be made ({exc.strerror or exc})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            except OSError:
                holder = ""
            raise InputError(
                f"{flag} {target} is being written by another spectui"
                + (f" (PID {holder})" if holder.isdigit() else ""),
                hint="wait for it to end, or give another path",
            ) from None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield lp
    finally:
        os.close(fd)  # closing the descriptor releases the lock
