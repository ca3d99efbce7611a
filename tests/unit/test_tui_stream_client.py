"""The TUI streams through the same client as `compare` (backends/transport.py: kernel arrival stamps), and
says so where that client cannot be built. Driven over HTTP by scripted servers replaying a recorded
llama-server stream (tests/recorded_server.py)."""

from __future__ import annotations

import httpx
import pytest

from tests.recorded_server import RecordedServer
from tests.recordings import BASELINE, payloads


@pytest.fixture
def pair():
    with RecordedServer(payloads(BASELINE)) as b, RecordedServer(payloads(BASELINE)) as c:
        yield b, c


def _app(b, c, tmp_path):
    from spectui.core.types import GenerationParams
    from spectui.machine.probes import GPUProbe
    from spectui.tui.app import AppConfig, make_app
    from tests.fakes import FakeNVML

    cfg = AppConfig(
        b.url,
        c.url,
        params=GenerationParams(max_tokens=64),
        gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
        initial_prompt="fizzbuzz",
        autorun=True,
        autosave=False,
        session_dir=tmp_path,
        backend_kind="llama.cpp",
        triage=False,
    )
    return make_app(cfg)


async def test_the_tui_streams_through_compares_client_and_closes_it(pair, tmp_path):
    from spectui.backends.transport import BODY_CHUNKS
    from tests.pilot import until

    b, c = pair
    app = _app(b, c, tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: app.client is not None, timeout=60, what="the app's client")
        assert type(app.client._transport).__name__ == "StampedTransport"
        response = await app.client.get(f"{b.url}/health")  # answered through the stamped transport
        assert response.status_code == 200 and BODY_CHUNKS in response.extensions
        await until(pilot, lambda: len(app.results) == 1 and app.run_done.is_set(), timeout=60, what="the run")
        assert app.results[0].verdict.status == "identical"
        assert not any("no stamped client" in n.message for n in app._notifications)
        client = app.client
    assert client.is_closed, "quitting closes the client"


async def test_without_the_stamped_client_the_tui_times_with_its_own_clock_and_says_so(pair, tmp_path, monkeypatch):
    from spectui.backends import transport
    from tests.pilot import until

    def unavailable(*args, **kwargs):
        raise ImportError("No module named 'aiohttp'")

    monkeypatch.setattr(transport, "stamped_client", unavailable)
    b, c = pair
    app = _app(b, c, tmp_path)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(
            pilot,
            lambda: any("no stamped client, timing by the app's clock" in n.message for n in app._notifications),
            timeout=60,
            what="the notice that the app times with its own clock",
        )
        assert isinstance(app.client, httpx.AsyncClient)
        assert type(app.client._transport).__name__ == "AsyncHTTPTransport"
        await until(pilot, lambda: len(app.results) == 1 and app.run_done.is_set(), timeout=60, what="the run")
        assert app.results[0].verdict.status == "identical"
