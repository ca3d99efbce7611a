"""Where spectui keeps things (config, data, bundled resources) and how it writes files users keep.

A leaf module: everything that needs a path or an atomic write comes here, so nothing else has to
import its neighbours for them.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import platformdirs

from spectui.core.errors import InputError
from spectui.store.bounded import CONFIG_MAX, read_text_bounded

PACKAGE_DIR = Path(__file__).resolve().parent.parent


def config_dir() -> Path:
    env = os.environ.get("SPECTUI_CONFIG_DIR")
    return Path(env).expanduser() if env else Path(platformdirs.user_config_dir("spectui"))


def data_dir() -> Path:
    """Sessions, the default notebook and screenshots (SPECTUI_DATA_DIR overrides)."""
    env = os.environ.get("SPECTUI_DATA_DIR")
    return Path(env).expanduser() if env else Path(platformdirs.user_data_dir("spectui"))


def config_path() -> Path:
    return config_dir() / "config.toml"


def resource_dir(name: str) -> Path:
    """A bundled folder (themes, profiles, prompts): inside the installed wheel, or at the top of a checkout."""
    for candidate in (PACKAGE_DIR / name, PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    return PACKAGE_DIR / name


def atomic_write(path: Path, text: str | bytes) -> Path:
    """Write a file users keep: a temporary beside it, fsync, then an atomic rename.

    A symlink is written through to its target (the link stays a link), and an existing file keeps
    its permission bits (mkstemp would make it 0600). Returns the path really written.
    """
    path = Path(path)
    if path.is_symlink():
        path = path.resolve()
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        data = text.encode("utf-8") if isinstance(text, str) else text
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_config_file(path: Path, what: str, limit: int = CONFIG_MAX) -> str:
    """The text of a file found in a folder of `what`s, through the one bounded loader (store.bounded): a
    regular file (not a link to a device, a pipe or a folder named *.toml), at most `limit` bytes, UTF-8;
    else InputError naming the file."""
    try:
        return read_text_bounded(path, what, limit)
    except InputError as exc:
        raise InputError(f"{exc}: skipped") from None
