"""Prompts from the files people already have: gateway logs of OpenAI chat requests, ShareGPT
conversations and Spec-Bench questions (JSON Lines, or a JSON array of the same records).

- OpenAI chat requests, one per line: `{"messages": [{"role": …, "content": …}, …], …}` (what a
  gateway logs); content may be a string or a list of `{"type": "text", "text": …}` parts.
- ShareGPT: `{"id": …, "conversations": [{"from": "human"|"gpt"|"system", "value": …}, …]}`; the prompt is
  the conversation up to its last human turn (the answer after it is what the model is to write).
- Spec-Bench (question.jsonl): `{"question_id": …, "category": …, "turns": ["…", …]}`; the prompt is the
  first turn (later turns follow the model's own answers, which a question file does not hold).

The format is recognised from the first record's keys; every bad line is reported with its number,
and none is skipped silently.
"""

from __future__ import annotations

import json
from pathlib import Path

from spectui.core.errors import InputError
from spectui.core.types import Prompt
from spectui.store.bounded import read_text_bounded

PROMPTS_MAX = 256 << 20  # Spec-Bench and ShareGPT dumps are tens of MiB

SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "system": "system",
}
FORMATS = {"messages": "openai-chat", "conversations": "sharegpt", "turns": "spec-bench"}
MAX_ERRORS = 5


def is_json_prompts(path: Path) -> bool:
    return path.suffix.lower() in (".jsonl", ".json", ".ndjson")


def load(path: Path) -> tuple[str, list[Prompt]]:
    """The prompts in a JSON Lines (or JSON array) file; InputError naming the bad lines."""
    text = read_text_bounded(path, "prompts file", PROMPTS_MAX)  # a BOM (files saved on Windows) is not data
    records, errors = _records(path, text)
    if not records and not errors:
        raise InputError(f"{path} holds no prompts", hint="one JSON object a line: messages, conversations or turns")
    fmt = _format(path, records[0]) if records else "JSON Lines"
    out: list[Prompt] = []
    seen: set[str] = set()
    for lineno, rec in records:
        try:
            p = _prompt(fmt, rec, lineno)
        except ValueError as exc:
            errors.append(f"line {lineno}: {exc}")
            continue
        if p.id in seen:
            errors.append(f"line {lineno}: duplicate id {p.id!r}")
            continue
        seen.add(p.id)
        out.append(p)
    errors.sort(key=lambda e: int(e.split(":")[0].split()[1]))
    if errors:
        more = f" (and {len(errors) - MAX_ERRORS} more)" if len(errors) > MAX_ERRORS else ""
        raise InputError(
            f"{path}: {len(errors)} bad {fmt} record{'s' if len(errors) > 1 else ''}: "
            + "; ".join(errors[:MAX_ERRORS])
            + more,
            hint="fix or remove those lines; spectui skips none silently",
        )
    return f"{path.stem} ({fmt})", out


def _records(path: Path, text: str) -> tuple[list[tuple[int, object]], list[str]]:
    stripped = text.lstrip()
    if stripped.startswith("["):  # a JSON array of records (ShareGPT dumps often are)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
        except RecursionError:
            raise InputError(f"{path}: nested too deeply to be a file of prompts") from None
        if not isinstance(data, list):
            raise InputError(f"{path}: a JSON file of prompts must hold an array of records")
        return [(i, rec) for i, rec in enumerate(data, 1)], []
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((lineno, json.loads(line)))
        except json.JSONDecodeError as exc:
            out.append((lineno, exc.msg))
        except RecursionError:
            out.append((lineno, "nested too deeply"))
    return [r for r in out if not isinstance(r[1], str)], [
        f"line {n}: not JSON ({m})" for n, m in out if isinstance(m, str)
    ]


def _format(path: Path, first: tuple[int, object]) -> str:
    lineno, rec = first
    if isinstance(rec, dict):
        for key, fmt in FORMATS.items():
            if key in rec:
                return fmt
    raise InputError(
        f"{path}: line {lineno} is not a prompt record spectui knows",
        hint='expected {"messages": …} (OpenAI chat), {"conversations": …} (ShareGPT) or {"turns": …} (Spec-Bench)',
    )


def _text(content, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: keep the text ones
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        texts = [t for t in parts if isinstance(t, str)]
        if parts and len(texts) == len(parts):
            return "".join(texts)
    raise ValueError(f"{where}: content must be text (a string or text parts)")


def _prompt(fmt: str, rec: object, lineno: int) -> Prompt:
    p = _parsed(fmt, rec, lineno)
    for what, text in (("id", p.id), ("category", p.category), ("raw", p.raw or "")) + tuple(
        (f"message {j}", m["content"]) for j, m in enumerate(p.messages, 1)
    ):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate ("\ud800"): JSON allows it, no text holds it
            bad = text[exc.start : exc.end].encode("unicode_escape").decode()
            raise ValueError(f"{what} holds {bad}, half of a UTF-16 pair: not text") from None
    return p


def _parsed(fmt: str, rec: object, lineno: int) -> Prompt:
    if not isinstance(rec, dict):
        raise ValueError("not a JSON object")
    if fmt == "openai-chat":
        msgs = rec.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise ValueError("'messages' must be a non-empty array")
        clean = []
        for j, m in enumerate(msgs, 1):
            if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "developer"):
                raise ValueError(f"message {j} needs a role (system, user or assistant)")
            role = "system" if m["role"] == "developer" else m["role"]
            clean.append({"role": role, "content": _text(m.get("content"), f"message {j}")})
        if clean[-1]["role"] != "user":
            raise ValueError("the last message must be from the user")
        pid = str(rec.get("id") or f"line{lineno}")
        return Prompt(pid, str(rec.get("category") or "chat"), messages=clean)
    if fmt == "sharegpt":
        conv = rec.get("conversations")
        if not isinstance(conv, list) or not conv:
            raise ValueError("'conversations' must be a non-empty array")
        clean = []
        for j, m in enumerate(conv, 1):
            role = SHAREGPT_ROLES.get(str(m.get("from", "")).lower()) if isinstance(m, dict) else None
            if role is None:
                raise ValueError(f"turn {j} needs from (human, gpt or system)")
            clean.append({"role": role, "content": _text(m.get("value"), f"turn {j}")})
        last_user = max((i for i, m in enumerate(clean) if m["role"] == "user"), default=None)
        if last_user is None:
            raise ValueError("no human turn to answer")
        pid = str(rec.get("id") or f"line{lineno}")
        return Prompt(pid, str(rec.get("category") or "sharegpt"), messages=clean[: last_user + 1])
    turns = rec.get("turns")
    if not isinstance(turns, list) or not turns or not isinstance(turns[0], str) or not turns[0].strip():
        raise ValueError("'turns' must be a non-empty array of strings")
    qid = rec.get("question_id")
    pid = f"q{qid}" if qid is not None else f"line{lineno}"
    return Prompt(pid, str(rec.get("category") or "spec-bench"), messages=[{"role": "user", "content": turns[0]}])
