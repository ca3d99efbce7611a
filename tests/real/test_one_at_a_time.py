"""One server at a time (two servers, one GPU): `compare --launch … --one-at-a-time` starts and
stops the servers in turn — never both up — and gives the verdicts, labels and acceptance of the same
comparison run side by side."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from spectui.cli.main import main
from tests.procwatch import llama_children, watched

pytestmark = pytest.mark.server

# 16 tokens: the servers' decoding is most of the CPU, and the launches and equal outputs do not need more
ARGS = ["--launch", "draft", "--prompts", "quick", "--limit", "2", "--max-tokens", "16", "--json"]


def _compare(extra: list[str], tmp_path, name: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["compare", *ARGS, *extra, "--save", str(tmp_path / f"{name}.jsonl")])
    assert code == 0, out.getvalue()[-2000:]
    return json.loads(out.getvalue())


def test_one_at_a_time_never_has_both_up_and_agrees_with_side_by_side(tmp_path):
    with watched() as (seen, shared):
        alone = _compare(["--one-at-a-time", "--repeat", "2"], tmp_path, "alone")
    assert max(len(s) for s in seen) == 1  # a server was up, and never two at once
    launched = set().union(*seen)
    assert len(launched) == 3  # B | C C | B: three launches for two runs
    assert not llama_children(shared)  # and none is left

    together = _compare([], tmp_path, "together")
    assert alone["params"]["order"] == "one-at-a-time"
    runs = [p for p in alone["prompts"] if p["run"] == 1]
    assert [p["id"] for p in runs] == [p["id"] for p in together["prompts"]]
    for a, b in zip(runs, together["prompts"]):
        assert a["verdict"]["status"] == b["verdict"]["status"] == "identical"
        for key in ("label_counts", "drafted", "accepted", "tokens", "output"):
            assert a["candidate"][key] == b["candidate"][key], key
        assert a["baseline"]["output"] == b["baseline"]["output"]


def test_one_at_a_time_needs_servers_spectui_can_start(capsys):
    code = main(["compare", "--baseline", "http://127.0.0.1:1", "--candidate", "http://127.0.0.1:2",
                 "--prompt", "x", "--one-at-a-time"])  # fmt: skip
    assert code == 2 and "give it with --launch" in capsys.readouterr().err


async def test_the_tui_plays_the_baseline_recording_beside_the_live_candidate():
    """One at a time in the TUI: the baseline runs alone first; then the candidate streams live while the
    baseline pane plays its recording; the verdict and labels are those of the pair, and the banner says
    the two were measured one after the other. Never both servers up."""
    from spectui.cli.demo import DEMO_PROMPT, demo_config, demo_servers
    from spectui.core.types import GenerationParams
    from spectui.machine.probes import GPUProbe
    from spectui.tui.app import make_app
    from tests.fakes import FakeNVML
    from tests.pilot import until

    _, base, cand = demo_servers("draft")
    cfg = demo_config(
        base,
        cand,
        one_at_a_time=True,
        pids={},
        params=GenerationParams(max_tokens=32, cache_prompt=False),
        gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
        autosave=False,
        triage=False,
    )
    app = make_app(cfg)
    most = 0
    shared = llama_children()
    async with app.run_test(size=(160, 50)) as pilot:

        def watch() -> bool:
            nonlocal most
            most = max(most, len(llama_children(shared)))
            return bool(app.results) and app.run_done.is_set()

        await until(pilot, watch, timeout=240, what="the one-at-a-time run")
        await pilot.pause()
        r = app.results[0]
        shown_b = app.pane("baseline").view.plain()
        banner = str(app.q("#banner").render())
        header = app.sub_title
    assert "measured one after the other" in header
    assert most == 1 and not llama_children(shared)
    assert (
        r.verdict.status == "identical"
        and r.baseline.output().decode() in shown_b.replace("⏎", "\n")
        or (r.baseline.output()[:20].decode(errors="ignore") in shown_b)
    )
    assert r.candidate.figures.drafted > 0 and r.candidate.figures.label_counts.get("accepted", 0) > 0
    assert "IDENTICAL" in banner
    assert DEMO_PROMPT  # the demo's own prompt was the one run
