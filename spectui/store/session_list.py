"""Listing saved sessions: one summary line per file; a bad file is reported, never hides the others.

A listing reads each file's header and its summary records only — the servers, each prompt and each
prompt's recorded result (its verdict, speed-up and acceptance) — found by their line prefixes in a
memory map and parsed alone; the stream events, nearly all of a file's bytes, are never parsed (a
1,000,000-event session took 7.8 s to list when every file was loaded whole). `spectui replay` and
`report` still read everything and check each verdict against its events.
"""

from __future__ import annotations

import mmap
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import orjson

from spectui.core.errors import InputError
from spectui.core.stats import unit_geomean
from spectui.core.types import SIDES
from spectui.store.bounded import parse_json_text
from spectui.store.session import FORMAT, VERSION, info_from_json

# a record's first bytes as the writer puts them (orjson, or json.dumps with or without spaces), at the
# start of a line: found in one pass (a find for each of the 8 took 2.4 s on a 134 MB session, this 0.4 s)
_KINDS = ("servers", "prompt", "result", "run")
# (never at the file's very start: that is the header's line)
_RECORD = re.compile(rb'\n\{"type": ?"(' + b"|".join(k.encode() for k in _KINDS) + rb')"')


@dataclass
class SessionSummary:
    path: Path
    created: str
    baseline: str
    candidate: str
    prompt: str
    n_prompts: int
    identical: bool | None
    speedup: float | None
    acceptance: float | None
    problem: str | None = None
    # the recorded verdicts in the reports' words: identical | DIFFERS | FAILED (a side failed, nothing
    # differed) | — (a prompt has none: the recording stops inside it)
    verdict: str = "—"
    runs: int = 0  # prompt records; n_prompts counts distinct prompts (a --repeat run records each run)
    build: str = "?"  # the candidate's build, as the reports print it
    over_set: bool = False  # the speed-up is the whole set's (two or more prompts gave one)

    def verdict_text(self) -> str:
        return self.verdict

    def speedup_text(self) -> str:
        """The run's speed-up as the reports give it (the prompt's own, or the whole set's over prompts), with
        the acceptance of the same runs beside it."""
        if not self.speedup:
            return "—"
        over = " over the set" if self.over_set else ""
        if self.acceptance is None:
            return f"{self.speedup:.2f}×{over} (no drafts)"
        return f"{self.speedup:.2f}×{over} at {self.acceptance:.0%} accepted"

    def count_text(self) -> str:
        n = f"{self.n_prompts} prompt{'s' if self.n_prompts != 1 else ''}"
        return n if self.runs <= self.n_prompts else f"{n}, {self.runs} runs"

    def line(self) -> str:
        if self.problem:
            return f"{self.path.name}: {self.problem}"
        return (
            f"{self.created[:19]:<20} {self.path.name:<40} {self.prompt:<16} {self.count_text():<18} "
            f"{self.verdict:<9} {self.speedup_text()}  [{self.candidate}, build {self.build}]"
        )


def _problem(path: Path, why: str) -> SessionSummary:
    return SessionSummary(path, "", "", "", "", 0, None, None, None, problem=why)


def _status(rec: dict | None) -> str | None:
    """A result record's carried verdict status (core.verdict); older sessions: their identical key."""
    if rec is None:
        return None
    v = rec.get("verdict")
    if isinstance(v, dict) and isinstance(v.get("status"), str):
        return v["status"]
    same = rec.get("identical")
    return "identical" if same is True else ("differs" if same is False else None)


def _verdict(statuses: list[str | None]) -> str:
    if not statuses:
        return "—"
    if "differs" in statuses:
        return "DIFFERS"
    if None in statuses or "incomplete" in statuses:
        return "—"
    if "failed" in statuses:
        return "FAILED"
    return "identical" if all(s == "identical" for s in statuses) else "—"


def _count_prompts(prompts: list[dict], results_after: list[dict | None]) -> int:
    """Prompts as the reports group them: a prompt record is another run of the one before it where its
    result says run > 1, or, cut off before its result, where it names the same prompt as the one before
    and that one's result said more runs were to come."""
    n = 0
    previous: tuple[str | None, dict | None] = (None, None)
    for rec, result in zip(prompts, results_after, strict=False):
        pid = rec["prompt"].get("id") if isinstance(rec.get("prompt"), dict) else None
        if result is not None:
            again = isinstance(result.get("run"), int) and result["run"] > 1
        else:
            before = previous[1]
            again = (
                pid is not None
                and pid == previous[0]
                and before is not None
                and isinstance(before.get("runs"), int)
                and isinstance(before.get("run"), int)
                and before["run"] < before["runs"]
            )
        n += 0 if again else 1
        previous = (pid, result)
    return n


def _figures(done: list[dict]) -> tuple[float | None, float | None, int]:
    """The speed-up the reports give (core.report.whole_set: over the prompts, each prompt its runs' mean
    log ratio; one prompt: its own) and the acceptance pooled over the same runs."""
    groups: list[list[dict]] = []
    for rec in done:
        run = rec.get("run")
        if groups and isinstance(run, int) and run > 1:
            groups[-1].append(rec)
        else:
            groups.append([rec])
    units = [[v for r in g if (v := _number(r.get("speedup"))) is not None] for g in groups]
    units = [u for u in units if u]
    # one prompt or many: the geometric mean (of its runs' ratios; of the prompts' mean logs), the figure
    # replay, the reports and a certificate give for the same runs (core.stats.ratio_interval, over_units)
    speedup = unit_geomean(units) if units else None
    paired = [r for r in done if _number(r.get("speedup")) is not None]
    sides = [c for r in paired if isinstance(c := r.get("candidate"), dict)]
    acceptance = None
    if sides and all(_number(c.get("drafted")) is not None for c in sides):
        drafted = sum(_number(c.get("drafted")) or 0 for c in sides)
        accepted = sum(_number(c.get("accepted")) or 0 for c in sides)
        acceptance = accepted / drafted if drafted else None
    elif sides:  # an older session without the counts: the last run's rate
        acceptance = _number(sides[-1].get("acceptance_rate"))
    return speedup, acceptance, len(units)


def _summary_records(data) -> list[tuple[int, str, dict]]:
    """(offset, kind, record) of every summary record, in file order; an unreadable one is left out."""
    found = [(m.start() + 1, m.group(1).decode()) for m in _RECORD.finditer(data)]
    out = []
    for at, kind in found:
        end = data.find(b"\n", at)
        try:
            rec = orjson.loads(data[at : end if end != -1 else len(data)])
        except orjson.JSONDecodeError:
            continue  # the last line cut mid-write, or a damaged one: replay names it
        if isinstance(rec, dict):
            out.append((at, kind, rec))
    return out


def _number(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


HEADER_MAX = 64 << 10  # a session's header line is a few hundred bytes


def summarise(path: Path) -> SessionSummary:
    read = _head_and_records(path)
    if isinstance(read, SessionSummary):  # what is wrong with the file, as its row
        return read
    head, records = read
    servers = [r for _, k, r in records if k == "servers"]
    prompts = [r for _, k, r in records if k == "prompt"]
    results_after = _results_after(records)
    infos = {}
    for side in SIDES:
        try:
            infos[side] = info_from_json(servers[-1][side]).describe_speedup() if servers else "?"
        except (KeyError, TypeError, ValueError, AttributeError):
            infos[side] = "?"
    statuses = [_status(r) for r in results_after]
    flags = [{"identical": True, "differs": False}.get(st or "") for st in statuses]
    identical = False if False in flags else (True if flags and all(f is True for f in flags) else None)
    first = prompts[0].get("prompt") if prompts else None
    done = [r for r in results_after if r is not None]
    speedup, acceptance, units = _figures(done)
    build = "?"
    if servers and isinstance(servers[-1].get("candidate"), dict):
        build = str(servers[-1]["candidate"].get("build") or "?")
    return SessionSummary(
        path,
        str(head.get("created", "?")),
        infos["baseline"],
        infos["candidate"],
        str(first.get("id", "?")) if isinstance(first, dict) else "—",
        _count_prompts(prompts, results_after),
        identical,
        speedup,
        acceptance,
        verdict=_verdict(statuses),
        runs=len(prompts),
        build=build,
        over_set=units > 1,
    )


def _head_and_records(path: Path) -> tuple[dict, list] | SessionSummary:
    """The session's header and the records a summary reads, or the row saying why the file is no session
    this spectui reads (not a regular file, empty, another format or a newer version, unreadable)."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return _problem(path, f"not a regular file ({_kind(path.lstat().st_mode)}): skipped")
        with open(path, "rb") as fh:
            first_line = fh.readline(HEADER_MAX)
            if not first_line:
                return _problem(path, "empty, not a spectui session")
            try:
                head = parse_json_text(first_line, str(path))
            except InputError:
                head = None
            if not isinstance(head, dict) or head.get("format") != FORMAT:
                return _problem(path, "not a spectui session (its first line is not a spectui header)")
            version = head.get("version")
            if not isinstance(version, int) or isinstance(version, bool) or version > VERSION:
                return _problem(
                    path, f"session format version {version!r}, not one this spectui reads (upgrade spectui)"
                )
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return head, _summary_records(data)
    except (OSError, ValueError) as exc:
        return _problem(path, f"cannot be read ({exc})")


def _results_after(records: list) -> list[dict | None]:
    """Each prompt's result: the result record after it, before the next prompt (None: it has none)."""
    results_after: list[dict | None] = []
    for _, kind, rec in records:
        if kind == "prompt":
            results_after.append(None)
        elif kind == "result" and results_after and results_after[-1] is None:
            results_after[-1] = rec
    return results_after


def list_sessions(folder: Path) -> list[SessionSummary]:
    """Every *.jsonl in `folder`, newest first; a file that is not a regular one (a link, a pipe, a device)
    or cannot be read is a row with its problem, never opened (a FIFO froze the listing, a link to
    /dev/zero filled memory, a dangling link was a traceback)."""
    if not folder.is_dir():
        return []
    found: list[tuple[float, Path, str | None]] = []
    for p in folder.glob("*.jsonl"):
        try:
            st = p.lstat()
        except OSError as exc:  # gone between the listing and the look
            found.append((0.0, p, f"cannot be read ({exc.strerror})"))
            continue
        why = None if stat.S_ISREG(st.st_mode) else f"not a regular file ({_kind(st.st_mode)}): skipped"
        found.append((st.st_mtime, p, why))
    found.sort(key=lambda t: t[0], reverse=True)
    return [summarise(p) if why is None else _problem(p, why) for _, p, why in found]


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a link"
    if stat.S_ISFIFO(mode):
        return "a pipe"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a device or socket"
