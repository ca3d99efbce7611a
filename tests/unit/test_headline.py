"""The one headline (core.headline): both halves of the question, each with its own answer, in the TUI's
banner, the reports and the certificate's three renderings."""

from __future__ import annotations

import asyncio

import pytest

from spectui.backends.recorded import ReplayBackend
from spectui.core.headline import from_certificate, headline, headline_for
from spectui.core.types import GenerationParams
from spectui.run.session import RunOptions, RunSession
from spectui.store import prompts as prompt_sets
from tests.recordings import BASELINE, DRAFT, INFO, changed, payloads


def test_one_run_is_a_point_with_the_acceptance_beside_it_and_no_verdict_on_speed():
    h = headline(1, 1, 0, "text+ids", speedup=0.19, acceptance=0.41)
    assert h.line == "same bytes: yes (text+ids) · faster: not judged — 0.19× at 41% accepted (1 run)"
    assert (h.same, h.faster) == (True, None)


@pytest.mark.parametrize("speedup", [1.18, 3.0, 0.5])
def test_one_run_of_a_server_against_itself_never_says_faster(speedup):
    # the TUI once said "faster: yes — 1.18× (1 run)" of a server compared with itself through a proxy
    h = headline(1, 1, 0, speedup=speedup)
    assert h.faster is None and "yes" not in h.faster_text and "no —" not in h.faster_text


def test_faster_only_where_the_whole_interval_lies_above_one():
    assert headline(1, 1, 0, speedup=1.2, low=1.01, high=1.4).faster is True
    assert headline(1, 1, 0, speedup=1.2, low=0.99, high=1.4).faster is False
    assert headline(1, 1, 0, speedup=1.01, low=1.005, high=1.015).faster is False  # within ±2 % of 1×
    few = headline(1, 1, 0, speedup=1.5, low=1.2, high=1.9, df=1, min_df=2)  # a certificate's too few runs
    assert few.faster is None and "too few runs to judge" in few.faster_text


def test_each_half_is_answered_on_its_own():
    h = headline(2, 3, 1, "text", speedup=1.8, low=1.7, high=1.9, acceptance=0.63, runs="6 runs over 3 prompts")
    assert (h.same, h.faster) == (False, True)
    assert h.same_text == "same bytes: no — 1/3 differ (text)"
    assert h.faster_text == "faster: yes — 1.80× [1.70–1.90] at 63% accepted (6 runs over 3 prompts)"


@pytest.mark.parametrize(
    ("kw", "faster", "word"),
    [
        (dict(speedup=1.01), None, "not judged"),  # one run: a point
        (dict(speedup=1.3, low=0.9, high=1.6), None, "no measurable difference"),  # the interval holds 1×
        (dict(speedup=0.5, low=0.4, high=0.6), False, "faster: no"),
        (dict(speedup=None), None, "not measured"),
    ],
)
def test_the_speed_half_follows_the_repeated_runs_rule(kw, faster, word):
    h = headline(1, 1, 0, **kw)
    assert word in h.faster_text
    assert h.faster is (False if "measurable" in word else faster)


def test_a_failed_side_is_not_compared_rather_than_a_broken_promise():
    h = headline(0, 1, 0, speedup=None)
    assert h.same is None and "not compared" in h.same_text and h.faster is None
    part = headline(9, 10, 0, speedup=None)
    assert part.same is None and part.same_text.startswith("same bytes: yes on 9/10, 1 not compared")


def run(candidate):
    b = ReplayBackend("replay://b", payloads(BASELINE), INFO, virtual_ms_per_event=12.5)
    c = ReplayBackend("replay://c", candidate, INFO, virtual_ms_per_event=12.5)
    items = prompt_sets.load_set("default")[1][:1]
    session = RunSession(b, c, GenerationParams(max_tokens=64, cache_prompt=False), RunOptions(repeat=1, triage=False))
    return asyncio.run(session.run(items))


def test_a_recorded_run_gets_its_headline_from_the_carried_verdict_and_figures():
    results = run(payloads(DRAFT))
    r = results[-1]
    h = headline_for(results)
    f = r.candidate.figures
    assert h.same is True and h.same_text == f"same bytes: yes ({r.verdict.compared})"
    assert f"{r.speedup:.2f}× at {f.accepted / f.drafted:.0%} accepted (1 run)" in h.faster_text
    assert h.faster is None
    stream = payloads(BASELINE)
    k = next(i for i, p in enumerate(stream) if p.get("content"))
    d = headline_for(run(changed(stream, k, "§")))
    assert d.same is False and "they part at byte" in d.same_text


def test_the_certificate_renderings_carry_the_headline(tmp_path):
    from spectui.core.markdown import md_cell
    from spectui.run.prove.render import render_html, render_markdown, render_text
    from tests.unit.test_certificate import prove

    doc = prove(tmp_path / "c", sampled=0)
    h = from_certificate(doc["derived"])
    assert h.same is True and h.same_text.startswith("same bytes: yes, 3/3")
    assert h.line in render_text(doc).splitlines()[1]
    assert md_cell(h.line) in render_markdown(doc)
    page = render_html(doc)
    assert f'<span class="yes">{h.same_text}</span>' in page
    want = {True: "yes", False: "no", None: "unknown"}[h.faster]
    assert f'<span class="{want}">' in page.split(h.same_text)[1]
