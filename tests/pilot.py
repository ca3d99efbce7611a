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


async def settled(pilot, timeout: float = 30.0, frames: int = 3) -> None:
    """The screen drew the same picture `frames` times running: every pending relayout has happened.

    A widget whose text grows (the pane header after a run) gets its new height on a later layout
    pass; a snapshot taken in between shows the old height. Waiting for a stable picture, not a count
    of pauses, keeps snapshots the same on a loaded machine.
    """
    deadline = time.monotonic() + timeout
    last, same = None, 0
    while same < frames:
        if time.monotonic() > deadline:
            raise AssertionError(f"the screen kept changing for {timeout:.0f} s")
        await pilot.pause(0.02)
        shot = pilot.app.export_screenshot()
        same = same + 1 if shot == last else 0
        last = shot
