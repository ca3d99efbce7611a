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

`t` is nanoseconds since the prompt began. API keys are never written (spectui keeps none in its
records: ServerInfo holds URL, build, model and configuration only).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import orjson
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from spectui import __version__
from spectui.engine.compare import Divergence, compare_tokens
from spectui.engine.errors import InputError
from spectui.engine.events import SpecReport, StepEvent, StreamEvent, StreamFailed, StreamFinished, StreamStarted, TokenEvent
from spectui.engine.figures import SideRecorder
from spectui.engine.llamacpp import GenerationParams, ServerInfo
from spectui.engine.prompts import Prompt

FORMAT = "spectui-session"
VERSION = 1


def event_to_json(ev: StreamEvent, base_ns: int) -> dict:
    t = ev.t_ns - base_ns
    if isinstance(ev, TokenEvent):
        d: dict = {"ev": "token", "t": t, "i": ev.index, "id": ev.token_id, "label": ev.label,
                   "step": ev.step, "rej": ev.rejected}
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
        d = {"ev": "finish", "t": t, "stop_type": ev.stop_type, "timings": ev.timings,
             "tail": ev.tail.decode("utf-8", errors="backslashreplace"), "settings": ev.settings}
        if ev.spec is not None:
            d["spec"] = dataclasses.asdict(ev.spec)
        return d
    if isinstance(ev, StreamFailed):
        return {"ev": "failed", "t": t, "message": ev.message}
    raise TypeError(type(ev))


def event_from_json(d: dict, base_ns: int = 0) -> StreamEvent:
    kind = d["ev"]
    t = int(d["t"]) + base_ns
    if kind == "token":
        data = d["d"].encode("utf-8") if "d" in d else bytes.fromhex(d.get("x", ""))
        return TokenEvent(int(d["i"]), d.get("id"), data, t, d["label"], d.get("step"), int(d.get("rej", 0)))
    if kind == "step":
        return StepEvent(int(d["step"]), int(d["drafted"]), int(d["accepted"]), t)
    if kind == "start":
        return StreamStarted(t, "")
    if kind == "finish":
        spec = SpecReport(**d["spec"]) if isinstance(d.get("spec"), dict) else None
        return StreamFinished(t, d.get("stop_type", "none"), d.get("timings") or {}, None,
                              (d.get("tail") or "").encode("utf-8"), d.get("settings") or {}, spec)
    if kind == "failed":
        return StreamFailed(t, d.get("message", ""))
    raise ValueError(f"unknown event kind {kind!r}")


class SessionWriter:
    """Records a session line by line; with a path, appends each line to the file and flushes it, so
    a crash loses at most the last line. Without one it keeps the lines for a later `save_as`."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else None
        self.lines: list[str] = []
        self._fh = None
        if self.path is not None:
            if self.path.is_dir():
                raise InputError(f"{self.path} is a folder", hint="give --save a file name")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = open(self.path, "a", encoding="utf-8")
            except OSError as exc:
                raise InputError(f"cannot write session {self.path}: {exc.strerror}") from None
        self.n = -1
        self.base_ns = 0
        if self._fh is None or self._fh.tell() == 0:
            self._write({"format": FORMAT, "version": VERSION,
                         "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                         "spectui": __version__})

    def _write(self, obj: dict) -> None:
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
        self.lines.append(line)
        if self._fh is not None:
            self._fh.write(line)
            self._fh.flush()

    def save_as(self, path: str | Path) -> Path:
        """Write everything recorded so far to a new file, atomically."""
        from spectui.engine.notebook import atomic_write

        dest = Path(path).expanduser()
        atomic_write(dest, "".join(self.lines))
        return dest

    def probe(self, gpus: list, host) -> None:
        self._write({"type": "probe", "n": self.n, "t": time.perf_counter_ns() - self.base_ns,
                     "gpus": [g.to_json() for g in gpus], "host": host.to_json() if host else None})

    def servers(self, infos: dict[str, ServerInfo]) -> None:
        self._write({"type": "servers", **{k: v.to_json() for k, v in infos.items()}})

    def prompt(self, prompt: Prompt, params: GenerationParams, order: str) -> None:
        self.n += 1
        self.base_ns = time.perf_counter_ns()
        self._write({"type": "prompt", "n": self.n, "prompt": prompt.to_json(), "order": order,
                     "params": {"max_tokens": params.max_tokens, "temperature": params.temperature,
                                "seed": params.seed, "cache_prompt": params.cache_prompt}})

    def event(self, side: str, ev: StreamEvent) -> None:
        if isinstance(ev, StreamFailed) and ev.t_ns == 0:
            ev = StreamFailed(self.base_ns, ev.message)
        self._write({"type": "event", "n": self.n, "side": side, **event_to_json(ev, self.base_ns)})

    def result(self, baseline: SideRecorder, candidate: SideRecorder, divergence: Divergence | None, speedup) -> None:
        self._write({"type": "result", "n": self.n, "baseline": baseline.figures.to_json(),
                     "candidate": candidate.figures.to_json(),
                     "identical": None if (baseline.failed or candidate.failed) else divergence is None,
                     "first_divergence": divergence.to_json() if divergence else None, "speedup": speedup})

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


@dataclass
class SessionPrompt:
    prompt: Prompt
    params: GenerationParams
    order: str
    events: dict[str, list[StreamEvent]] = field(default_factory=lambda: {"baseline": [], "candidate": []})
    result: dict | None = None
    probes: list = field(default_factory=list)  # (t_ns, [GPUSample], HostSample | None)


@dataclass
class Session:
    path: Path
    created: str
    infos: dict[str, ServerInfo]
    prompts: list[SessionPrompt]
    warnings: list[str] = field(default_factory=list)


def probe_from_json(rec: dict):
    from spectui.engine.probes import GPUSample, HostSample

    gpus = [GPUSample(int(g["index"]), str(g["name"]), g.get("memory_used"), g.get("memory_total"), g.get("utilisation"))
            for g in rec.get("gpus") or []]
    h = rec.get("host")
    host = HostSample(int(h["cpu_count"]), float(h["cpu_percent"]), int(h["memory_used"]), int(h["memory_total"]),
                      str(h.get("machine", "")), str(h.get("system", ""))) if h else None
    return int(rec["t"]), gpus, host


def _info(d: dict) -> ServerInfo:
    return ServerInfo(url=d.get("url", "?"), backend=d.get("backend", "llama.cpp"), build=d.get("build"),
                      model=d.get("model"), n_ctx=d.get("n_ctx"), slots=d.get("slots"),
                      speculative=d.get("speculative") or {}, kv_cache=d.get("kv_cache") or {},
                      cache_prompt=d.get("cache_prompt"))


def load_session(path: str | Path) -> Session:
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(f"session file {p} does not exist")
    raw = p.read_bytes()
    lines = raw.split(b"\n")
    warnings: list[str] = []
    truncated = bool(lines and lines[-1])  # no newline after the last line: it was cut mid-write
    if not lines or not lines[0].strip():
        raise InputError(f"{p} is empty, not a spectui session")
    try:
        head = json.loads(lines[0])
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError(f"{p} is not a spectui session (its first line is not a spectui header)") from None
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise InputError(f"{p} is not a spectui session (its first line is not a spectui header)")
    if int(head.get("version", 0)) > VERSION:
        raise InputError(f"{p} is session format version {head.get('version')}; this spectui reads up to {VERSION}",
                         hint="upgrade spectui to replay it")
    infos = {"baseline": ServerInfo(url="?"), "candidate": ServerInfo(url="?")}
    prompts: list[SessionPrompt] = []
    body = lines[1:-1] if truncated else lines[1:]
    if truncated:
        warnings.append(f"{p}: the last line is incomplete (the run was cut off); replaying up to the last whole event")
    for lineno, line in enumerate(body, 2):
        if not line.strip():
            continue
        try:
            rec = orjson.loads(line)
            kind = rec["type"]
            if kind == "servers":
                infos = {k: _info(rec[k]) for k in ("baseline", "candidate")}
            elif kind == "prompt":
                pr = rec["prompt"]
                prompt = Prompt(pr["id"], pr.get("category", ""), pr.get("messages") or [], pr.get("raw"))
                pa = rec.get("params") or {}
                prompts.append(SessionPrompt(prompt, GenerationParams(pa.get("max_tokens", 128), pa.get("temperature", 0.0),
                                                                      pa.get("seed", 42), pa.get("cache_prompt")),
                                             rec.get("order", "sequential")))
            elif kind == "event":
                prompts[-1].events[rec["side"]].append(event_from_json(rec))
            elif kind == "result":
                prompts[-1].result = rec
            elif kind == "probe" and prompts:
                prompts[-1].probes.append(probe_from_json(rec))
        except (orjson.JSONDecodeError, KeyError, ValueError, IndexError, TypeError) as exc:
            warnings.append(f"{p}:{lineno}: unreadable record ({type(exc).__name__}); stopped there")
            break
    return Session(p, head.get("created", "?"), infos, prompts, warnings)


def recorders_for(sp: SessionPrompt) -> tuple[SideRecorder, SideRecorder, Divergence | None]:
    """Rebuild both sides' figures from the recorded events, exactly as the live run built them."""
    recs = {}
    for side in ("baseline", "candidate"):
        rec = SideRecorder(side)
        for ev in sp.events[side]:
            rec.feed(ev)
        saved = (sp.result or {}).get(side) or {}
        for key in ("metrics_drafted", "metrics_accepted", "metrics_steps", "metrics_check", "accepted_per_position"):
            if key in saved:
                setattr(rec.figures, key, saved[key])
        recs[side] = rec
    b, c = recs["baseline"], recs["candidate"]
    div = None if (b.failed or c.failed) else compare_tokens(b.token_bytes(), c.token_bytes())
    return b, c, div


def default_session_dir() -> Path:
    from spectui.engine.config import data_dir

    return data_dir() / "sessions"


def autosave_path() -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return default_session_dir() / f"session-{stamp}-{os.getpid()}.jsonl"


class ReplayControl:
    """The replay's clock, shared by both sides: speed, pause, single steps and seeking.

    Virtual time (ns since the prompt began, in recorded time) advances with the wall clock × speed
    while playing; a step releases the next token; a seek moves virtual time forward (seeking back
    replays the prompt from its start up to the target, as fast as possible).
    """

    def __init__(self, speed: float | None = 1.0) -> None:
        self.speed = speed  # None: as fast as possible
        self.paused = False
        self.steps = 0  # tokens to release while paused
        self.prompt = -1  # the prompt the clock is running for
        self._virtual = 0
        self._wall = time.perf_counter_ns()

    def restart(self, at: int = 0) -> None:
        self._virtual, self._wall = at, time.perf_counter_ns()

    def now(self) -> float:
        if self.speed is None:
            return float("inf")
        if self.paused:
            return self._virtual
        wall = time.perf_counter_ns()
        self._virtual += int((wall - self._wall) * self.speed)
        self._wall = wall
        return self._virtual

    def set_speed(self, speed: float | None) -> None:
        self.now()
        self.speed = speed

    def toggle_pause(self) -> None:
        self.now()
        self.paused = not self.paused
        self._wall = time.perf_counter_ns()

    def step(self) -> None:
        self.paused = True
        self.steps += 1

    def seek(self, delta_ns: int) -> None:
        self.now()
        self._virtual = max(0, self._virtual + delta_ns)

    @property
    def position_ns(self) -> int:
        return int(self._virtual)


class SessionBackend:
    """Plays one side of a saved session as a backend: the recorded events at the recorded pace × speed."""

    kind = "session"

    def __init__(self, side: str, session: Session, speed: float | None, control: ReplayControl | None = None) -> None:
        self.side = side
        self.session = session
        self.control = control or ReplayControl(speed)
        self.info = session.infos[side]
        self.url = self.info.url
        self._cursor = 0

    async def wait_ready(self, timeout: float = 0, on_wait=None) -> None:
        return None

    async def identify(self) -> ServerInfo:
        return self.info

    async def render_chat(self, messages: list[dict]) -> str:
        return messages[-1]["content"] if messages else ""

    async def metrics(self) -> dict[str, float] | None:
        return None

    async def kv_usage(self):
        return None

    async def stream(self, prompt: str, params: GenerationParams):
        import asyncio

        if self._cursor >= len(self.session.prompts):
            yield StreamFailed(time.perf_counter_ns(), "no more recorded prompts in this session")
            return
        sp = self.session.prompts[self._cursor]
        ctl = self.control
        if ctl.prompt == -2:  # a seek back: the clock already holds the target position
            ctl.prompt = self._cursor
        elif ctl.prompt != self._cursor:  # the first side to start a prompt starts its clock
            ctl.prompt = self._cursor
            ctl.restart()
        self._cursor += 1
        events = sp.events[self.side]
        for i, ev in enumerate(events):
            # wait for the replay clock; a single step releases one token while paused
            while ctl.now() < ev.t_ns:
                if ctl.paused and ctl.steps > 0 and isinstance(ev, TokenEvent):
                    ctl.steps -= 1
                    ctl._virtual = max(ctl._virtual, ev.t_ns)
                    break
                await asyncio.sleep(0.005)
            if ctl.speed is None and i % 64 == 0:
                await asyncio.sleep(0)
            # keep the recorded offsets so figures (TTFT, tokens/s) are the recorded ones at any speed
            yield ev

    async def play_probes(self, on_sample) -> None:
        """The recorded live-panel samples of the prompt now playing, on the replay clock."""
        import asyncio

        if self._cursor == 0:
            return
        for t, gpus, host in self.session.prompts[self._cursor - 1].probes:
            while self.control.now() < t:
                await asyncio.sleep(0.02)
            on_sample(gpus, host)

    def rewind(self) -> None:
        """Back to the start of the prompt last played (for seeking backwards)."""
        self._cursor = max(0, self._cursor - 1)
        self.control.prompt = -1

    def saved_figures(self) -> dict:
        return ((self.session.prompts[self._cursor - 1].result or {}).get(self.side) or {}) if self._cursor else {}


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

    def line(self) -> str:
        if self.problem:
            return f"{self.path.name}: {self.problem}"
        same = {True: "identical", False: "DIFFERS", None: "—"}[self.identical]
        sp = f"{self.speedup:.2f}× at {self.acceptance:.0%} accepted" if self.speedup and self.acceptance is not None else (
            f"{self.speedup:.2f}× (no drafts)" if self.speedup else "—")
        return (f"{self.created[:19]:<20} {self.path.name:<40} {self.prompt:<16} {self.n_prompts:>2} prompts  "
                f"{same:<9} {sp}  [{self.candidate}]")


def summarise(path: Path) -> SessionSummary:
    try:
        s = load_session(path)
    except InputError as exc:
        return SessionSummary(path, "", "", "", "", 0, None, None, None, problem=str(exc))
    results = [sp.result for sp in s.prompts if sp.result]
    identical = None
    if results:
        flags = [r.get("identical") for r in results]
        identical = False if False in flags else (True if all(f is True for f in flags) else None)
    last = results[-1] if results else {}
    cand = last.get("candidate") or {}
    return SessionSummary(path, s.created, s.infos["baseline"].describe_speedup(), s.infos["candidate"].describe_speedup(),
                          s.prompts[0].prompt.id if s.prompts else "—", len(s.prompts), identical,
                          last.get("speedup"), cand.get("acceptance_rate"))


def list_sessions(folder: Path) -> list[SessionSummary]:
    if not folder.is_dir():
        return []
    return [summarise(p) for p in sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)]
