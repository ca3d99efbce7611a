"""The TUI replay of a q4_0-KV session recorded from real llama-servers (tests/data/session-kvq4-mixed.jsonl)
shows what the run recorded: the /metrics cross-check "ok" on both sides, where it said
"unavailable … start it with --metrics", and each side's KV types in its pane header, where both read
"no speculation"."""

from __future__ import annotations

from pathlib import Path

from tests.pilot import replay_app, settled, until

SESSION = Path(__file__).parent.parent / "data" / "session-kvq4-mixed.jsonl"


async def test_the_replay_shows_the_recorded_metrics_state_and_kv_types():
    app = replay_app(SESSION)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: app.run_done.is_set() and len(app.results) == 2, 60, "the replay")
        await settled(pilot)
        for r in app.results:
            for rec in (r.baseline, r.candidate):
                assert rec.figures.metrics_check == "ok", rec.figures.metrics_check
        figures = str(app.query_one("#figures-candidate").render())
        assert "--metrics" not in figures
        assert "kv q4_0/q4_0" in str(app.query_one("#header-candidate").render())
        assert "kv f16/f16" in str(app.query_one("#header-baseline").render())
