"""One run loop: the CLI and the TUI both run prompts through core.runner.run_prompts."""

from __future__ import annotations

import asyncio
import json

from spectui.cli.main import main
from spectui.core import runner


def counting(monkeypatch):
    calls = []
    real = runner.run_prompts

    async def wrapped(*a, **k):
        calls.append(a[2])  # the prompts
        return await real(*a, **k)

    monkeypatch.setattr(runner, "run_prompts", wrapped)
    return calls


def test_the_cli_runs_through_the_core_loop(llama_servers, monkeypatch, capsys):
    calls = counting(monkeypatch)
    code = main(
        [
            "compare",
            "--baseline",
            llama_servers["baseline"],
            "--candidate",
            llama_servers["ngram"],
            "--prompt",
            "Count to five.",
            "--max-tokens",
            "12",
            "--json",
        ]
    )
    [p] = json.loads(capsys.readouterr().out)["prompts"]
    assert (
        code == (0 if p["identical"] else 3)
        and len(calls) == 1
        and calls[0][0].messages[0]["content"] == "Count to five."
    )


async def test_the_tui_runs_through_the_core_loop(monkeypatch):
    from tests.tui.test_snapshots import make

    calls = counting(monkeypatch)
    app = make()
    async with app.run_test(size=(160, 48)) as pilot:
        from tests.pilot import until

        await until(pilot, lambda: all(app.pane(s).state == "ready" for s in ("baseline", "candidate")), timeout=120)
        app.action_run()
        await asyncio.wait_for(app.run_done.wait(), 180)  # an upper bound, for a loaded machine
    assert len(calls) == 1 and app.results[-1].identical is True
