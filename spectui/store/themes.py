"""Theme files: themes/*.toml (bundled) and the user's config directory; parsed into plain data.

A broken theme file is reported and skipped, never fatal.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from spectui.core.errors import InputError
from spectui.store.bounded import parse_toml_text
from spectui.store.locations import config_dir, read_config_file, resource_dir

MARKS = ("accepted", "target", "first", "rejected", "diverge")
HEX = re.compile(r"#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})")
COLOURS = (
    "primary",
    "secondary",
    "accent",
    "background",
    "surface",
    "panel",
    "foreground",
    "success",
    "warning",
    "error",
)


def user_theme_dir() -> Path:
    return config_dir() / "themes"


@dataclass(frozen=True)
class ThemeSpec:
    name: str
    dark: bool
    colors: dict[str, str]
    marks: dict[str, str]
    path: str = ""


@dataclass
class ThemeLoad:
    themes: list[ThemeSpec] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def load_theme_file(path: Path) -> ThemeSpec:
    data = parse_toml_text(read_config_file(path, "theme"), f"theme {path}")  # a regular file, bounded, depth checked
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("missing key 'name'")
    colors = data.get("colors") or {}
    if not isinstance(colors, dict):
        raise ValueError(f"key 'colors' is {type(colors).__name__}, not a table")
    if "primary" not in colors:
        raise ValueError("missing key 'colors.primary'")
    unknown = set(colors) - set(COLOURS)
    if unknown:
        raise ValueError(f"unknown key 'colors.{sorted(unknown)[0]}'")
    marks = data.get("spectui") or {}
    if not isinstance(marks, dict):
        raise ValueError(f"key 'spectui' is {type(marks).__name__}, not a table")
    bad = set(marks) - set(MARKS)
    if bad:
        raise ValueError(f"unknown key 'spectui.{sorted(bad)[0]}'")
    for k, v in [*colors.items(), *marks.items()]:
        if not isinstance(v, str) or not HEX.fullmatch(v):
            raise ValueError(f"key {k!r}: {v!r} is not a #rgb or #rrggbb colour")
    return ThemeSpec(name, bool(data.get("dark", True)), dict(colors), dict(marks), str(path))


def load_themes(dirs: list[Path] | None = None) -> ThemeLoad:
    out = ThemeLoad()
    for d in dirs if dirs is not None else [resource_dir("themes"), user_theme_dir()]:
        if not d.is_dir():
            continue
        for path in sorted(d.glob("*.toml")):
            try:
                out.themes.append(load_theme_file(path))
            except InputError as exc:  # not a regular file, too large, not UTF-8, too deep: it says so, naming it
                line = exc.one_line()
                out.problems.append(line if line.endswith("skipped") else f"{line}; skipped")
            except (tomllib.TOMLDecodeError, ValueError, UnicodeDecodeError, OSError) as exc:
                out.problems.append(f"theme {path}: {exc}; skipped")
    return out
