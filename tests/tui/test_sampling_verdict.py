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
    for i in range(20):  # 8 could find only TVD ≥ 0.6: not enough to decide since issue 36
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
