"""A live TUI run of two prompts × 2 runs shows, as the text report does for the same results, each prompt's
speed-up over its runs with its interval and acceptance (core.report.repeat_text) and, after the run, the
whole set's figure with its acceptance (core.report.whole_set). The servers replay streams recorded from
real llama-servers over HTTP (tests/recorded_server.py): the app's live path, no model needed."""

from __future__ import annotations

from spectui.core.report import text_report
from spectui.core.types import GenerationParams, Prompt
from spectui.tui.widgets.panes import Banner
from tests.pilot import ready, until
from tests.recorded_server import RecordedServer
from tests.recordings import BASELINE, DRAFT, payloads


def report_line(text: str, head: str) -> str:
    lines = [
        r
        for line in text.splitlines()
        if line.startswith(head + " ") and (r := line[len(head) :].strip()).startswith("speed-up")
    ]
    assert len(lines) == 1, (head, text)
    return lines[0]


async def test_live_repeated_runs_over_two_prompts_show_the_reports_figures(tmp_path):
    from spectui.machine.probes import GPUProbe
    from spectui.tui.app import AppConfig, make_app
    from tests.fakes import FakeNVML

    prompts = [
        Prompt("one", "code", [{"role": "user", "content": "fizzbuzz"}]),
        Prompt("two", "code", [{"role": "user", "content": "fizzbuzz, again"}]),
    ]
    with RecordedServer(payloads(BASELINE)) as b, RecordedServer(payloads(DRAFT)) as c:
        cfg = AppConfig(
            b.url,
            c.url,
            params=GenerationParams(max_tokens=64),
            prompts=prompts,
            gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
            autosave=False,
            backend_kind="llama.cpp",
            triage=False,
        )
        app = make_app(cfg)
        async with app.run_test(size=(160, 50)) as pilot:
            await ready(pilot, app)
            app.query_one("#repeat").value = "2"
            await pilot.press("ctrl+g")
            await until(
                pilot,
                lambda: app.run_done.is_set() and not app.running and len(app.results) == 4,
                120,
                "2 prompts × 2 runs",
            )
            assert [(r.prompt.id, r.run, r.runs) for r in app.results] == [
                ("one", 1, 2),
                ("one", 2, 2),
                ("two", 1, 2),
                ("two", 2, 2),
            ]
            report = text_report(app.compare.infos(), app.results, app.params, app.order)
            whole = "whole set " + report_line(report, "whole set")
            await until(pilot, lambda: whole in str(app.q(Banner).render()), 30, "the whole set's figure")
            figures = app.pane("candidate").figures_text()
            assert report_line(report, "two") in figures, figures
