"""Snapshot tests of the main TUI states (pytest-textual-snapshot), from replayed real streams.

Replay with a virtual clock makes the figures the same every run; the real-server behaviour of the
same states is covered by tests/test_tui_real.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from spectui.backends.recorded import ReplayBackend, load_payloads
from spectui.core.types import GenerationParams, ServerInfo
from spectui.machine.probes import GPUProbe, HostSample
from spectui.tui.app import AppConfig, make_app
from tests.fakes import FakeNVML
from tests.pilot import settled, until

DATA = Path(__file__).parent.parent / "data"
BASE = load_payloads(DATA / "llamacpp-b11434-baseline-fizzbuzz.sse")
DRAFT = load_payloads(DATA / "llamacpp-b11434-draft-simple-fizzbuzz.sse")


def diverging(payloads):
    """The draft stream with one token's text changed, as a lossy KV cache would."""
    out = [dict(p) for p in payloads]
    out[12]["content"] = " fizz"
    return out


def make(candidate="draft", fail_after=None, size_note="", pace="fixed"):
    """pace "fixed": the same picture every time; "recorded": arrivals as the recordings' timings say (what a
    certificate made on screen needs to verify)."""
    infos = {
        "replay://baseline": ServerInfo(
            "http://127.0.0.1:8080",
            build="b11434-pypi",
            model="SmolLM2-135M-Instruct.Q4_1.gguf",
            speculative={"type": "none"},
        ),
        "replay://candidate": ServerInfo(
            "http://127.0.0.1:8081",
            build="b11434-pypi",
            model="SmolLM2-135M-Instruct.Q4_1.gguf",
            speculative={"type": "draft-simple", "n_max": 8},
        ),
    }
    streams = {"replay://baseline": BASE, "replay://candidate": DRAFT if candidate == "draft" else diverging(DRAFT)}

    def factory(url, client):
        return ReplayBackend(
            url,
            streams[url],
            infos[url],
            virtual_ms_per_event=12.5,
            pace=pace,
            fail_after=fail_after if url.endswith("candidate") else None,
        )

    cfg = AppConfig(
        "replay://baseline",
        "replay://candidate",
        params=GenerationParams(max_tokens=64),
        backend_factory=factory,
        gpu_probe=GPUProbe(FakeNVML()),
        host_probe=lambda: HostSample(2, 12.0, 3 * 1024**3, 24 * 1024**3, "x86_64", "Linux"),
        probe_interval=3600,
        autosave=False,
        initial_prompt="Write a Python function fizzbuzz(n).",
    )
    return make_app(cfg)


async def steady(pilot):
    """Both panes connected and the live panel's one sample drawn (the probe thread posts it: on a loaded
    machine it can come after the screen looked settled), and no blinking cursor: its phase at capture
    time made the picture differ between runs."""
    from spectui.tui.widgets.panes import LivePanel

    app = pilot.app
    await until(
        pilot,
        lambda: all(app.pane(s).state == "ready" for s in ("baseline", "candidate")),
        what="both panes to connect",
    )
    await until(pilot, lambda: app.q(LivePanel).history["host"], what="the live panel's first sample")
    for inp in app.query("Input"):
        inp.cursor_blink = False
    await settled(pilot)


async def run_and_wait(pilot):
    app = pilot.app
    await steady(pilot)
    app.action_run()
    await asyncio.wait_for(app.run_done.wait(), 60)  # a deadline: a run that never ends fails, not hangs
    await settled(pilot)


@pytest.mark.parametrize("size", [(160, 48), (90, 60)], ids=["wide", "narrow"])
def test_idle(snap_compare, size):
    assert snap_compare(make(), terminal_size=size, run_before=steady)


@pytest.mark.parametrize("size", [(160, 48), (90, 60)], ids=["wide", "narrow"])
def test_identical(snap_compare, size):
    assert snap_compare(make(), terminal_size=size, run_before=run_and_wait)


def test_diverged(snap_compare):
    assert snap_compare(make("diverge"), terminal_size=(160, 48), run_before=run_and_wait)


def test_failed(snap_compare):
    assert snap_compare(make(fail_after=20), terminal_size=(160, 48), run_before=run_and_wait)


def test_diff_view(snap_compare):
    async def open_diff(pilot):
        await run_and_wait(pilot)
        await pilot.press("ctrl+d")
        await settled(pilot)

    assert snap_compare(make("diverge"), terminal_size=(160, 48), run_before=open_diff)


def test_streaming(snap_compare):
    """Mid-stream: the baseline done, the candidate part-way (its stream stalls after 30 tokens)."""

    async def part_way(pilot):
        app = pilot.app
        await steady(pilot)
        backend = app.backends["candidate"]
        head = backend.payloads[:30]
        original = backend.stream

        async def stalled(prompt, params):
            backend.payloads = head
            async for ev in original(prompt, params):
                yield ev
            await asyncio.Event().wait()  # no final event: the pane stays streaming

        backend.stream = stalled
        app.action_run()
        await until(
            pilot,
            lambda: len(app.recorders["candidate"].tokens) >= 30 and not app.runs.pending["candidate"],
            timeout=60,
            what="30 candidate tokens drawn",
        )
        await settled(pilot)

    assert snap_compare(make(), terminal_size=(160, 48), run_before=part_way)


# 80x24 after a divergence is left to tests/tui/test_small_terminals.py, which asserts its rows in numbers: its
# picture's candidate-pane scroll offset differed in one of two whole-suite runs (cause not yet found)
@pytest.mark.parametrize(
    ("size", "kind"),
    [((80, 24), "draft"), ((120, 40), "draft"), ((120, 40), "diverge")],
    ids=["80x24-finished", "120x40-finished", "120x40-diverged"],
)
def test_small_terminals(snap_compare, size, kind):
    """The answer on screen at 80x24 and 120x40: the headline, each output with 6+ rows, the live panel
    folded to one line below 30 rows (tests/tui/test_small_terminals.py asserts the same in numbers)."""

    async def finished(pilot):
        await run_and_wait(pilot)
        if kind == "diverge":  # triage's cause line lands after the run: wait for it, not for a quiet moment
            banner = pilot.app.q("#banner")
            await until(pilot, lambda: "cause:" in str(banner.render()), 60, "triage's cause under the verdict")
            await settled(pilot)

    assert snap_compare(make(kind), terminal_size=size, run_before=finished)
