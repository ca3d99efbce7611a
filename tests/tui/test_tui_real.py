"""Pilot tests of the TUI against real llama-server processes."""

from __future__ import annotations

import itertools

import psutil
import pytest

from spectui.core.types import GenerationParams
from spectui.machine import assets
from spectui.machine.launcher import Launcher
from spectui.machine.probes import GPUProbe
from spectui.tui.app import AppConfig, make_app
from spectui.tui.screens.confirm import ConfirmScreen
from spectui.tui.widgets.panes import Banner
from tests.oracles import cause_by_the_evidence, log_t_interval
from tests.pilot import ready, until

pytestmark = pytest.mark.server
PROMPT = "Write a Python function fizzbuzz(n) that returns a list of strings for 1..n. Keep it short."


class NoNVML:
    def nvmlInit(self):
        raise RuntimeError("NVML Shared Library Not Found")


def app_for(baseline, candidate, **kw):
    cfg = AppConfig(
        baseline,
        candidate,
        params=GenerationParams(max_tokens=kw.pop("max_tokens", 32), cache_prompt=False),
        gpu_probe=GPUProbe(NoNVML()),
        autosave=False,
        **kw,
    )
    return make_app(cfg)


async def test_cancel_stops_both_streams(llama_servers):
    app = app_for(llama_servers["baseline"], llama_servers["ngram"], order="concurrent", max_tokens=1500)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot, app)
        app.query_one("#prompt").value = "Count from 1 to 500, one number per line."
        app.action_run()
        await until(
            pilot,
            lambda: all(len(app.recorders[s].tokens) > 5 for s in ("baseline", "candidate")),
            what="both streams to start",
        )
        await pilot.press("escape")
        await until(pilot, lambda: app.run_done.is_set(), what="cancel")
        assert app.pane("baseline").state == "cancelled" and app.pane("candidate").state == "cancelled"
        n = {s: len(app.recorders[s].tokens) for s in ("baseline", "candidate")}
        assert all(v < 1500 for v in n.values())
        # the servers saw the connection close and stopped generating: from then on nothing can arrive
        await until(
            pilot,
            lambda: not any(_processing(u) for u in (llama_servers["baseline"], llama_servers["ngram"])),
            timeout=60,  # an upper bound: each server notices the closed connection at its next token
            what="both servers to stop generating",
        )
        await pilot.pause()  # deliver whatever was already queued for the app
        assert {s: len(app.recorders[s].tokens) for s in n} == n  # nothing more arrived after the cancel


def _processing(url: str) -> bool:
    import httpx

    return any(s.get("is_processing") for s in httpx.get(url + "/slots", timeout=30).json())


async def test_killed_server_fails_its_pane_while_the_other_completes(llama_servers, assets_found):
    from tests.conftest import server_spec

    with Launcher() as launcher:
        victim = launcher.add(server_spec("baseline", assets_found))
        victim.argv[victim.argv.index("--port") + 1] = str(victim.port)
        launcher.start_all()
        # the other side is the shared plain server: what is tested is that its pane completes, not speculation
        # (bench/cpu_per_test.py: 11.5 CPU-s beside the draft server at 400 tokens, 7.3 so); 128 tokens at this
        # host's 40-50 tok/s leave seconds of streaming after the kill, which `until` (a look every 50 ms) sets off
        # after the fourth token
        app = app_for(victim.url, llama_servers["baseline"], order="concurrent", max_tokens=128)
        async with app.run_test(size=(160, 50)) as pilot:
            await ready(pilot, app)
            app.query_one("#prompt").value = "Count from 1 to 300, one number per line."
            app.action_run()
            await until(pilot, lambda: len(app.recorders["baseline"].tokens) > 3, what="the baseline to stream")
            victim.proc.kill()
            await until(pilot, lambda: app.run_done.is_set(), timeout=90, what="the run to end")
            assert app.pane("baseline").state == "failed"
            assert "lost" in app.pane("baseline").cause or "connect" in app.pane("baseline").cause
            assert app.pane("candidate").state == "done"
            assert app.recorders["candidate"].finished is not None and app.recorders["candidate"].figures.tokens > 0


async def test_quantised_kv_candidate_shows_divergence_banner_at_the_right_place(llama_servers):
    app = app_for(llama_servers["baseline"], llama_servers["kvq4"])
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot, app)
        app.query_one("#prompt").value = PROMPT
        app.action_run()
        await until(pilot, lambda: app.run_done.is_set() and app.results, what="the run")
        b, c = app.recorders["baseline"], app.recorders["candidate"]
        # the oracle, from the raw bytes: the first byte where the outputs part, and the token holding it
        out_b, out_c = b.output(), c.output()
        byte = next((i for i in range(min(len(out_b), len(out_c))) if out_b[i] != out_c[i]), None)
        assert byte is not None, "the q4_0 KV cache gave the baseline's bytes (FACTS: it differs at byte 25)"

        def token_at(recorder):
            ends = itertools.accumulate(len(t.data) for t in recorder.tokens)
            return next(i for i, end in enumerate(ends) if end > byte)

        d = app.runs.comparer.divergence
        assert d is not None and d.byte == byte
        assert (d.baseline_token, d.candidate_token) == (token_at(b), token_at(c))
        banner = str(app.query_one(Banner).render())
        assert (
            f"byte {byte} (token {token_at(b)} baseline / {token_at(c)} candidate)" in banner and "DIVERGED" in banner
        )
        # triage ran after the difference (the TUI's default) and the banner says its cause
        triage = app.results[-1].triage
        cause = triage.cause
        assert cause == cause_by_the_evidence(triage.to_json()) and f"cause: {cause}" in banner
        assert app.pane("candidate").view.diverge_token == token_at(c)
        await pilot.press("ctrl+d")
        await until(pilot, lambda: app.screen.query("#diff-body"), 10, "the diff view")
        body = str(app.screen.query_one("#diff-body").render())
        assert f"first difference at byte {byte}" in body
        assert f"cause: {cause}" in body and "rerun: baseline again under the same conditions: identical" in body
        assert "top tokens at token" in body  # both llama.cpp sides gave their top log-probabilities


async def test_a_run_shows_both_outputs_identical_and_ctrl_b_the_rejected_drafts_inline(llama_servers):
    """A typed prompt runs on both panes: identical, every candidate token labelled, the acceptance beside the
    speed-up; then Ctrl+B probes the prompt on screen (the draft model on its own server) and strikes each
    step's rejected draft text in after its ✗n mark; the diff view lists the steps."""
    app = app_for(llama_servers["baseline"], llama_servers["draft"])
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot, app)
        assert app.pane("candidate").info.build.startswith("b11434")
        # the /metrics cross-check reads the shared server's counters before and after the run: an earlier
        # test's request still being generated there would move them (wait for it, do not race it)
        await until(pilot, lambda: not _processing(llama_servers["draft"]), 120, "the draft server to be idle")
        await pilot.click("#prompt")
        await pilot.press(*PROMPT)
        await pilot.press("enter")
        await until(pilot, lambda: app.run_done.is_set() and app.results, what="the run to finish")
        b, c = app.recorders["baseline"], app.recorders["candidate"]
        assert b.output() == c.output() and b.output()
        assert app.pane("baseline").view.plain() == b.output().decode()
        banner = app.query_one(Banner)
        assert banner.has_class("-identical") and "IDENTICAL" in str(banner.render())
        figures = str(app.query_one("#figures-candidate").render())
        assert "accept" in figures and f"{c.figures.accepted}/{c.figures.drafted}" in figures
        assert "speed-up" in figures and "accepted" in figures.split("speed-up", 1)[1]
        assert c.figures.metrics_check.startswith("ok")
        # the candidate's labels reached the pane: every token marked
        view = app.pane("candidate").view
        assert len(view.tokens) == c.figures.tokens
        assert sum(1 for t in view.tokens if t.label == "accepted") == c.figures.accepted
        assert any(t.rejected for t in view.tokens) and "✗" in view.plain()
        before = view.plain()
        # alt+d asks first: the probe starts a third llama-server, and the question says what it holds
        await pilot.press("alt+d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10, "the question before the server")
        question = str(app.screen.query_one("#confirm-text").render())
        draft = assets.find_all().draft_model
        assert "third llama-server" in question and draft.name in question
        assert f"weights {draft.stat().st_size / 2**20:,.0f} MiB" in question and "KV cache" in question
        await pilot.press("n")  # no: nothing starts
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), 10, "the question to close")
        await pilot.pause(1.0)
        assert not _draft_servers() and not view.show_rejected and app.results[-1].drafts is None
        await pilot.press("alt+d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10, "the question again")
        await pilot.press("y")
        await until(pilot, lambda: view.show_rejected, timeout=180, what="the draft probe to finish")
        drafts = app.results[-1].drafts
        assert drafts is not None and drafts.agreed >= 1
        shown = [s.rejected_text for s in drafts.steps if s.agrees and s.rejected_text]
        # each guess on one line between brackets, newlines shown as ⏎
        assert shown and f"⟨{shown[0].replace(chr(10), '⏎')}⟩" in view.plain() and len(view.plain()) > len(before)
        assert "reconstructed" in str(app.query_one(Banner).render())
        await pilot.press("alt+d")  # hide again: the output reads as before
        await until(pilot, lambda: not view.show_rejected, what="the rejected text to hide")
        assert view.plain() == before
        await pilot.press("ctrl+d")
        await until(pilot, lambda: app.screen.query("#diff-body"), 10, "the diff view")
        assert "drafts:" in str(app.screen.query_one("#diff-body").render())
    # the probe's own llama-server (the draft model as its main model) is gone with it
    assert not _draft_servers()


def _draft_servers() -> list:
    """This test's own children serving the draft model as their main model (someone else's is not ours)."""
    draft = str(assets.find_all().draft_model)

    def serves_draft(cmd):
        return any(a == "-m" and b == draft for a, b in zip(cmd, cmd[1:]))

    return [p for p in psutil.Process().children(recursive=True) if serves_draft(p.cmdline())]


async def test_runs_setting_repeats_interleaved_and_shows_the_interval(llama_servers):
    app = app_for(llama_servers["baseline"], llama_servers["draft"], max_tokens=16)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot, app)
        app.query_one("#repeat").value = "3"
        await pilot.click("#prompt")
        await pilot.press(*"Name a colour.")
        await pilot.press("enter")
        await until(pilot, lambda: app.run_done.is_set() and len(app.results) == 3, timeout=120, what="3 runs")
        assert [r.run for r in app.results] == [1, 2, 3] and all(r.runs == 3 for r in app.results)
        # interleaved B C, C B, B C: the side whose stream started first alternates, and the second side
        # starts only after the first finished (sequential order)
        for r in app.results:
            first, second = (r.baseline, r.candidate) if r.run % 2 else (r.candidate, r.baseline)
            assert first.started_ns < first.finished.t_ns <= second.started_ns, r.run
        # the interval by hand: the geometric mean and a 95 % t-interval on the logarithms (README)
        ratios = [r.candidate.figures.decode_tps / r.baseline.figures.decode_tps for r in app.results]
        mid, low, high = log_t_interval(ratios)
        figures = str(app.query_one("#figures-candidate").render())
        assert f"{mid:.2f}× [{low:.2f}–{high:.2f}]" in figures
        # core.report.repeat_text's line since 899d39c: "speed-up M× [L–H] at A% accepted (3 runs): verdict"
        assert "accepted (3 runs): " in figures, figures


async def test_f2_sampling_screen_runs_on_the_prompt_on_screen(llama_servers):
    """F2 samples the prompt on screen N times on both sides with a progress bar over the seeds, and shows
    the seeded result and each position's top tokens side by side (draft-simple keeps every seed's bytes)."""
    from textual.widgets import ProgressBar

    from spectui.tui.screens.sampling_screen import SamplingScreen

    app = app_for(llama_servers["baseline"], llama_servers["draft"], max_tokens=8)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot, app)
        await pilot.click("#prompt")
        await pilot.press(*"Tell me a short story about a cat.")
        # F2 is a priority binding: the app runs it as the key arrives, while the Input may still hold typed
        # keys not yet handled; F2 then samples a cut prompt (wait for the whole prompt first)
        await until(
            pilot,
            lambda: app.query_one("#prompt").value == "Tell me a short story about a cat.",
            what="the typed prompt",
        )
        await pilot.press("f2")
        await until(
            pilot,
            lambda: isinstance(app.screen, SamplingScreen) and app.screen.query("#sampling-samples"),
            what="the sampling screen, composed",
        )
        screen = app.screen
        screen.query_one("#sampling-samples").value = "6"
        screen.query_one("#sampling-max-tokens").value = "4"
        await pilot.press("enter")
        await until(pilot, lambda: screen.result is not None, timeout=180, what="the sampling run")
        await pilot.pause()
        bar = screen.query_one(ProgressBar)
        assert bar.total == 6 and bar.progress == 6
        shown = str(screen.query_one("#sampling-result").render())
        assert screen.result.prompt.messages[-1]["content"] == "Tell me a short story about a cat."
        seeds = [(r.seed, r.verdict and r.verdict.status, r.verdict and r.verdict.reason, r.baseline.failed, r.candidate.failed)
                 for r in screen.result.runs]  # fmt: skip
        # the screen shows the count the run measured; whether draft-simple keeps every seed's bytes is the
        # server's promise, checked by real/test_sampling.py (one seed in a whole tests/tui run on a loaded
        # machine once came out 5 of 6, cause not found: the seeds' verdicts and failures are in the message)
        k = screen.result.seeded_identical
        assert f"byte-identical for {k} of 6 seeds" in shown and k >= 1, seeds
        assert "position 1:" in shown and "baseline" in shown and "candidate" in shown


async def test_f2_a_failed_request_is_named_by_its_seed_and_left_out_of_both_counts(llama_servers):
    """On real servers, the baseline's request for one seed fails (cut before its first token): the screen
    counts the 5 seeds both sides answered, in the seeded count and the distribution's samples alike, names the
    failed seed, and its verdict line comes first; the bar stays still before Enter; the ETA is the measured
    pace."""
    from textual.widgets import ProgressBar

    from spectui.core.events import StreamFailed
    from spectui.tui.screens.sampling_screen import SamplingScreen

    app = app_for(llama_servers["baseline"], llama_servers["draft"], max_tokens=8)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot, app)
        backend = app.backends["baseline"]
        real = backend.stream

        async def one_fails(prompt, params):
            if params.seed == 1002:
                yield StreamFailed(0, "connection lost (cut by the test)")
                return
            async for ev in real(prompt, params):
                yield ev

        backend.stream = one_fails
        app.query_one("#prompt").value = "Name a colour."
        await pilot.press("f2")
        await until(
            pilot,
            lambda: isinstance(app.screen, SamplingScreen) and app.screen.query("#sampling-samples"),
            what="the sampling screen, composed",
        )
        screen = app.screen
        bar = screen.query_one(ProgressBar)
        assert bar.total is not None and bar.progress == 0  # still: nothing runs before Enter
        screen.query_one("#sampling-samples").value = "6"
        screen.query_one("#sampling-max-tokens").value = "4"
        await pilot.press("enter")
        await until(pilot, lambda: screen.result is not None, timeout=180, what="the sampling run")
        await pilot.pause()
        res = screen.result
        shown = str(screen.query_one("#sampling-result").render())
        assert len(res.runs) == 6 and len(res.compared) == 5 and res.test is not None and res.test.n == (5, 5)
        assert f"byte-identical for {res.seeded_identical} of 5 seeds" in shown, shown
        assert "seed 1002 (baseline: connection lost (cut by the test))" in shown
        assert shown.splitlines()[0] == res.overall()[1] and "1 failed request left out" in shown.splitlines()[0]
        eta = str(screen.query_one("#sampling-eta").render())
        assert eta.startswith("sample 6 of 6 · ") and "s a sample (measured)" in eta
