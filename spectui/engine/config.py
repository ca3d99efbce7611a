"""The user's settings (~/.config/spectui/config.toml): remembered theme and profile, autosave."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import platformdirs
import tomli_w

KNOWN = {"theme", "profile", "autosave", "auto_notebook", "notebook"}


def config_dir() -> Path:
    env = os.environ.get("SPECTUI_CONFIG_DIR")
    return Path(env).expanduser() if env else Path(platformdirs.user_config_dir("spectui"))


def data_dir() -> Path:
    """Sessions, the default notebook and screenshots (SPECTUI_DATA_DIR overrides)."""
    env = os.environ.get("SPECTUI_DATA_DIR")
    return Path(env).expanduser() if env else Path(platformdirs.user_data_dir("spectui"))


def config_path() -> Path:
    return config_dir() / "config.toml"


def load() -> tuple[dict, list[str]]:
    path = config_path()
    if not path.exists():
        return {}, []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return {}, [f"settings {path}: {exc}; using defaults (the file is left as it is)"]
    warnings = [f"settings {path}: unknown key {k!r} ignored" for k in data if k not in KNOWN]
    return {k: v for k, v in data.items() if k in KNOWN}, warnings


def remember(**values) -> None:
    """Update settings atomically; a broken file is never overwritten."""
    from spectui.engine.notebook import atomic_write

    path = config_path()
    current: dict = {}
    if path.exists():
        try:
            current = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            return
    current.update({k: v for k, v in values.items() if v is not None})
    atomic_write(path, tomli_w.dumps(current))
