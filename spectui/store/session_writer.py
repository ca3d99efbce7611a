"""Recording a session: SessionWriter appends each record as a line (format in store.session), one
writer at a time per file (an exclusive lock), and a run that records nothing leaves no file."""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import time
from pathlib import Path

import orjson

from spectui import __version__
from spectui.core.errors import InputError
from spectui.core.events import StreamEvent, StreamFailed
from spectui.core.findings import ProbeResult, Triage
from spectui.core.runner import PromptResult, RunObserver
from spectui.core.types import GenerationParams, Prompt, ServerInfo
from spectui.store.locations import atomic_write
from spectui.store.session import FORMAT, VERSION, event_to_json, is_session


class SessionWriter(RunObserver):
    """Records a session line by line; with a path, appends each line to the file and flushes it, so
    a crash loses at most the last line. Without one it keeps the lines for a later `save_as`."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else None
        self.lines: list[str] = []
        self._fh = None
        self._created = False  # this writer made the file: one left with no record is removed at close
        self._started = False  # the header (for a new file) and this run's record are written lazily
        self.error: str | None = None  # why the file stopped taking lines (a full disk), if it did
        if self.path is not None:
            if self.path.is_dir():
                raise InputError(f"{self.path} is a folder", hint="give --save a file name")
            if self.path.exists() and not self.path.is_file():
                raise InputError(
                    f"{self.path} is not a regular file (a device or a pipe)", hint="give --save a file name"
                )
            if self.path.exists() and self.path.stat().st_size > 0 and not is_session(self.path):
                raise InputError(
                    f"{self.path} exists and is not a spectui session; not appending to it",
                    hint="give --save a new file name (or an existing session to add to)",
                )
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._created = not self.path.exists()
                self._fh = open(self.path, "a", encoding="utf-8")
            except OSError as exc:
                raise InputError(f"cannot write session {self.path}: {exc.strerror}") from None
            try:  # one writer at a time: two appending at once interleave their lines
                fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                self._fh.close()
                self._fh = None
                raise InputError(
                    f"{self.path} is being written by another spectui run right now",
                    hint="give --save another file name, or wait for that run to end",
                ) from None
        self.n = -1
        self.base_ns = 0

    def _start(self) -> None:
        """The header of a new file, then this run's record: written with the first record, so a run
        that never got going (a failed connect) leaves no file behind."""
        self._started = True
        if self._fh is None or self._fh.tell() == 0:
            self._write(
                {
                    "format": FORMAT,
                    "version": VERSION,
                    "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                    "spectui": __version__,
                }
            )
        # each run appended to a file says where it starts: the loader keeps the runs apart
        self._write(
            {"type": "run", "pid": os.getpid(), "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
        )

    def _write(self, obj: dict) -> None:
        if not self._started:
            self._start()
        # orjson: a line per streamed event, written as it arrives; with the standard library's encoder
        # it took 1.42 s of a 10.2 s profile of bench/tui_keepup.py at 2 × 10,000 tokens/s, now 0.51 s
        try:
            line = orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS).decode() + "\n"
        except TypeError:  # what orjson declines (an integer past 64 bits, a lone surrogate from a prompt
            # file's "\ud800" escape): the standard encoder, escaped to ASCII so the line still writes
            line = json.dumps(obj, separators=(",", ":")) + "\n"
        self.lines.append(line)
        if self._fh is not None:
            try:
                self._fh.write(line)
                self._fh.flush()
            except OSError as exc:  # a full disk mid-run: the run goes on, the file keeps what it had
                self.error = f"{exc.strerror or exc} after {len(self.lines) - 1} lines"
                self._close_file()

    def _close_file(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            try:
                fh.close()  # closing drops the lock
            except OSError as exc:
                self.error = self.error or f"{exc.strerror or exc} (flushing the last lines)"

    def save_as(self, path: str | Path) -> Path:
        """Write everything recorded so far to a new file, atomically."""
        dest = Path(path).expanduser()
        atomic_write(dest, "".join(self.lines))
        return dest

    def probe(self, gpus: list, host) -> None:
        self._write(
            {
                "type": "probe",
                "n": self.n,
                "t": time.perf_counter_ns() - self.base_ns,
                "gpus": [g.to_json() for g in gpus],
                "host": host.to_json() if host else None,
            }
        )

    def servers(self, infos: dict[str, ServerInfo]) -> None:
        self._write({"type": "servers", **{k: v.to_json() for k, v in infos.items()}})

    def prompt(self, prompt: Prompt, params: GenerationParams, order: str) -> None:
        self.n += 1
        self.base_ns = time.perf_counter_ns()
        self._write(
            {
                "type": "prompt",
                "n": self.n,
                "prompt": prompt.to_json(),
                "order": order,
                "params": {
                    "max_tokens": params.max_tokens,
                    "temperature": params.temperature,
                    "seed": params.seed,
                    "cache_prompt": params.cache_prompt,
                },
            }
        )

    def event(self, side: str, ev: StreamEvent, base_ns: int | None = None) -> None:
        """One stream event, its time from the prompt's start (or from `base_ns`: a side that ran on its
        own, one server at a time, is timed from its own start)."""
        base = self.base_ns if base_ns is None else base_ns
        if isinstance(ev, StreamFailed) and ev.t_ns == 0:
            ev = StreamFailed(base, ev.message)
        self._write({"type": "event", "n": self.n, "side": side, **event_to_json(ev, base)})

    def result(self, result: PromptResult) -> None:
        """The prompt's figures and THE verdict its run made (replay shows this one, never its own)."""
        verdict = result.verdict
        self._write(
            {
                "type": "result",
                "n": self.n,
                "baseline": result.baseline.figures.to_json(),
                "candidate": result.candidate.figures.to_json(),
                "verdict": verdict.to_json() if verdict is not None else None,
                # the same verdict's answer under the keys older readers know
                "identical": result.identical,
                "first_divergence": result.divergence.to_json() if result.divergence else None,
                "compared": result.compared,
                "speedup": result.speedup,
                "run": result.run,
                "runs": result.runs,
            }
        )

    def triage(self, n: int, finding: Triage) -> None:
        """Triage's finding for prompt n of this writer (written after the prompt's result)."""
        self._write({"type": "triage", "n": n, "triage": finding.to_json()})

    def drafts(self, n: int, found: ProbeResult) -> None:
        """The draft probe's reconstruction for prompt n of this writer (written after the prompt's result)."""
        self._write({"type": "drafts", "n": n, "drafts": found.to_json()})

    def close(self) -> None:
        self._close_file()
        if self._created and not self._started and self.path is not None:
            self.path.unlink(missing_ok=True)  # nothing was recorded: no header-only session left behind

    # -- as the run loop's observer (core.runner.RunObserver) ------------------------------------------
    def prompt_started(self, prompt: Prompt, params: GenerationParams, order: str) -> None:
        self.prompt(prompt, params, order)

    def prompt_finished(self, result: PromptResult) -> None:
        self.result(result)
