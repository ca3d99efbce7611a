"""Progress for long work in the CLI: a bar with the tool's own percentage and an ETA on a terminal
(rich), a line at each tenth (or each new phase) where stderr is not one, so CI logs stay short."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any


class Advance:
    """Callable as machine.assets.Advance: (what, fraction or None, last line)."""

    def __init__(self, label: str = "spectui setup") -> None:
        self.label = label
        self.tty = sys.stderr.isatty()
        self._bar: Any = None  # a rich Progress once drawn (rich is imported only then)
        self._task = None
        self._what: str | None = None
        self._tenth = -1
        self._last_line_at = 0.0

    def __call__(self, what: str, done: float | None, line: str) -> None:
        if self.tty:
            self._draw(what, done, line)
        else:
            self._log(what, done)

    def _draw(self, what: str, done: float | None, line: str) -> None:
        from rich.progress import (  # lazy: rich (~31 ms cold)
            BarColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        if self._bar is None:
            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.percentage:>3.0f}%"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                TextColumn("[dim]{task.fields[line]}"),
                transient=True,
            )
            self._bar.start()
        if what != self._what:
            if self._task is not None:
                self._bar.remove_task(self._task)
            self._task = self._bar.add_task(what, total=100 if done is not None else None, line="")
            self._what = what
        short = line if len(line) <= 50 else line[:47] + "…"
        if done is not None:
            self._bar.update(self._task, completed=done * 100, line=short)
        else:
            self._bar.update(self._task, line=short)

    def _log(self, what: str, done: float | None) -> None:
        now = time.monotonic()
        if what != self._what:
            self._what, self._tenth = what, -1
            print(f"{self.label}: {what} …", file=sys.stderr, flush=True)
        if done is not None:
            tenth = int(done * 10)
            if tenth > self._tenth:
                self._tenth = tenth
                print(f"{self.label}: {what} {tenth * 10}%", file=sys.stderr, flush=True)
        elif now - self._last_line_at > 15:  # unknown length: a sign of life every 15 s
            self._last_line_at = now
            print(f"{self.label}: {what} (still working)", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def sayer(self, quiet: bool = False):
        """A phase's one-line reporter beside the bar: the bar closed first (its line stays), then
        '<label>: <line>' on stderr; nothing where `quiet` (--json)."""

        def say(msg: str) -> None:
            self.close()
            if not quiet:
                print(f"{self.label}: {msg}", file=sys.stderr)

        return say


def run_events(quiet: bool, kinds: tuple[type, ...] | None = None) -> Callable[[Any], None]:
    """A run's events (run.events) as progress lines on stderr, each its one line (run.events.line): the
    events of `kinds` (None: all); with --json (`quiet`) only those said even then. compare and prove both
    print through it."""
    from spectui.run import events  # lazy: asyncio (~81 ms cold), not for --help

    def emit(ev) -> None:
        if kinds is not None and not isinstance(ev, kinds):
            return
        if quiet and not events.said_when_quiet(ev):
            return
        if isinstance(ev, events.Progressed) and not ev.milestone():
            return
        if (text := events.line(ev)) is not None:
            print(f"spectui: {text}", file=sys.stderr, flush=True)

    return emit
