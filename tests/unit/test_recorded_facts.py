"""Replay and reports keep every recorded fact, on a session recorded from real llama-servers
(tests/data/session-kvq4-mixed.jsonl: a q4_0-KV candidate, /metrics "ok", two prompts with their own params)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from spectui.backends.launchspec import LaunchSpec
from spectui.core.figures import SideRecorder
from spectui.core.report import markdown_report, text_report
from spectui.core.runner import NO_COUNTERS, cross_check, run_side
from spectui.core.types import ServerCounters, ServerInfo
from spectui.labs.html_report import LABEL_GAP, html_report, spread_labels
from spectui.run import kvtypes
from spectui.store.replay import SessionBackend
from spectui.store.session import load_session, results_for

DATA = Path(__file__).parent.parent / "data"
MIXED = DATA / "session-kvq4-mixed.jsonl"


def test_replay_through_the_run_loop_keeps_the_recorded_metrics_state():
    """The TUI's replay plays each side through core.runner; its first prompt's "before" reading was None,
    so a session whose live run said "ok" replayed as "unavailable … start it with --metrics"."""
    session = load_session(MIXED)
    recorded = [sp.result[side]["metrics_check"] for sp in session.prompts for side in ("baseline", "candidate")]
    assert recorded == ["ok"] * 4
    backends = {s: SessionBackend(s, session, None) for s in ("baseline", "candidate")}

    async def play() -> list[str | None]:
        checks = []
        for sp in session.prompts:
            for side, backend in backends.items():
                rec = await run_side(side, backend, "", sp.params)
                checks.append(rec.figures.metrics_check)
        return checks

    assert asyncio.run(play()) == recorded


def test_the_metrics_hint_only_where_the_server_said_it_has_no_metrics():
    for enabled in (True, None):
        rec = SideRecorder("candidate")
        cross_check(rec, None, ServerCounters(0, 0, 0), enabled)
        assert "--metrics" not in (rec.figures.metrics_check or "")
        assert rec.figures.metrics_check == NO_COUNTERS[enabled]
    rec = SideRecorder("candidate")
    cross_check(rec, None, None, False)
    assert "start it with --metrics" in (rec.figures.metrics_check or "")


def test_kv_types_come_from_the_launched_argv_else_the_process_else_not_reported():
    argv = ["llama-server", "-m", "m.gguf", "-ctk", "q4_0", "--cache-type-v=q8_0", "-fa", "on"]
    info = ServerInfo("http://127.0.0.1:1")
    kvtypes.fill_kv_types(info, LaunchSpec.from_argv(argv), read_argv=lambda url: ["llama-server", "-m", "x"])
    assert info.kv_cache == {"type_k": "q4_0", "type_v": "q8_0", "from": kvtypes.LAUNCHED}
    assert "kv q4_0/q8_0" in info.describe_speedup()
    info = ServerInfo("http://127.0.0.1:2")  # not launched by spectui, but a local process: its command line
    kvtypes.fill_kv_types(info, None, read_argv=lambda url: ["llama-server", "-m", "m.gguf"])
    assert info.kv_cache == {"type_k": "f16", "type_v": "f16", "from": kvtypes.PROCESS}
    info = ServerInfo("http://10.0.0.9:8080")  # nothing to read: said, never left blank
    kvtypes.fill_kv_types(info, None, read_argv=lambda url: None)
    assert info.describe_speedup() == "no speculation, KV types not reported by the server"
    info = ServerInfo("http://x", backend="sglang", kv_cache={"dtype": "fp8_e5m2"})  # reported: kept
    kvtypes.fill_kv_types(info, LaunchSpec.from_argv(argv), read_argv=lambda url: None)
    assert info.kv_cache == {"dtype": "fp8_e5m2"}


def test_a_recorded_q4_0_candidate_is_named_in_every_report_and_the_listing():
    session = load_session(MIXED)
    results = results_for(session)
    params, order = session.prompts[0].params, session.prompts[0].order
    text = text_report(session.infos, results, params, order)
    md = markdown_report(session.infos, results, params, order, str(MIXED))
    page = html_report(session.infos, results, params, order, str(MIXED))
    for doc in (text, md.replace("q4\\_0", "q4_0"), page):
        assert "kv q4_0/q4_0" in doc and "kv f16/f16" in doc
    from spectui.store.session_list import summarise

    assert "kv q4_0/q4_0" in summarise(MIXED).candidate  # `spectui sessions` and Ctrl+L


def test_a_mixed_session_names_each_prompts_own_parameters():
    session = load_session(MIXED)
    results = results_for(session)
    assert [sp.params.max_tokens for sp in session.prompts] == [64, 16]
    params, order = session.prompts[0].params, session.prompts[0].order
    text = text_report(session.infos, results, params, order)
    md = markdown_report(session.infos, results, params, order)
    page = html_report(session.infos, results, params, order)
    assert "max_tokens=64" not in text  # the first prompt's alone is not the set's header
    for doc in (text, md, page):
        assert "differ by prompt" in doc
        assert "max tokens 64, temperature 0.0, seed 42" in doc and "max tokens 16, temperature 0.0, seed 7" in doc


def test_curve_labels_of_the_s_alpha_chart_are_never_drawn_over_each_other():
    placed = spread_labels([(50.0, "a", "one"), (52.0, "b", "two"), (49.0, "c", "three"), (5.0, "d", "four")], 13, 12)
    ys = [y for y, _, _ in placed]
    assert ys == sorted(ys) and ys[0] >= 12 and all(b - a >= 13 for a, b in zip(ys, ys[1:]))
    # the chart of a recorded draft session: every curve label's baseline LABEL_GAP from the next
    session = load_session(DATA / "session-draft-quick2-repeat2.jsonl")
    from spectui.labs.html_report import theory_svg

    for r in results_for(session):
        svg = theory_svg(r)
        if not svg:
            continue
        found = re.findall(r'<text x="[\d.]+" y="([\d.]+)" text-anchor="end" fill="#\w+">([^<]*)</text>', svg)
        label_ys = sorted(float(y) for y, text in found if "c = " in text)  # the curves' labels
        assert len(label_ys) == 2
        assert label_ys[1] - label_ys[0] >= LABEL_GAP - 0.05


def test_a_differing_cache_lab_turn_names_the_request_the_byte_and_why():
    """labs.prefix: a turn's two requests differ only in the prompt cache, so a difference is the cache's; on
    the recorded real outputs of a pair that parts at byte 39."""
    from spectui.labs.prefix import REUSE_WHY, REUSE_WHY_ANY, Turn, prefix_table, turn_triage, why_reuse_differs

    r = results_for(load_session(MIXED))[0]
    assert r.divergence is not None
    turn = Turn(2, r.baseline, r.candidate, r.verdict, {})
    found = turn_triage(turn, "llama.cpp")
    assert found is not None and found.cause == "cache"
    assert "turn 2 (request 2 of the conversation, 3 messages)" in found.summary
    assert f"part at byte {r.divergence.byte}" in found.summary
    assert found.notes == [f"why: {REUSE_WHY['llama.cpp']}"]
    assert why_reuse_differs("openai") == REUSE_WHY_ANY and "vLLM" in why_reuse_differs("vllm")
    assert f"why: {REUSE_WHY['llama.cpp']}" in prefix_table([turn], "llama.cpp")
    same = results_for(load_session(MIXED))[1]
    if same.verdict.status != "differs":
        assert turn_triage(Turn(1, same.baseline, same.candidate, same.verdict, {}), "llama.cpp") is None
