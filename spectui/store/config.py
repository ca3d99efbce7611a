"""The user's settings (~/.config/spectui/config.toml): remembered theme and profile, autosave."""

from __future__ import annotations

import tomli_w

from spectui.core.errors import InputError
from spectui.store.bounded import load_toml_file
from spectui.store.locations import atomic_write, config_path

KNOWN = {"theme", "profile", "autosave", "auto_notebook", "notebook"}


def load() -> tuple[dict, list[str]]:
    path = config_path()
    if not path.exists():
        return {}, []
    try:
        data = load_toml_file(path, "settings")
    except InputError as exc:
        return {}, [f"{exc}; using defaults (the file is left as it is)"]
    warnings = [f"settings {path}: unknown key {k!r} ignored" for k in data if k not in KNOWN]
    return {k: v for k, v in data.items() if k in KNOWN}, warnings


def remember(**values) -> None:
    """Update settings atomically; a broken file is never overwritten."""
    path = config_path()
    current: dict = {}
    if path.exists():
        try:
            current = load_toml_file(path, "settings")
        except InputError:
            return
    current.update({k: v for k, v in values.items() if v is not None})
    atomic_write(path, tomli_w.dumps(current))
