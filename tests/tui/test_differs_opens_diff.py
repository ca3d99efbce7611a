"""A DIFFERS row opens the diff and the cause: in the cache lab (Ctrl+F) the turn's diff
with which request it is, where the bytes part and why prefix reuse can change greedy output on this server;
in the sweep the request that differs, then triage's cause. Replayed real streams whose candidate parts from
the baseline at one token (tests/tui/test_snapshots.py's "diverge"), so every request differs."""

from __future__ import annotations

from spectui.labs.prefix import REUSE_WHY
from spectui.tui.screens.diff import DiffScreen
from spectui.tui.screens.lab_screens import PrefixScreen, SweepScreen
from tests.pilot import settled, until
from tests.tui.test_snapshots import make, steady


async def test_a_differing_cache_lab_turn_opens_its_diff_and_cause():
    app = make("diverge")
    async with app.run_test(size=(160, 48)) as pilot:
        await steady(pilot)
        await app.run_action("screen.lab('prefix_lab')")
        await until(pilot, lambda: isinstance(app.screen, PrefixScreen) and app.screen.query("#status"), 10, "lab")
        lab = app.screen
        await pilot.press("enter")
        await until(pilot, lambda: str(lab.query_one("#status").render()).startswith("done"), 60, "the turns")
        status = str(lab.query_one("#status").render())
        assert "Ctrl+D" in status and REUSE_WHY["llama.cpp"][:40] in status.replace("\n", " ")
        await pilot.press("ctrl+d")
        await until(pilot, lambda: isinstance(app.screen, DiffScreen), 10, "the diff")
        diff = app.screen
        turn = lab.turns[0]
        assert diff.which is not None and f"turn {turn.n}" in diff.which
        assert diff.triage is not None and diff.triage.cause == "cache"
        assert f"byte {turn.divergence.byte}" in diff.triage.summary
        body = str(diff.query_one("#diff-body").render())
        assert "cause: cache" in body and "why: llama.cpp reads a reused prefix" in body
        await pilot.press("escape")
        await settled(pilot)
        assert app.screen is lab


async def test_a_differing_sweep_level_opens_the_request_and_triage(monkeypatch):
    """run.triage itself is tested on real servers (tests/real/test_triage.py); here: that the sweep hands it the
    one request that differs, with both sides' outputs and rendered prompts, and shows what it found."""
    from spectui.core.findings import Triage
    from spectui.run import triage as triage_module

    asked = []

    async def triage(baseline, candidate, result, params, *a, **kw):
        asked.append(result)
        return Triage("near-tie", f"the sides part at byte {result.divergence.byte} on a near-tie")

    monkeypatch.setattr(triage_module, "triage", triage)
    app = make("diverge")
    async with app.run_test(size=(160, 48)) as pilot:
        await steady(pilot)
        await app.run_action("screen.lab('sweep')")
        await until(pilot, lambda: isinstance(app.screen, SweepScreen) and app.screen.query("#status"), 10, "sweep")
        sweep = app.screen
        await pilot.press("enter")
        await until(pilot, lambda: sweep.finished, 120, "the sweep")
        assert sweep.levels and all(lv.differing for lv in sweep.levels)
        await pilot.press("ctrl+d")
        await until(pilot, lambda: isinstance(app.screen, DiffScreen), 10, "the diff")
        diff = app.screen
        assert diff.which is not None and "sweep at concurrency 1: request 1 of 1" in diff.which
        assert diff.divergence is not None
        await until(pilot, lambda: diff.triage is not None, 60, "triage's finding")
        (result,) = asked
        assert result.prompt is sweep.prompts[0] and result.divergence == diff.divergence
        assert result.baseline.output() and result.candidate.output() != result.baseline.output()
        assert set(result.rendered) == {"baseline", "candidate"}
        await until(pilot, lambda: "cause: near-tie" in str(diff.query_one("#diff-body").render()), 10, "the cause")
        body = str(diff.query_one("#diff-body").render())
        assert "first difference at byte" in body and "rerunning" not in body
