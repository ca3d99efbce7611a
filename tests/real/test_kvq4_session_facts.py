"""A q4_0-KV session recorded from real llama-servers keeps its facts in replay, every report and the listing: the KV
types from each server's command line (llama.cpp's /props reports none), and the /metrics state the live run recorded
("ok"), replayed through the run loop as the TUI replays it."""

from __future__ import annotations

import asyncio

import pytest

from spectui.cli.main import main
from spectui.core.runner import run_side
from spectui.store.replay import SessionBackend
from spectui.store.session import load_session
from spectui.store.session_list import summarise

pytestmark = pytest.mark.server


def test_a_kvq4_session_replays_and_reports_its_kv_types_and_metrics(llama_servers, tmp_path, capsys):
    from tests.conftest import wait_idle

    wait_idle(llama_servers["baseline"], llama_servers["kvq4"])  # the cross-check reads shared counters
    path = tmp_path / "kvq4.jsonl"
    args = ["--baseline", llama_servers["baseline"], "--candidate", llama_servers["kvq4"]]
    code = main(["compare", *args, "--prompt", "What is 2+2?", "--max-tokens", "16", "--save", str(path)])
    assert code in (0, 3)  # identical or differs: both are results
    capsys.readouterr()
    session = load_session(path)
    assert session.infos["candidate"].kv_cache["type_k"] == "q4_0"
    assert session.infos["baseline"].kv_cache["type_k"] == "f16"
    recorded = [sp.result[s]["metrics_check"] for sp in session.prompts for s in ("baseline", "candidate")]
    assert all(c.startswith("ok") for c in recorded), recorded

    async def replayed() -> list[str | None]:
        out = []
        for side in ("baseline", "candidate"):
            backend = SessionBackend(side, session, None)
            rec = await run_side(side, backend, "", session.prompts[0].params)
            out.append(rec.figures.metrics_check)
        return out

    assert asyncio.run(replayed()) == recorded  # was "unavailable: … start it with --metrics"
    for fmt in ("text", "md", "html"):
        assert main(["report", str(path), "--format", fmt]) == 0
        out = capsys.readouterr().out.replace("q4\\_0", "q4_0")
        assert "kv q4_0/q4_0" in out and "kv f16/f16" in out, fmt
    assert "kv q4_0/q4_0" in summarise(path).candidate
