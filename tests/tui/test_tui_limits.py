"""The TUI keeps --idle-timeout, --deadline and the max_tokens overrun cap: a candidate that
sends only keep-alives fails on the idle timeout it was given, one that streams slowly without end fails at
its deadline, one that ignores max_tokens is stopped. Before, the settings row rebuilt the request's
parameters without the two limits, so such a stream ran for the defaults (120 s, an hour)."""

from __future__ import annotations

import time

import pytest

from spectui.core.types import GenerationParams, Prompt
from tests.pilot import ready, until
from tests.recorded_server import RecordedServer
from tests.recordings import BASELINE, payloads
from tests.unit.test_foreign_files_and_bad_readings import Misbehaving


@pytest.mark.parametrize(
    ("server", "params", "said"),
    [
        ({"keepalive": True}, GenerationParams(max_tokens=16, idle_timeout=1.5, deadline=60), "idle timeout"),
        ({"every": 0.1}, GenerationParams(max_tokens=1000, idle_timeout=30, deadline=2.0), "deadline of 2 s"),
        ({}, GenerationParams(max_tokens=8, idle_timeout=30, deadline=60), "overran max_tokens=8"),
    ],
    ids=["idle-timeout", "deadline", "max-tokens"],
)
async def test_the_tui_keeps_the_limits_it_was_given(server, params, said):
    from spectui.machine.probes import GPUProbe
    from spectui.tui.app import AppConfig, make_app
    from tests.fakes import FakeNVML

    with RecordedServer(payloads(BASELINE)) as b, Misbehaving(give_up=20, **server) as c:
        cfg = AppConfig(
            b.url,
            c.url,
            params=params,
            prompts=[Prompt("one", "code", [{"role": "user", "content": "fizzbuzz"}])],
            gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
            autosave=False,
            backend_kind="llama.cpp",
            triage=False,
        )
        app = make_app(cfg)
        async with app.run_test(size=(160, 50)) as pilot:
            await ready(pilot, app)
            t0 = time.monotonic()
            await pilot.press("ctrl+g")
            await until(pilot, lambda: app.run_done.is_set() and not app.running and app.results, 15, "the run")
            failed = app.results[0].candidate.failed
            assert failed is not None and said in failed.message, failed
            assert time.monotonic() - t0 < 15
