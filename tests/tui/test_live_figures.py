"""Each pane's figures while text streams: the rate so far, the tokens and the acceptance
are drawn at the redraw rate, from core (SideRecorder.rate_so_far, the observed rate's definition), and the
final figures replace the live ones at the end. The streams are real llama-server recordings replayed on a
virtual clock (12.5 ms an event), held part-way as the streaming snapshot does."""

from __future__ import annotations

import asyncio

from spectui.core.events import TokenEvent
from tests.pilot import until
from tests.tui.test_snapshots import make, steady


def _hold_after(backend, n: int, release: asyncio.Event) -> None:
    """The backend's stream pauses after `n` tokens until `release` is set, then runs to its end."""
    original = backend.stream

    async def held(prompt, params):
        tokens = 0
        async for ev in original(prompt, params):
            if isinstance(ev, TokenEvent):
                tokens += 1
                if tokens == n + 1:
                    await release.wait()
            yield ev

    backend.stream = held


async def test_rate_tokens_and_acceptance_are_live_then_final():
    app = make()
    release = asyncio.Event()
    async with app.run_test(size=(160, 48)) as pilot:
        await steady(pilot)
        app.compare.order = "concurrent"
        for side in ("baseline", "candidate"):
            _hold_after(app.backends[side], 30, release)
        app.action_run()
        await until(
            pilot,
            lambda: (
                all(len(app.runs.recorders[s].tokens) >= 20 for s in ("baseline", "candidate"))
                and not any(app.runs.pending.values())
            ),
            what="both panes part-way",
        )
        await pilot.pause(0.1)
        recs = app.runs.recorders
        for side in ("baseline", "candidate"):
            rec, text = recs[side], app.pane(side).figures_text()
            assert not rec.done and rec.figures.decode_tps is None  # no final figure yet
            live = rec.rate_so_far()
            assert live is not None and live > 0
            assert f"tok/s {live:.1f} so far" in text, text
            assert f"tokens {rec.figures.tokens}" in text, text
        cand = recs["candidate"].figures
        assert cand.drafted, "the draft-simple recording drafts within its first 30 events"
        assert (
            f"accept {cand.acceptance_rate:.0%} ({cand.accepted}/{cand.drafted})"
            in app.pane("candidate").figures_text()
        )
        release.set()
        await asyncio.wait_for(app.run_done.wait(), 60)
        await pilot.pause(0.1)
        for side in ("baseline", "candidate"):
            f, text = app.runs.recorders[side].figures, app.pane(side).figures_text()
            assert "so far" not in text, text
            assert f.decode_tps and f"tok/s {f.decode_tps:.1f} server-timed" in text, text


async def test_the_live_rate_is_the_observed_rate_at_the_end():
    """At the end of a stream the live figure equals the final observed one (one definition, in core)."""
    app = make()
    async with app.run_test(size=(160, 48)) as pilot:
        await steady(pilot)
        app.action_run()
        await asyncio.wait_for(app.run_done.wait(), 60)
        for side in ("baseline", "candidate"):
            rec = app.runs.recorders[side]
            assert rec.figures.observed_tps is not None
            assert rec.rate_so_far() == rec.figures.observed_tps


async def test_no_draft_yet_is_a_dash_while_streaming_not_no_drafts():
    """Before the candidate's first verification step its acceptance is not known yet: '—', never 'no drafts'
    (which is the final word of a candidate that drafted nothing)."""
    app = make()
    release = asyncio.Event()
    async with app.run_test(size=(160, 48)) as pilot:
        await steady(pilot)
        app.compare.order = "concurrent"
        _hold_after(app.backends["candidate"], 0, release)
        app.action_run()
        await until(
            pilot,
            lambda: app.runs.recorders["candidate"].started_ns is not None and not app.runs.pending["candidate"],
            what="the candidate's stream to start",
        )
        await pilot.pause(0.1)
        rec = app.runs.recorders["candidate"]
        assert not rec.done and not rec.figures.drafted
        text = app.pane("candidate").figures_text()
        assert "accept —" in text and "no drafts" not in text, text
        release.set()
        await asyncio.wait_for(app.run_done.wait(), 60)
