"""The sampling screen shows the verdict the lab made, in its own colour: `not enough samples to decide`
(every candidate sample failed: no position tested) is never a green `consistent`."""

from __future__ import annotations

from textual.app import App

from spectui.core.events import StreamFailed, StreamFinished, StreamStarted, TokenEvent
from spectui.core.figures import SideRecorder
from spectui.core.runner import PromptResult
from spectui.core.types import GenerationParams, Prompt
from spectui.labs.sampling.exact import NOT_ENOUGH, SamplingResult, distribution_pass, guarantee_for
from spectui.tui.screens.sampling_screen import SamplingScreen
from tests.pilot import until


def _result(candidate_fails: bool) -> SamplingResult:
    runs = []
    for i in range(20):  # 8 could find only TVD ≥ 0.6: not enough to decide (DECIDE_TVD)
        b, c = SideRecorder("baseline"), SideRecorder("candidate")
        for rec, failed in ((b, False), (c, candidate_fails)):
            rec.feed(StreamStarted(0, "p"))
            if not failed:
                rec.feed(TokenEvent(0, 5 + i % 2, b"x", 1, "unknown"))
            rec.feed(StreamFailed(9, "boom") if failed else StreamFinished(9, "limit"))
        runs.append(PromptResult(Prompt("p"), b, c, run=i + 1))
    res = SamplingResult(Prompt("p"), runs)
    res.guarantee = guarantee_for("llama.cpp", None, ["llama-server"])
    distribution_pass(res, 4)
    return res


async def _shown(res: SamplingResult):
    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(SamplingScreen({}, Prompt("p", raw="x"), GenerationParams()))

    app = Host()
    async with app.run_test(size=(160, 50)) as pilot:
        await until(
            pilot,
            lambda: isinstance(app.screen, SamplingScreen) and app.screen.query("#sampling-result"),
            what="the sampling screen, composed",
        )
        app.screen._show(res)
        await pilot.pause()
        return app.screen.query_one("#sampling-result").render()


async def test_no_tested_position_shows_not_enough_samples_never_green():
    res = _result(candidate_fails=True)
    assert res.verdict == NOT_ENOUGH
    shown = await _shown(res)
    text = str(shown)
    assert "NOT ENOUGH SAMPLES TO DECIDE" in text and "consistent" not in text
    styles = [str(span.style) for span in shown.spans if "NOT ENOUGH" in text[span.start : span.end]]
    assert styles and not any("green" in s for s in styles), styles


async def test_a_consistent_result_is_green_and_says_what_it_could_find():
    res = _result(candidate_fails=False)
    assert res.verdict == "consistent"
    shown = await _shown(res)
    text = str(shown)
    assert "consistent" in text and "would have been found with 80 % probability" in text
    assert any("green" in str(span.style) for span in shown.spans)


def _with_one_failed_request(seed_base: int = 1000, failed_at: int = 3) -> SamplingResult:
    """20 seeds, every answered one identical on both sides; the baseline's request of one seed failed."""
    from spectui.core.verdict import judge

    runs = []
    for i in range(20):
        b, c = SideRecorder("baseline"), SideRecorder("candidate")
        for rec in (b, c):
            rec.feed(StreamStarted(0, "p"))
            for k in range(4):
                rec.feed(TokenEvent(k, 5 + (i + k) % 3, b"xyz"[(i + k) % 3 : (i + k) % 3 + 1], 1 + k, "unknown"))
            if rec is b and i == failed_at:
                rec.feed(StreamFailed(9, "connection to http://127.0.0.1:8080 lost"))
            else:
                rec.feed(StreamFinished(9, "limit"))
        r = PromptResult(Prompt("p"), b, c, run=i + 1)
        r.verdict = judge(b, c, True)
        r.seed = seed_base + i
        runs.append(r)
    res = SamplingResult(Prompt("p"), runs)
    res.guarantee = guarantee_for("llama.cpp", None, ["llama-server", "--spec-type", "ngram-simple"])
    distribution_pass(res, 4)
    return res


async def test_a_failed_request_is_named_by_its_seed_and_left_out_of_both_counts():
    """One baseline request failed: it is no seed whose bytes differ (never '19 of 20' in red beside a green
    'consistent (19+20 samples)'); both counts are over the 19 seeds both sides answered, the failed seed is
    named, and one verdict line says the answer."""
    res = _with_one_failed_request()
    assert res.seeded_identical == 19 and len(res.compared) == 19 and res.test is not None
    assert res.test.n == (19, 19)  # the same seeds on both sides
    assert not res.seeded_mismatch_is_failure
    shown = await _shown(res)
    text = str(shown)
    assert "byte-identical for 19 of 19 seeds" in text and "of 20" not in text
    assert "seed 1003 (baseline: connection to http://127.0.0.1:8080 lost)" in text
    first = text.splitlines()[0]
    assert first.startswith("verdict: SAME") and "1 failed request left out" in first
    assert any("green" in str(sp.style) for sp in shown.spans if sp.start == 0)
    assert not any("red" in str(sp.style) for sp in shown.spans), "no broken promise is shown"
    assert "19+19 samples" in text
    # the CLI's text says the same (one figure, in labs, every view shows it)
    assert "byte-identical for 19 of 19 seeds (1 failed request left out of both counts: seed 1003" in res.text()
    assert res.to_json()["failed_seeds"] == [1003]


async def test_the_bar_is_idle_before_enter_and_the_eta_comes_from_the_measured_pace():
    from textual.widgets import ProgressBar

    from spectui.tui.screens.sampling_screen import eta_text

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(SamplingScreen({}, Prompt("p", raw="x"), GenerationParams()))

    app = Host()
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app.screen.query("#sampling-progress"), what="the sampling screen, composed")
        bar = app.screen.query_one(ProgressBar)
        assert bar.total is not None and bar.progress == 0  # no total: Textual animates an indeterminate bar
    assert eta_text(5, 20, 10.0) == "sample 5 of 20 · 2.00 s a sample (measured) · about 30 s left"
    assert eta_text(20, 20, 41.0).endswith("41.0 s in all") and eta_text(0, 20, 1.0) == ""
