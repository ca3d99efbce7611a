"""One server at a time, one type: why the pair runs so and how a driver opens one side alone for a block.

run.pair plans it (asked for, or the memory plan's reason), run.phased runs it, prove, sweep and the TUI open
their sides through it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace

from spectui.core.runner import Source

# a side that is up: the backend to stream from; leaving the context stops the server
OpenSide = Callable[[str], AbstractAsyncContextManager[Source]]


@dataclass(frozen=True)
class OneAtATime:
    """One server at a time, the one way every driver says it: why (asked for, or the memory plan's reason) and,
    once a driver can start them, how a side is opened alone for a block (`open_side`) and where the phases
    are said (`say`). run.pair plans it; PhasedRun, prove, sweep and the TUI run it."""

    open_side: OpenSide | None
    why: str  # "asked for (--one-at-a-time)", or the memory plan's reason
    say: Callable[[str], None] | None = None

    def __str__(self) -> str:
        return self.why

    def opening(self, open_side: OpenSide, say: Callable[[str], None] | None = None) -> OneAtATime:
        """The same, with the driver's way to open a side (and to say where it is)."""
        return replace(self, open_side=open_side, say=say)


ASKED = OneAtATime(None, "asked for (--one-at-a-time)")
