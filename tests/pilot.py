"""Waiting in Pilot tests: poll a condition, fail with what was awaited (never a fixed sleep); and the app
that replays a recorded session, as `spectui replay FILE` opens it."""

from __future__ import annotations

import asyncio
import time

# Pilot.pause() first waits until every widget on the screen has handled a message it posts to each, then
# forces a screen update: 23 % of a core when it polls every 50 ms (4.7 CPU-s in 20 s of an idle app beside
# two llama-servers, against 0.8 s for the app alone), taken from the servers a real-server test waits on. The
# app's own loop runs on while `until` sleeps, so most polls just sleep; a full pause every SYNC_S still
# settles what a plain sleep might leave pending (a relayout) before the condition is looked at again.
POLL_S = 0.05
SYNC_S = 1.0


async def until(pilot, predicate, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    synced = time.monotonic()
    while not predicate():
        now = time.monotonic()
        if now > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        if now - synced >= SYNC_S:
            await pilot.pause(POLL_S)
            synced = time.monotonic()
        else:
            await asyncio.sleep(POLL_S)


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


def replay_app(session_path, speed: float | None = None):
    """The TUI replaying the session at `session_path` (None: as fast as it goes), every prompt run at once."""
    from spectui.core.runner import SIDES
    from spectui.machine.probes import GPUProbe
    from spectui.store.replay import ReplayControl, SessionBackend
    from spectui.store.session import load_session
    from spectui.tui.app import AppConfig, make_app
    from tests.fakes import FakeNVML

    session = load_session(session_path)
    control = ReplayControl(speed)
    cfg = AppConfig(
        session.infos["baseline"].url,
        session.infos["candidate"].url,
        params=session.prompts[0].params,
        prompts=[p.prompt for p in session.prompts],
        backends={s: SessionBackend(s, session, speed, control) for s in SIDES},
        replay_control=control,
        autorun_all=True,
        gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
        autosave=False,
    )
    return make_app(cfg)
