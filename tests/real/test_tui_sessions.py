"""The TUI on real llama-servers records what it ran: an autosaved session, a notebook entry, a report."""

from __future__ import annotations

import tomllib

import pytest

from spectui.store.session import load_session, recorders_for
from tests.pilot import ready, until

pytestmark = pytest.mark.server


async def test_tui_autosaves_and_appends_to_the_notebook(llama_servers, tmp_path):
    from spectui.core.types import GenerationParams
    from spectui.machine.probes import GPUProbe
    from spectui.tui.app import AppConfig, make_app
    from tests.fakes import FakeNVML

    nb = tmp_path / "lab.toml"
    cfg = AppConfig(
        llama_servers["baseline"],
        llama_servers["ngram"],
        params=GenerationParams(max_tokens=24, cache_prompt=False),
        gpu_probe=GPUProbe(FakeNVML()),
        session_dir=str(tmp_path / "sessions"),
        notebook=str(nb),
        initial_prompt="Name three colours.",
    )
    app = make_app(cfg)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot, app)
        app.action_run()
        await until(pilot, lambda: app.results and app.run_done.is_set(), timeout=180)
        await pilot.press("ctrl+n")
        await pilot.press("ctrl+e")
        sessions = tmp_path / "sessions"
        await until(pilot, lambda: list(sessions.glob("*.md")) and list(sessions.glob("*.json")), 10, "the report")
        await until(pilot, lambda: nb.exists(), 10, "the notebook entry")
    [saved] = list((tmp_path / "sessions").glob("*.jsonl"))
    s = load_session(saved)
    b, c = recorders_for(s.prompts[0])
    assert b.output() == app.results[0].baseline.output() and c.output() == app.results[0].candidate.output()
    assert s.prompts[0].result["identical"] is (b.output() == c.output())  # the recorded verdict, from the bytes
    rows = tomllib.loads(nb.read_text())["measurement"]
    assert rows[0]["identical"] is True and rows[0]["candidate_build"].startswith("b11434")
    assert list((tmp_path / "sessions").glob("*.md")) and list((tmp_path / "sessions").glob("*.json"))
