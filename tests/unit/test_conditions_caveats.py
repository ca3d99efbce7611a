"""Order and cache named wherever they change a figure: a concurrent run's speed-up and a
run with the prompt cache on or left to the server carry a caveat in every report; the defaults (sequential,
cache off) carry none. On the recorded real session tests/data/session-kvq4-mixed.jsonl."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from spectui.core.report import (
    CACHE_CAVEAT,
    CONCURRENT_CAVEAT,
    conditions_caveats,
    markdown_report,
    text_report,
)
from spectui.core.types import GenerationParams
from spectui.labs.html_report import html_report
from spectui.store.session import load_session, results_for

MIXED = Path(__file__).parent.parent / "data" / "session-kvq4-mixed.jsonl"


def test_the_defaults_carry_no_caveat_and_each_condition_its_own():
    off = GenerationParams(cache_prompt=False)
    assert conditions_caveats(off, "sequential") == []
    assert conditions_caveats(off, "concurrent") == [CONCURRENT_CAVEAT]
    assert conditions_caveats(GenerationParams(cache_prompt=True), "sequential") == [CACHE_CAVEAT.format(cache="on")]
    said = conditions_caveats(GenerationParams(cache_prompt=None), "sequential")
    assert said == [CACHE_CAVEAT.format(cache="server default")]


def test_every_report_of_a_concurrent_cached_run_says_both_and_a_default_run_neither():
    session = load_session(MIXED)
    results = results_for(session)
    params, order = session.prompts[0].params, session.prompts[0].order
    assert (order, params.cache_prompt) == ("sequential", False)
    for render in (text_report, markdown_report, html_report):
        plain = render(session.infos, results, params, order)
        assert "order concurrent" not in plain and "prompt cache on:" not in plain
    for r in results:  # the same prompts as if run concurrently with the cache on
        r.params, r.order = dataclasses.replace(r.params, cache_prompt=True), "concurrent"
    cached = dataclasses.replace(params, cache_prompt=True)
    for render in (text_report, markdown_report, html_report):
        doc = render(session.infos, results, cached, "concurrent").replace("&#x27;", "'")
        assert "include the other's load" in doc, render.__name__
        assert "prompt cache on: a prompt prefix" in doc, render.__name__


def test_the_json_report_of_a_mixed_session_gives_each_prompt_its_params_and_the_notes():
    from spectui.core.report import json_report

    session = load_session(MIXED)
    results = results_for(session)
    params, order = session.prompts[0].params, session.prompts[0].order
    doc = json_report(session.infos, results, params, order)
    assert doc["params_differ_by_prompt"] is True and doc["notes"] == []
    assert [p["params"]["max_tokens"] for p in doc["prompts"]] == [64, 16]
    assert [p["params"]["seed"] for p in doc["prompts"]] == [42, 7]
    doc = json_report(session.infos, results[:1], params, "concurrent")
    assert "params" not in doc["prompts"][0] and doc["notes"] == [CONCURRENT_CAVEAT]
