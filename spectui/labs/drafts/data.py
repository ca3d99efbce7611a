"""Training data for a draft, written by the target itself (self-distillation): every prompt of a set
answered by the running server, in the record shapes the trainers read, with some prompts held out for
the proof.

Formats (one JSON object a line):
- sharegpt: {"id", "conversations": [{"from": "system"|"human"|"gpt", "value"}, …]} — SpecForge's
  sharegpt preset with --data-path (id + conversations of from/value) and speculators' prepare_data
  (its _normalize_conversation maps from/value to role/content).
- conversations: {"id", "conversations": [{"role", "content"}, …]} — SpecForge "Option 1" and
  speculators' prepare_data example.
- messages: {"id", "messages": [{"role", "content"}, …]} — an OpenAI chat log, as gateways write and
  spectui reads back.
- speculators: {"id": "<id>_gen0", "primary_id", "input_ids", "loss_mask", "text", "metadata"} — the
  rows speculators' response_regeneration/script.py writes (prompt ids with loss 0, generated ids with
  loss 1), which prepare_data takes without a render endpoint. Exact token ids from the server.

The output is append-only: each record is one write of a whole line followed by fsync, so a killed run
leaves whole records; a torn last line (a kill inside the write) is cut off on the next start. A rerun
skips the ids already written. Duplicate prompts (same messages) are dropped before the split; the
held-out prompts (chosen by a hash of their content, so the same on every run) go to a prompt set
FILE.heldout.toml that `spectui compare --prompts` reads.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import tomli_w

from spectui.core.errors import InputError, Unsupported, describe
from spectui.core.runner import render_prompt, run_side
from spectui.core.types import GenerationParams, Prompt
from spectui.store.bounded import parse_json_text
from spectui.store.locations import atomic_write

FORMATS = ("sharegpt", "conversations", "messages", "speculators")
SHAREGPT_FROM = {"system": "system", "user": "human", "assistant": "gpt"}


def prompt_key(p: Prompt) -> str:
    """The content a duplicate shares: the messages (or raw text), not the id."""
    body = {"raw": p.raw} if p.raw is not None else {"messages": p.messages}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@dataclass
class Plan:
    train: list[Prompt]
    heldout: list[Prompt]
    duplicates: list[str]  # ids dropped as repeats of an earlier prompt


def plan(prompts: list[Prompt], holdout: float) -> Plan:
    """Drop repeats, then set aside round(holdout × N) prompts (at least one when holdout > 0 and N ≥ 2),
    those whose content hashes lowest: the same choice on every run, whatever the order."""
    if not 0 <= holdout < 1:
        raise InputError(f"--holdout must be at least 0 and below 1, not {holdout}")
    seen: dict[str, str] = {}
    unique: list[Prompt] = []
    dups: list[str] = []
    for p in prompts:
        k = prompt_key(p)
        if k in seen:
            dups.append(p.id)
            continue
        seen[k] = p.id
        unique.append(p)
    count = round(holdout * len(unique))
    if holdout > 0 and len(unique) >= 2:
        count = max(1, count)
    count = min(count, len(unique) - 1) if unique else 0
    chosen = {id(p) for p in sorted(unique, key=prompt_key)[:count]}
    return Plan([p for p in unique if id(p) not in chosen], [p for p in unique if id(p) in chosen], dups)


def record(fmt: str, prompt: Prompt, answer: str, extra: dict | None = None) -> dict:
    """One training record for a prompt and the target's answer, in a trainer's format."""
    if fmt == "speculators":
        if extra is None:
            raise ValueError("the speculators format needs the token ids")
        return {
            "id": f"{prompt.id}_gen0",
            "primary_id": prompt.id,
            "input_ids": extra["prompt_ids"] + extra["answer_ids"],
            "loss_mask": [0] * len(extra["prompt_ids"]) + [1] * len(extra["answer_ids"]),
            "text": extra["text"],
            "metadata": extra.get("metadata", {}),
        }
    if prompt.raw is not None:
        raise ValueError(f"prompt {prompt.id!r} is a raw prompt, not a chat: only --format speculators holds it")
    turns = [*prompt.messages, {"role": "assistant", "content": answer}]
    if fmt == "sharegpt":
        return {
            "id": prompt.id,
            "conversations": [{"from": SHAREGPT_FROM[m["role"]], "value": m["content"]} for m in turns],
        }
    if fmt == "conversations":
        return {"id": prompt.id, "conversations": [{"role": m["role"], "content": m["content"]} for m in turns]}
    if fmt == "messages":
        return {"id": prompt.id, "messages": [{"role": m["role"], "content": m["content"]} for m in turns]}
    raise ValueError(f"unknown format {fmt!r}")


def record_id(rec: dict) -> str | None:
    """The prompt id a record answers (speculators rows carry it as primary_id)."""
    v = rec.get("primary_id", rec.get("id"))
    return str(v) if v is not None else None


def answer_of(rec: dict) -> str | None:
    """The target's answer held in a record of any format (the text after the prompt, for speculators)."""
    for key in ("conversations", "messages"):
        turns = rec.get(key)
        if isinstance(turns, list) and turns and isinstance(turns[-1], dict):
            return turns[-1].get("value", turns[-1].get("content"))
    return None


OWN_START = (b'{"id": ', b'{"primary_id": ')  # how json.dumps of every record() above begins
HELDOUT_HEAD = "# prompts held out of the draft's training data (spectui drafts data"
FIRST_LINE_MAX = 64 << 20  # a speculators row holds one answer's ids and text: far below this


def check_own(out: Path) -> None:
    """Refuse `out` unless it is new, empty or a drafts data file, and its held-out set unless it is new
    or one this command wrote, before anything touches either file (a mistyped -o at a model
    had its tail cut off). Only the first record is read: a data file begins with a whole record, or
    with the torn first line of a run killed inside its first write."""
    if out.is_symlink() and not out.exists():
        raise InputError(f"{out} is a link to nothing", hint="give -o a new file or a drafts data file")
    if out.exists():
        if not out.is_file():
            raise InputError(f"{out} is not a regular file", hint="give -o a new file or a drafts data file")
        with open(out, "rb") as fh:
            first = fh.readline(FIRST_LINE_MAX)
        if first and not _is_record_line(first):
            raise InputError(
                f"{out} is not a drafts data file (its first line is not a record): left untouched",
                hint="give -o a new file, or the file an earlier `spectui drafts data` run wrote",
            )
    held = heldout_path(out)
    if held.exists() or held.is_symlink():
        ok = held.is_file()
        if ok:
            with open(held, "rb") as fh:
                ok = fh.read(len(HELDOUT_HEAD)) == HELDOUT_HEAD.encode()
        if not ok:
            raise InputError(
                f"{held} exists and is not a held-out set this command wrote: left untouched",
                hint="move it away, or give -o another name",
            )


def _is_record_line(line: bytes) -> bool:
    if not line.endswith(b"\n"):  # the only line, torn by a kill: it must begin as a record does
        return line.startswith(OWN_START)
    try:
        rec = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return False
    return (
        isinstance(rec, dict)
        and record_id(rec) is not None
        and any(k in rec for k in ("conversations", "messages", "input_ids"))
    )


def repair_tail(path: Path) -> int:
    """Cut a torn last line (a run killed inside a write) off an append-only JSONL file; returns the bytes
    cut. A last line that does not parse is torn too: whole records are always followed by a newline."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb") as fh:
        fh.seek(max(0, size - (1 << 20)))
        tail = fh.read()
    if tail.endswith(b"\n"):
        return 0
    cut = tail.rfind(b"\n")
    keep = size - len(tail) + cut + 1 if cut >= 0 else (0 if size <= len(tail) else None)
    if keep is None:  # a last line over 1 MiB: find its start from the beginning
        keep = 0
        with open(path, "rb") as fh:
            pos = 0
            for line in fh:
                pos += len(line)
                if line.endswith(b"\n"):
                    keep = pos
    with open(path, "r+b") as fh:
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    return size - keep


def read_records(path: Path) -> list[dict]:
    """The whole records of a data file; InputError naming a bad line (a torn last line is not one)."""
    out: list[dict] = []
    if not path.exists():
        return out
    with open(path, "rb") as fh:
        lines = fh.read().split(b"\n")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = parse_json_text(line, f"{path}: line {i}")
        except InputError as exc:
            if i == len(lines):  # the torn tail of a killed run: not a record yet
                break
            raise InputError(f"{exc}", hint="is it a drafts data file?") from None
        if not isinstance(rec, dict):
            raise InputError(f"{path}: line {i} is not a JSON object")
        out.append(rec)
    return out


class AppendLog:
    """Append-only JSONL: one os.write of a whole line, then fsync, per record."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, rec: dict) -> None:
        data = (json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8")
        try:
            written = os.write(self.fd, data)
            if written != len(data):  # a short write (disk full): the next start cuts the torn line off
                raise OSError(errno.ENOSPC, f"short write: {written} of {len(data)} bytes")
            os.fsync(self.fd)
        except OSError as exc:  # named, so the one line the CLI prints says which file
            raise OSError(exc.errno, exc.strerror or str(exc), str(self.path)) from None

    def close(self) -> None:
        os.close(self.fd)


def heldout_path(out: Path) -> Path:
    return out.with_name(out.name.removesuffix(".jsonl") + ".heldout.toml")


def heldout_toml(prompts: list[Prompt], source: str) -> str:
    items = []
    for p in prompts:
        item: dict = {"id": p.id, "category": p.category or "held-out"}
        if p.raw is not None:
            item["raw"] = p.raw
        elif len(p.messages) == 1 and p.messages[0]["role"] == "user":
            item["text"] = p.messages[0]["content"]
        else:
            item["messages"] = p.messages
        items.append(item)
    head = f"# prompts held out of the draft's training data (spectui drafts data, from {source})\n"
    return head + tomli_w.dumps({"name": "heldout", "prompt": items})


@dataclass
class DataResult:
    out: Path
    heldout: Path | None
    written: int = 0
    skipped_done: int = 0
    duplicates: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (prompt id, why)
    cut_bytes: int = 0
    train_total: int = 0
    heldout_count: int = 0
    tokens: int = 0

    def to_json(self) -> dict:
        return {
            "out": str(self.out),
            "heldout": str(self.heldout) if self.heldout else None,
            "written": self.written,
            "skipped_done": self.skipped_done,
            "duplicates": self.duplicates,
            "failed": [{"id": i, "why": w} for i, w in self.failed],
            "cut_bytes": self.cut_bytes,
            "train_total": self.train_total,
            "heldout_count": self.heldout_count,
            "tokens": self.tokens,
        }


Progress = Callable[[int, int, str], None]  # (done, total, prompt id)


async def answer_ids(backend, prompt_ids: list[int], ids: list[int | None], params: GenerationParams) -> list[int]:
    """The answer's token ids. llama.cpp's stream withholds a token whose bytes end inside a UTF-8 character
    and sends its text with the next one, without its id (tools/server: validate_utf8; e.g. ' ≈' is two
    tokens), so a greedy answer's missing ids are asked for again, in one request without streaming, and
    must agree with every id the stream did give."""
    if all(i is not None for i in ids):
        return ids  # type: ignore[return-value]
    again_for = getattr(backend, "greedy_ids", None)
    if again_for is None or params.temperature != 0:
        raise RuntimeError("the server gave no token ids for part of the answer (the speculators format needs them)")
    again = [tid for tid, _ in await again_for(prompt_ids, len(ids), top=1)]
    if len(again) != len(ids) or any(a != b for a, b in zip(again, ids, strict=True) if b is not None):
        raise RuntimeError("the server's greedy answer changed when asked again for its token ids")
    return again


async def answer(backend, prompt: Prompt, params: GenerationParams, fmt: str) -> tuple[str, dict | None]:
    """The target's answer to one prompt (and, for the speculators format, the exact token ids)."""
    text = await render_prompt(backend, prompt)
    rec = await run_side("baseline", backend, text, params)
    if rec.failed is not None:
        raise RuntimeError(rec.failed.message)
    out = rec.output().decode("utf-8", errors="replace")
    if not rec.tokens:
        raise RuntimeError("the server generated no tokens")
    extra = None
    if fmt == "speculators":
        prompt_ids = await backend.tokenize(text)
        ids = await answer_ids(backend, prompt_ids, [t.token_id for t in rec.tokens], params)
        extra = {
            "prompt_ids": prompt_ids,
            "answer_ids": ids,
            "text": text + out,
            "metadata": {
                "finish_reason": rec.figures.stop_type,
                "sampling_params": {
                    "temperature": params.temperature,
                    "seed": params.seed,
                    "max_tokens": params.max_tokens,
                },
                "server": getattr(backend.info, "build", None),
                "model": getattr(backend.info, "model", None),
            },
        }
    return out, extra


async def generate(
    backend,
    prompts: list[Prompt],
    out: Path,
    fmt: str,
    params: GenerationParams,
    holdout: float = 0.1,
    source: str = "",
    progress: Progress | None = None,
) -> DataResult:
    """Answer every training prompt not yet in `out` and append its record; write the held-out set."""
    pl = _checked_plan(backend, prompts, out, fmt, holdout)
    result = DataResult(out, None, duplicates=pl.duplicates, train_total=len(pl.train), heldout_count=len(pl.heldout))
    result.cut_bytes = repair_tail(out)
    done = {record_id(r) for r in read_records(out)}
    if pl.heldout:
        result.heldout = atomic_write(heldout_path(out), heldout_toml(pl.heldout, source))
        leaked = done & {p.id for p in pl.heldout}
        if leaked:
            raise InputError(
                f"{out} already answers held-out prompt(s) {sorted(str(x) for x in leaked)[:3]}",
                hint="the held-out share changed since the file was started: keep --holdout as it was",
            )
    todo = [p for p in pl.train if p.id not in done]
    result.skipped_done = len(pl.train) - len(todo)
    await _answer_all(backend, todo, out, fmt, params, result, len(pl.train), progress)
    return result


def _checked_plan(backend, prompts: list[Prompt], out: Path, fmt: str, holdout: float):
    """The training/held-out plan, once the format, the output file and the prompts fit one another (raw
    prompts and token ids need --format speculators and a server that gives ids)."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}", hint=f"one of {', '.join(FORMATS)}")
    if out.is_dir():
        raise InputError(f"{out} is a folder", hint="give -o a file name")
    check_own(out)
    pl = plan(prompts, holdout)
    raw = [p.id for p in pl.train if p.raw is not None]
    if raw and fmt != "speculators":
        raise InputError(
            f"{len(raw)} prompt(s) are raw text, not chats ({raw[0]!r} …)",
            hint="--format speculators holds raw prompts (token ids), or use a chat prompt set",
        )
    if fmt == "speculators" and not backend.capabilities.token_ids:
        raise Unsupported(f"{backend.kind} server at {backend.url} gives no token ids: --format speculators needs them")
    return pl


async def _answer_all(
    backend, todo: list[Prompt], out: Path, fmt: str, params, result: DataResult, total: int, progress
) -> None:
    """Each prompt answered and its record appended as it comes (a cut run keeps what it wrote); one prompt
    failing is noted in `result` and the rest go on."""
    log = AppendLog(out)
    try:
        for p in todo:
            if progress is not None:
                progress(result.skipped_done + result.written + len(result.failed), total, p.id)
            try:
                text, extra = await answer(backend, p, params, fmt)
            except Exception as exc:  # one prompt failing does not stop the rest; a rerun retries it
                result.failed.append((p.id, describe(exc)))
                continue
            log.append(record(fmt, p, text, extra))
            result.written += 1
            result.tokens += len(extra["answer_ids"]) if extra else 0
        if progress is not None:
            progress(result.skipped_done + result.written + len(result.failed), total, "")
    finally:
        log.close()


def corpus_text(records: list[dict]) -> str:
    """Text for a lookup cache: each record's prompt-and-answer text where it holds one (speculators),
    else its answer; records end with a blank line."""
    parts = []
    for rec in records:
        t = rec.get("text") if isinstance(rec.get("text"), str) else answer_of(rec)
        if t:
            parts.append(t)
    return "\n\n".join(parts) + ("\n" if parts else "")
