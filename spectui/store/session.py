"""Saved sessions: a versioned, line-oriented record of a comparison that replays without servers.

Format (JSON Lines, UTF-8; one object per line; appending never rewrites; a crash loses at most the
last line):

    {"format": "spectui-session", "version": 1, "created": "2026-12-01T08:00:00+00:00", "spectui": "0.1.0"}
    {"type": "servers", "baseline": {ServerInfo}, "candidate": {ServerInfo}}
    {"type": "prompt", "n": 0, "prompt": {Prompt}, "params": {...}, "order": "sequential"}
    {"type": "event", "n": 0, "side": "candidate", "t": 123456789, "ev": "token", "i": 5, "id": 1604,
     "d": "def", "label": "accepted", "step": 1, "rej": 0}          # "x": hex instead of "d" for non-UTF-8 bytes
    {"type": "event", …, "ev": "step", "step": 1, "drafted": 8, "accepted": 8}
    {"type": "event", …, "ev": "start" | "finish" | "failed", …}
    {"type": "result", "n": 0, "baseline": {figures}, "candidate": {figures}, "identical": true, …}
    {"type": "probe", "t": …, "gpus": […], "host": {…}}
    {"type": "terms", "terms": {labs.theory.record}}   # the formula's measured terms, appended after the run

`t` is nanoseconds since the prompt began. API keys are never written (spectui keeps none in its
records: ServerInfo holds URL, build, model and configuration only). A reader skips record types it does
not know, so a session with a "terms" record still loads in an older spectui, and one without in this.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from spectui.core.errors import InputError
from spectui.core.events import (
    SpecReport,
    StepEvent,
    StreamEvent,
    StreamFailed,
    StreamFinished,
    StreamStarted,
    TokenEvent,
)
from spectui.core.figures import SideRecorder
from spectui.core.findings import ProbeResult, Triage
from spectui.core.runner import PromptResult, same_tokenizer
from spectui.core.tokens import EventLog
from spectui.core.types import SIDES, GenerationParams, Prompt, ServerInfo
from spectui.core.verdict import Verdict, judge
from spectui.machine.probes import GPUSample, HostSample
from spectui.store.bounded import parse_json_text
from spectui.store.locations import data_dir

FORMAT = "spectui-session"
VERSION = 1


def event_to_json(ev: StreamEvent, base_ns: int) -> dict:
    t = ev.t_ns - base_ns
    if isinstance(ev, TokenEvent):
        d: dict = {
            "ev": "token",
            "t": t,
            "i": ev.index,
            "id": ev.token_id,
            "label": ev.label,
            "step": ev.step,
            "rej": ev.rejected,
        }
        try:
            d["d"] = ev.data.decode("utf-8")
        except UnicodeDecodeError:
            d["x"] = ev.data.hex()
        return d
    if isinstance(ev, StepEvent):
        return {"ev": "step", "t": t, "step": ev.step, "drafted": ev.drafted, "accepted": ev.accepted}
    if isinstance(ev, StreamStarted):
        return {"ev": "start", "t": t}
    if isinstance(ev, StreamFinished):
        d = {
            "ev": "finish",
            "t": t,
            "stop_type": ev.stop_type,
            "timings": ev.timings,
            "settings": ev.settings,
            "tokens_evaluated": ev.tokens_evaluated,
            "tokens_predicted": ev.tokens_predicted,
        }
        try:
            d["tail"] = ev.tail.decode("utf-8")
        except UnicodeDecodeError:
            d["tail_x"] = ev.tail.hex()
        if ev.spec is not None:
            d["spec"] = dataclasses.asdict(ev.spec)
        return d
    if isinstance(ev, StreamFailed):
        return {"ev": "failed", "t": t, "message": ev.message}
    raise TypeError(type(ev))


LABELS = ("first", "accepted", "target", "unknown")


def event_from_json(d: dict, base_ns: int = 0) -> StreamEvent:
    """One recorded event; TypeError/ValueError/KeyError name what is wrong with a damaged record."""
    kind = d["ev"]
    t = _typed(d, "t", int)
    if t is None:
        raise KeyError("t")
    t += base_ns
    if kind == "token":
        if "d" in d:
            data = _typed(d, "d", str).encode("utf-8", errors="surrogateescape")
        else:
            data = bytes.fromhex(_typed(d, "x", str, ""))
        label = d["label"]
        if label not in LABELS:
            raise ValueError(f"label {label!r}")
        return TokenEvent(
            _typed(d, "i", int), _typed(d, "id", int), data, t, label, _typed(d, "step", int), _typed(d, "rej", int, 0)
        )
    if kind == "step":
        return StepEvent(_typed(d, "step", int), _typed(d, "drafted", int), _typed(d, "accepted", int), t)
    if kind == "start":
        return StreamStarted(t, "")
    if kind == "finish":
        spec = SpecReport(**d["spec"]) if isinstance(d.get("spec"), dict) else None
        tail = _typed(d, "tail", str, "") or ""
        tail_b = bytes.fromhex(d["tail_x"]) if isinstance(d.get("tail_x"), str) else tail.encode("utf-8")
        return StreamFinished(
            t,
            str(d.get("stop_type", "none")),
            _typed(d, "timings", dict) or {},
            _typed(d, "tokens_evaluated", int),
            tail_b,
            _typed(d, "settings", dict) or {},
            spec,
            _typed(d, "tokens_predicted", int),
        )
    if kind == "failed":
        return StreamFailed(t, str(d.get("message", "")))
    raise ValueError(f"unknown event kind {kind!r}")


def is_session(path: Path) -> bool:
    """Whether the file's first line is a spectui session header."""
    try:
        with open(path, "rb") as fh:
            head = parse_json_text(fh.readline(1 << 20) or b"null", str(path))
    except (OSError, InputError):
        return False
    return isinstance(head, dict) and head.get("format") == FORMAT


@dataclass
class SessionPrompt:
    prompt: Prompt
    params: GenerationParams
    order: str
    # each side's events, tokens and steps packed (core.tokens): ~50 bytes a token, not ~250
    events: dict[str, EventLog] = field(default_factory=lambda: {"baseline": EventLog(), "candidate": EventLog()})
    result: dict | None = None
    probes: list = field(default_factory=list)  # (t_ns, [GPUSample], HostSample | None)
    damaged: bool = False  # a record of this prompt could not be read: no verdict from it
    triage: Triage | None = None
    drafts: ProbeResult | None = None


@dataclass
class Session:
    path: Path
    created: str
    infos: dict[str, ServerInfo]
    prompts: list[SessionPrompt]
    warnings: list[str] = field(default_factory=list)
    terms: dict | None = None  # the last "terms" record: the formula's terms measured after the run
    # every "servers" record in file order (infos is the last): an identity that changed mid-run shows here
    servers_seen: list[dict[str, ServerInfo]] = field(default_factory=list)


def probe_from_json(rec: dict):
    gpus = [
        GPUSample(int(g["index"]), str(g["name"]), g.get("memory_used"), g.get("memory_total"), g.get("utilisation"))
        for g in rec.get("gpus") or []
    ]
    h = rec.get("host")
    host = (
        HostSample(
            int(h["cpu_count"]),
            float(h["cpu_percent"]),
            int(h["memory_used"]),
            int(h["memory_total"]),
            str(h.get("machine", "")),
            str(h.get("system", "")),
        )
        if h
        else None
    )
    return int(rec["t"]), gpus, host


def _typed(d: dict, key: str, kinds, default=None):
    v = d.get(key, default)
    if v is not None and not isinstance(v, kinds):
        raise TypeError(f"{key} is {type(v).__name__}")
    return v


def info_from_json(d: dict) -> ServerInfo:
    if not isinstance(d, dict):
        raise TypeError(f"server is {type(d).__name__}, not an object")
    return ServerInfo(
        url=str(d.get("url", "?")),
        backend=str(d.get("backend", "llama.cpp")),
        build=_typed(d, "build", str),
        model=_typed(d, "model", str),
        n_ctx=_typed(d, "n_ctx", int),
        slots=_typed(d, "slots", int),
        speculative=_typed(d, "speculative", dict) or {},
        kv_cache=_typed(d, "kv_cache", dict) or {},
        cache_prompt=_typed(d, "cache_prompt", bool),
    )


def _prompt(rec: dict) -> SessionPrompt:
    pr = rec["prompt"]
    if not isinstance(pr, dict):
        raise TypeError("prompt is not an object")
    messages = _typed(pr, "messages", list) or []
    if not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages):
        raise TypeError("messages are not {role, content} objects")
    prompt = Prompt(str(pr["id"]), str(pr.get("category", "")), messages, _typed(pr, "raw", str))
    pa = _typed(rec, "params", dict) or {}
    max_tokens, temperature, seed = (
        _typed(pa, "max_tokens", int, 128),
        _typed(pa, "temperature", (int, float), 0.0),
        _typed(pa, "seed", int, 42),
    )
    order = _typed(rec, "order", str, "sequential")
    return SessionPrompt(
        prompt,
        GenerationParams(max_tokens, float(temperature), seed, _typed(pa, "cache_prompt", bool)),
        order if order in ("sequential", "concurrent", "one-at-a-time") else "sequential",
    )


def _header(p: Path, first: bytes) -> dict:
    """The session's header (its first line), or one line saying why the file is not a session this reads."""
    if not first.strip():
        raise InputError(f"{p} is empty, not a spectui session")
    try:
        head = parse_json_text(first, f"session {p}")
    except InputError:
        raise InputError(f"{p} is not a spectui session (its first line is not a spectui header)") from None
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise InputError(f"{p} is not a spectui session (its first line is not a spectui header)")
    version = head.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InputError(
            f"{p}: the session header's version is {version!r}, not a whole number",
            hint="the file is damaged or not written by spectui",
        )
    if version > VERSION:
        raise InputError(
            f"{p} is session format version {head.get('version')}; this spectui reads up to {VERSION}",
            hint="upgrade spectui to replay it",
        )
    return head


def _add_event(rec: dict, prompts: list[SessionPrompt], next_token: dict[tuple[int, str], int]) -> None:
    """Append one event record to the last prompt's side; raises _Interleaved where its stream does not follow on."""
    if not prompts:
        raise ValueError("an event before any prompt")
    side = rec["side"]
    if side not in SIDES:
        raise ValueError(f"side {side!r}")
    # two writers at once (or an old spectui without the lock): a side that starts twice in
    # one prompt, or whose tokens do not follow on, holds two runs' lines: no verdict from it
    key = (len(prompts), side)
    token = _token_fields(rec)
    if token is not None:  # nearly every record: packed from its fields, no event object made
        if token[0] != next_token.get(key, 0):
            raise _Interleaved()
        next_token[key] = token[0] + 1
        prompts[-1].events[side].append_token(*token)
        return
    ev = event_from_json(rec)
    if isinstance(ev, StreamStarted) and key in next_token:
        raise _Interleaved()
    if isinstance(ev, TokenEvent):
        if ev.index != next_token.get(key, 0):
            raise _Interleaved()
        next_token[key] = ev.index + 1
    elif isinstance(ev, StreamStarted):
        next_token[key] = 0
    prompts[-1].events[side].append(ev)


def load_session(path: str | Path) -> Session:
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(f"session file {p} does not exist")
    lines = _lines(p)  # read as they are needed: a 1,000,000-event session is 135 MB, never held whole
    first = next(lines, b"")
    warnings: list[str] = []
    truncated = _unterminated(p)  # no newline after the last line: it was cut mid-write
    head = _header(p, first)
    if truncated:
        warnings.append(f"{p}: the last line is incomplete (the run was cut off); replaying up to the last whole event")
    read = _Records()
    bad = 0
    interleaved = False
    for lineno, line in enumerate(lines, 2):
        if line[-1:] != b"\n":
            break  # the last line, cut mid-write (warned about above)
        if not line.strip():
            continue
        try:
            rec = orjson.loads(line)
            if not isinstance(rec, dict):
                raise TypeError("not an object")
            read.take(rec)
        except _Interleaved:
            interleaved = True
            read.prompts[-1].damaged = True
        except (orjson.JSONDecodeError, KeyError, ValueError, IndexError, TypeError, AttributeError) as exc:
            bad += 1
            if bad <= 3:
                warnings.append(f"{p}:{lineno}: unreadable record ({type(exc).__name__}: {str(exc)[:60]}); skipped it")
            if read.prompts:
                read.prompts[-1].damaged = True
    warnings += _damage_said(p, bad, interleaved, read.runs)
    return Session(p, head.get("created", "?"), read.infos, read.prompts, warnings, read.terms, read.servers_seen)


class _Records:
    """What a session's records after its header build up, taken one record at a time."""

    def __init__(self) -> None:
        self.infos = {"baseline": ServerInfo(url="?"), "candidate": ServerInfo(url="?")}
        self.prompts: list[SessionPrompt] = []
        self.terms: dict | None = None
        self.servers_seen: list[dict[str, ServerInfo]] = []
        self.by_n: dict = {}  # the writer's prompt numbers → prompts (a later triage record names one)
        self.runs = 0  # runs appended one after another (each opens with a "run" record)
        self.next_token: dict[tuple[int, str], int] = {}  # (prompt, side) → the token index its stream is at

    def take(self, rec: dict) -> None:
        kind = rec["type"]
        prompts, by_n = self.prompts, self.by_n
        if kind == "run":
            self.runs += 1
            self.by_n = {}  # each run numbers its prompts from 0
        elif kind == "servers":
            self.infos = {k: info_from_json(rec[k]) for k in SIDES}
            self.servers_seen.append(self.infos)
        elif kind == "prompt":
            prompts.append(_prompt(rec))
        elif kind == "event":
            _add_event(rec, prompts, self.next_token)
        elif kind == "result" and prompts:
            prompts[-1].result = rec
            by_n[rec.get("n")] = prompts[-1]
        elif kind == "triage" and rec.get("n") in by_n:
            by_n[rec["n"]].triage = Triage.from_json(rec.get("triage"))
        elif kind == "drafts" and rec.get("n") in by_n:
            by_n[rec["n"]].drafts = ProbeResult.from_json(rec.get("drafts"))
        elif kind == "probe" and prompts:
            prompts[-1].probes.append(probe_from_json(rec))
        elif kind == "terms":
            if not isinstance(rec["terms"], dict):
                raise TypeError("terms is not an object")
            self.terms = rec["terms"]


def _damage_said(p: Path, bad: int, interleaved: bool, runs: int) -> list[str]:
    """The warnings a whole session's reading ends with: unreadable records, two runs interleaved, runs appended."""
    warnings = []
    if bad > 3:
        warnings.append(f"{p}: {bad} unreadable records in all; the prompts they belong to are reported as incomplete")
    if interleaved:
        warnings.append(
            f"{p}: holds the lines of two runs written at the same time, interleaved; the prompts they mix are "
            "reported as incomplete (no verdict)"
        )
    if runs > 1:
        warnings.append(f"{p}: holds {runs} runs appended one after another; each prompt is reported as recorded")
    return warnings


_TERMS_LINE = b'{"type":"terms"'


def read_terms(path: str | Path) -> dict | None:
    """The last "terms" record of a session file, read without building its prompts (for reports)."""
    found = None
    with open(Path(path).expanduser(), "rb") as fh:
        for line in fh:
            if line.startswith(_TERMS_LINE) and line.endswith(b"\n"):
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(rec.get("terms"), dict):
                    found = rec["terms"]
    return found


def append_terms(path: str | Path, terms: dict) -> bool:
    """Append a "terms" record to a session: one line in one write, as every record is (the file is only
    ever appended to). Not to a session whose last line was cut mid-write (False): ending that line would
    turn a skipped half record into a damaged one."""
    p = Path(path).expanduser()
    if _unterminated(p):
        return False
    line = orjson.dumps({"type": "terms", "terms": terms}) + b"\n"
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def _lines(p: Path):
    with open(p, "rb") as fh:
        yield from fh


def _unterminated(p: Path) -> bool:
    with open(p, "rb") as fh:
        if fh.seek(0, 2) == 0:
            return False
        fh.seek(-1, 2)
        return fh.read(1) != b"\n"


def _token_fields(d: dict) -> tuple | None:
    """A token record's fields where each has exactly the type the writer gives it (else None, and
    event_from_json reads it, naming what is wrong): the loader's fast path."""
    if d.get("ev") != "token":
        return None
    i, tid, t, step, rej, label, text = (
        d.get("i"),
        d.get("id"),
        d.get("t"),
        d.get("step"),
        d.get("rej", 0),
        d.get("label"),
        d.get("d"),
    )
    if not (
        type(i) is int
        and type(t) is int
        and type(rej) is int
        and (tid is None or type(tid) is int)
        and (step is None or type(step) is int)
        and label in LABELS
        and type(text) is str
    ):
        return None
    return i, tid, text.encode("utf-8", errors="surrogateescape"), t, label, step, rej


class _Interleaved(Exception):
    """A record that cannot follow the one before it in the same stream: two runs' lines mixed."""


# a saved figure read back only with the type the live run gave it (an edited session may hold anything)
_SAVED_FIGURES: dict[str, type | tuple[type, ...]] = {
    "metrics_drafted": (int, float),
    "metrics_accepted": (int, float),
    "metrics_steps": (int, float),
    "metrics_check": str,
    "accepted_per_position": list,
}


def recorders_for(sp: SessionPrompt) -> tuple[SideRecorder, SideRecorder]:
    """Rebuild both sides' figures from the recorded events, exactly as the live run built them."""
    recs = {}
    for side in SIDES:
        rec = SideRecorder(side)
        rec.feed_all(sp.events[side])  # packed tokens copied whole, as feeding each in turn would
        saved = (sp.result or {}).get(side) or {}
        if isinstance(saved, dict):
            for key, kinds in _SAVED_FIGURES.items():
                v = saved.get(key)
                if key == "accepted_per_position" and isinstance(v, list):
                    v = v if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v) else None
                if v is not None and isinstance(v, kinds) and not isinstance(v, bool):
                    setattr(rec.figures, key, v)
        recs[side] = rec
    return recs["baseline"], recs["candidate"]


def recorded_verdict(sp: SessionPrompt) -> Verdict | None:
    """The verdict the run recorded for this prompt (whole, or under an older session's keys); None
    where the record holds none (the run stopped before the prompt's result) or it is unreadable."""
    saved = sp.result if isinstance(sp.result, dict) else None
    if saved is None:
        return None
    try:
        if saved.get("verdict") is not None:
            return Verdict.from_json(saved["verdict"])
        return Verdict.legacy(saved)
    except (TypeError, ValueError):
        return None


def verdict_check(session: Session, sp: SessionPrompt, b: SideRecorder, c: SideRecorder) -> tuple[Verdict, str | None]:
    """The verdict replay shows — the recorded one — and a warning where judging the recorded events
    again (with the same function the run used) disagrees, or where no verdict was recorded."""
    recorded = recorded_verdict(sp)
    saved = sp.result if isinstance(sp.result, dict) else {}
    with_ids = saved.get("compared") == "text+ids" if "compared" in saved else same_tokenizer(*session.infos.values())
    again = judge(b, c, with_ids, sp.damaged)
    if sp.damaged:  # unreadable records: nothing in this prompt can be trusted, its verdict included
        return again, None
    if recorded is None:
        if saved.get("verdict") is not None:  # there, but not a verdict (a hand edit): say so, not "none"
            return (
                again,
                f"{sp.prompt.id}: the recorded verdict is unreadable ({type(saved['verdict']).__name__}: "
                f"{str(saved['verdict'])[:40]!r}); judged from the recorded events: {again.line()}",
            )
        if again.status in ("identical", "differs"):
            return (
                again,
                f"{sp.prompt.id}: no verdict was recorded (the run stopped before it); judged from the recorded events: {again.line()}",
            )
        return again, None
    if not recorded.agrees(again):
        return recorded, (
            f"{sp.prompt.id}: the run recorded {recorded.line()}; judged again from the recorded events: "
            f"{again.line()}. Showing the run's verdict"
        )
    return recorded, None


def default_session_dir() -> Path:
    return data_dir() / "sessions"


def autosave_path() -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return default_session_dir() / f"session-{stamp}-{os.getpid()}.jsonl"


def results_for(session: Session) -> list[PromptResult]:
    """Every recorded prompt as a PromptResult rebuilt from its events (incomplete ones stay incomplete)."""
    out: list[PromptResult] = []
    for sp in session.prompts:
        b, c = recorders_for(sp)
        verdict, warning = verdict_check(session, sp, b, c)
        if warning is not None and warning not in session.warnings:
            session.warnings.append(warning)
        r = PromptResult(sp.prompt, b, c, verdict, damaged=sp.damaged, triage=sp.triage, drafts=sp.drafts)
        r.params, r.order = sp.params, sp.order  # each prompt's own (a session may mix them)
        if warning is not None:  # the report a person keeps says it beside the prompt, not only stderr
            r.rejudged = warning.removeprefix(f"{sp.prompt.id}: ")
        saved = sp.result if isinstance(sp.result, dict) else {}
        run, runs = saved.get("run"), saved.get("runs")
        if isinstance(run, int) and isinstance(runs, int) and 1 <= run <= runs:
            r.run, r.runs = run, runs
            if run > 1 and out and out[-1].prompt.id == sp.prompt.id:
                r.prompt = out[-1].prompt  # one prompt object per group of repeats
        out.append(r)
    return out
