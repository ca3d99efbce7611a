"""The TUI's prove screen (F4) and sweep screen (alt+s) when the app runs one server at a time, on real
llama-servers: each side is started alone when a phase needs it and stopped after — never both up, watched
in the process list — the screens say so, the certificate says it was measured one after the other and
verifies; and F4 on a pair the app did not launch still proves side by side, now with the certificate's
table of measured terms on screen. Small: 1–2 prompts, 16 tokens (the servers' decoding is most of the suite's
CPU; the phases, the launches and the terms table do not depend on the length)."""

from __future__ import annotations

import pytest

from spectui.core.types import GenerationParams
from tests.conftest import COPYING
from tests.pilot import ready, until
from tests.procwatch import llama_children, watched

pytestmark = pytest.mark.server

LONG = 600  # upper bounds only: a loaded 2-core machine starts a server in seconds to a minute
# pytest's own 300 s per test would cut the upper bounds above short: a one-at-a-time prove (4 launches, with a
# sampled pass, as this file ran it before) took 108 s here on a lightly loaded machine and 285 s under 4 busy
# loops (2 cores), near pytest's 300 s
SLOW = pytest.mark.timeout(1200)


def _copying_prompts():
    """Two raw prompts an n-gram draft copies from (tests/data/copying.toml): drafts from the first steps."""
    from spectui.store.prompts import load_set

    return load_set(str(COPYING))[1]


def _alone_app():
    from spectui.cli.demo import demo_config, demo_servers
    from spectui.machine.probes import GPUProbe
    from spectui.tui.app import make_app
    from tests.fakes import FakeNVML

    # the n-gram pair: a draft model's candidate costs about 3.7 times its CPU a token here, and one at a time
    # does not depend on how the candidate drafts (a draft model one at a time: test_one_at_a_time.py)
    _, base, cand = demo_servers("ngram")
    cfg = demo_config(
        base,
        cand,
        one_at_a_time=True,
        pids={},
        autorun=False,
        prompts=_copying_prompts(),
        params=GenerationParams(max_tokens=16, cache_prompt=False),
        gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
        autosave=False,
        ready_timeout=300,
    )
    return make_app(cfg)


async def _none_left(shared) -> None:
    """Every server this test started has gone (the app has exited: no pilot to pause)."""
    import asyncio
    import time

    deadline = time.monotonic() + 60
    while llama_children(shared):
        assert time.monotonic() < deadline, "a server was left running 60 s after the app quit"
        await asyncio.sleep(0.1)


def _text(widget) -> str:
    return str(widget.render())


@SLOW
async def test_f4_proves_one_server_at_a_time_never_both_up(tmp_path):
    from spectui.run.prove import certificate
    from spectui.tui.screens.prove_screen import ProveScreen

    app = _alone_app()
    with watched() as (seen, shared):
        async with app.run_test(size=(180, 50)) as pilot:
            await until(pilot, lambda: app.pane("candidate").state == "ready", 60, "the panes waiting")
            await pilot.press("f4")
            await until(
                pilot,
                lambda: isinstance(app.screen, ProveScreen) and app.screen.query("#prove-sampled"),
                60,
                "the prove screen",
            )
            screen = app.screen
            assert "one server at a time (asked for (--one-at-a-time))" in _text(screen.query_one("#prove-alone"))
            assert "triage skipped" in _text(screen.query_one("#prove-alone"))
            screen.out_dir = tmp_path / "cert"
            # no sampled pass: the prover's sampled phase one at a time is test_prove_one_at_a_time's (the CLI);
            # what is the screen's here is its plan, its texts and the side it re-opens
            for key, value in (("runs", "2"), ("sampled", "0"), ("max-tokens", "16")):
                screen.query_one(f"#prove-{key}").value = value
            await pilot.press("enter")
            await until(
                pilot,
                lambda: screen.document is not None or "stopped" in _text(screen.query_one("#status")),
                LONG,
                "the certificate",
            )
            assert screen.document is not None, _text(screen.query_one("#status"))
            doc = screen.document
            verdict = _text(screen.query_one("#prove-verdict"))
            saved = _text(screen.query_one("#prove-saved"))
            terms = _text(screen.query_one("#prove-terms-table"))
            bar = screen.query_one("#prove-progress")
            assert bar.total == 2 * 2 and bar.progress == bar.total  # every greedy run of both prompts
        await _none_left(shared)
    assert max(len(s) for s in seen) == 1  # a server was up, and never two at once
    assert len(set().union(*seen)) == 3  # B | C C | B: three launches, the baseline re-opened
    assert verdict == doc["verdict"]["line"] and verdict.startswith("IDENTICAL on 2/2")
    assert doc["inputs"]["params"]["order"] == "one-at-a-time"
    assert doc["inputs"]["one_at_a_time"]["why"] == "asked for (--one-at-a-time)"
    assert "measured one after the other" in saved and "certificate saved" in saved
    assert "not measured: the two servers were not up together" in terms
    assert doc["terms"] == {"skipped": "the two servers were not up together"}
    assert certificate.verify(tmp_path / "cert" / "certificate.json").ok


@SLOW
async def test_the_sweep_screen_runs_one_server_at_a_time_never_both_up():
    from spectui.tui.screens.lab_screens import SweepScreen

    app = _alone_app()
    with watched() as (seen, shared):
        async with app.run_test(size=(180, 50)) as pilot:
            await until(pilot, lambda: app.pane("candidate").state == "ready", 60, "the panes waiting")
            await pilot.press("alt+s")
            await until(
                pilot,
                lambda: isinstance(app.screen, SweepScreen) and app.screen.query("#sweep-alone"),
                60,
                "the sweep screen",
            )
            screen = app.screen
            said = _text(screen.query_one("#sweep-alone"))
            assert "one server at a time" in said and "prediction needs both servers up" in said
            await pilot.press("enter")
            await until(pilot, lambda: screen.finished, LONG, "the sweep")
            status = _text(screen.query_one("#status"))
            rows = [screen.query_one("#levels").get_row_at(i) for i in range(screen.query_one("#levels").row_count)]
            levels = list(screen.levels)
        await _none_left(shared)
    assert status.startswith("done"), status
    assert max(len(s) for s in seen) == 1  # never two at once
    assert len(set().union(*seen)) == 2  # B | C: each side started once
    assert [lv.concurrency for lv in levels] == [1, 2, 4] and [r[0] for r in rows] == ["1", "2", "4"]
    for lv in levels:
        assert lv.baseline.aggregate_tps and lv.candidate.aggregate_tps  # both sides ran every level
        # every request's output judged against the other side's (identity itself is the servers' business)
        assert lv.compared == lv.concurrency and not lv.not_compared, lv.outputs_text()
        assert lv.outputs_text() in [r[-1] for r in rows]
        assert lv.predicted_note and "both servers up" in lv.predicted_note


@SLOW
async def test_f4_on_servers_the_app_did_not_launch_proves_side_by_side_with_the_terms_table(llama_servers, tmp_path):
    from spectui.core import terms_table
    from spectui.machine.probes import GPUProbe
    from spectui.run.prove import certificate
    from spectui.tui.app import AppConfig, make_app
    from spectui.tui.screens.prove_screen import ProveScreen
    from tests.fakes import FakeNVML

    # the n-gram candidate on one copying prompt: the screen's table is the certificate's whatever the drafting
    # (a draft model's terms, c measured on its drafter: test_prove_terms.py), and n-gram needs no drafter
    cfg = AppConfig(
        llama_servers["baseline"],
        llama_servers["ngram"],
        prompts=_copying_prompts()[:1],
        params=GenerationParams(max_tokens=16, cache_prompt=False),
        gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
        autosave=False,
        # no KV polls beside the prove: the stamped client's pool reuses its oldest idle connection for up
        # to 15 s, llama-server closes one after 5 s idle, and a poll's extra connection can be caught so
        # (a transport matter, not this screen's)
        probe_interval=3600,
    )
    app = make_app(cfg)
    async with app.run_test(size=(200, 60)) as pilot:
        await ready(pilot, app, 120)
        assert all(app.pane(s).state == "ready" for s in ("baseline", "candidate"))
        await pilot.press("f4")
        await until(
            pilot,
            lambda: isinstance(app.screen, ProveScreen) and app.screen.query("#prove-sampled"),
            60,
            "the prove screen",
        )
        screen = app.screen
        assert _text(screen.query_one("#prove-alone")) == ""  # side by side: nothing said about one at a time
        screen.out_dir = tmp_path / "cert"
        for key, value in (("runs", "2"), ("sampled", "0"), ("max-tokens", "16")):
            screen.query_one(f"#prove-{key}").value = value
        await pilot.press("enter")
        await until(
            pilot,
            lambda: screen.document is not None or "stopped" in _text(screen.query_one("#status")),
            LONG,
            "the certificate and its terms",
        )
        assert screen.document is not None, _text(screen.query_one("#status"))
        doc = screen.document
        shown = _text(screen.query_one("#prove-terms-table"))
    assert doc["inputs"]["params"]["order"] != "one-at-a-time" and "one_at_a_time" not in doc["derived"]
    rec = doc["terms"]
    assert "prompts" in rec and len(rec["prompts"]) == 1, rec  # measured on the two servers, as `spectui prove` does
    assert shown == "\n".join(terms_table.text(rec)).strip("\n")  # the certificate's own table
    assert "V(k), k = 1…γ+1" in shown and all(e["id"] in shown for e in rec["prompts"])
    md = (tmp_path / "cert" / "certificate.md").read_text(encoding="utf-8")
    assert "The formula's terms, measured on the servers" in md
    assert certificate.verify(tmp_path / "cert" / "certificate.json").ok
