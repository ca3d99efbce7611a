"""Waiting in Pilot tests: poll a condition, fail with what was awaited (never a fixed sleep)."""

from __future__ import annotations

import time


async def until(pilot, predicate, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await pilot.pause(0.05)


async def ready(pilot, app, timeout: float = 60.0) -> None:
    """Both panes connected (or failed, with the cause shown)."""
    await until(
        pilot,
        lambda: all(app.pane(s).state in ("ready", "failed") for s in ("baseline", "candidate")),
        timeout,
        "both panes to connect",
    )
