"""Prompt sets: bundled ones by name, or a user's TOML file.

A prompt set file:

    name = "my-set"
    [[prompt]]
    id = "fizzbuzz"            # unique within the set
    category = "code"          # free text; shown in reports
    text = "Write FizzBuzz in Python."      # one user message, rendered with the server's chat template
    # or a multi-turn chat:
    # messages = [{role = "user", content = "…"}, {role = "assistant", content = "…"}, …]
    # or a raw prompt sent as-is, with no chat template:
    # raw = "def fib(n):"
"""

from __future__ import annotations

import random
import stat
from collections.abc import Callable
from pathlib import Path

from spectui.core.errors import InputError
from spectui.core.types import Prompt
from spectui.store import prompt_files
from spectui.store.bounded import load_toml_file
from spectui.store.locations import config_dir, resource_dir

BUNDLED_DIR = resource_dir("prompts")
ROLES = {"system", "user", "assistant"}


def single(text: str, raw: bool = False) -> Prompt:
    if not text.strip():
        raise InputError("the prompt is empty", hint="give --prompt some text")
    if raw:
        return Prompt(id="prompt", category="", raw=text)
    return Prompt(id="prompt", category="", messages=[{"role": "user", "content": text}])


def bundled_names() -> list[str]:
    return sorted(p.stem for p in BUNDLED_DIR.glob("*.toml"))


def user_sets_dir() -> Path:
    return config_dir() / "prompts"


def available_sets() -> list[tuple[str, str]]:
    """(label, name-or-path) for every bundled set and each of the user's sets in ~/.config/spectui/prompts/."""
    out = [(f"{n} (bundled)", n) for n in bundled_names()]
    d = user_sets_dir()
    if d.is_dir():
        out += [(f"{p.stem} (yours)", str(p)) for p in sorted(d.glob("*.toml")) if _regular(p)]
    return out


def _regular(p: Path) -> bool:
    """A regular file (through links): a FIFO, a device or a folder named *.toml is not a prompt set."""
    try:
        return stat.S_ISREG(p.stat().st_mode)
    except OSError:
        return False


def load_set(name_or_path: str) -> tuple[str, list[Prompt]]:
    """A bundled set by name, or a prompts file by path."""
    path = Path(name_or_path).expanduser()
    if not path.exists() and "/" not in name_or_path and not name_or_path.endswith(".toml"):
        candidate = BUNDLED_DIR / f"{name_or_path}.toml"
        if candidate.is_file():
            path = candidate
        else:
            raise InputError(
                f"no prompt set named {name_or_path!r}",
                hint=f"bundled sets: {', '.join(bundled_names())}, or give a file path",
            )
    if not path.is_file():
        if path.exists():
            raise InputError(f"prompts file {path} is not a regular file (a folder, a pipe or a device)")
        raise InputError(f"prompts file {path} does not exist")

    if prompt_files.is_json_prompts(path):
        return prompt_files.load(path)
    data = load_toml_file(path, "prompts file", prompt_files.PROMPTS_MAX)  # bounded, depth checked; a BOM is dropped
    return parse_set(data, str(path))


def parse_set(data: dict, where: str) -> tuple[str, list[Prompt]]:
    items = data.get("prompt")
    if not items:
        raise InputError(
            f"{where}: no [[prompt]] entries", hint="see the prompts file format in docs/compare.md (Prompt sets)"
        )
    if not isinstance(items, list):
        raise InputError(f"{where}: 'prompt' must be an array of tables ([[prompt]])")
    out: list[Prompt] = []
    seen: set[str] = set()
    for i, item in enumerate(items, 1):
        ctx = f"{where}: prompt #{i}"
        if not isinstance(item, dict):
            raise InputError(f"{ctx}: must be a table")
        pid = str(item.get("id") or f"p{i}")
        if pid in seen:
            raise InputError(f"{ctx}: duplicate id {pid!r}")
        seen.add(pid)
        ctx = f"{where}: prompt {pid!r}"
        unknown = set(item) - {"id", "category", "text", "messages", "raw"}
        if unknown:
            raise InputError(
                f"{ctx}: unknown key {sorted(unknown)[0]!r}", hint="keys: id, category, text, messages, raw"
            )
        given = [k for k in ("text", "messages", "raw") if k in item]
        if len(given) != 1:
            raise InputError(f"{ctx}: give exactly one of text, messages or raw")
        category = str(item.get("category", ""))
        if "raw" in item:
            if not isinstance(item["raw"], str) or not item["raw"]:
                raise InputError(f"{ctx}: 'raw' must be a non-empty string")
            out.append(Prompt(pid, category, raw=item["raw"]))
            continue
        if "text" in item:
            if not isinstance(item["text"], str) or not item["text"].strip():
                raise InputError(f"{ctx}: 'text' must be a non-empty string")
            out.append(Prompt(pid, category, messages=[{"role": "user", "content": item["text"]}]))
            continue
        msgs = item["messages"]
        if not isinstance(msgs, list) or not msgs:
            raise InputError(f"{ctx}: 'messages' must be a non-empty array")
        clean = []
        for j, m in enumerate(msgs, 1):
            if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
                raise InputError(f"{ctx}: message {j} needs role (system|user|assistant) and content")
            clean.append({"role": m["role"], "content": m["content"]})
        if clean[-1]["role"] != "user":
            raise InputError(f"{ctx}: the last message must be from the user")
        out.append(Prompt(pid, category, messages=clean))
    return str(data.get("name") or Path(where).stem), out


def pick(
    prompts: list[Prompt],
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    note: Callable[[str], None] | None = None,
) -> list[Prompt]:
    """--limit N: the first N; --sample N: N drawn at random with --sample-seed S (kept in file order).
    A sample as large as the set is the whole set, and `note` is told so."""
    for name, v in (("--limit", limit), ("--sample", sample)):
        if v is not None and v < 1:
            raise InputError(f"{name} must be at least 1, not {v}")
    if sample is not None:
        if sample >= len(prompts) and note is not None:
            note(f"--sample {sample}: the set holds {len(prompts)} prompts; running all {len(prompts)}")
        if sample < len(prompts):
            chosen = sorted(random.Random(seed).sample(range(len(prompts)), sample))
            prompts = [prompts[i] for i in chosen]
    if limit is not None:
        prompts = prompts[:limit]
    return prompts
