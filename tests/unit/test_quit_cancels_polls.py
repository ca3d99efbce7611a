"""Quitting the TUI cancels its KV poll even when the poll's answer arrives at that moment.

Textual stops an app's interval timers by cancelling each timer's task and awaiting it. The KV poll
(tui/supervisor.py poll_kv) runs in such a task. Bounded with Python 3.11's asyncio.wait_for, a poll
whose answer came in the same turn of the loop as the cancel returned the answer and dropped the
cancel: the timer ticked on (doing nothing, the app exiting) and the quit awaited it for ever — the
300 s hang of tests/real/test_launcher_profiles.py's launch test on a loaded machine (seen there with
the loop idle and the timer's task "cancelling"). Here the answer lands 0 to 7 loop turns before the
cancel, which covers the turn where wait_for lost it.
"""

from __future__ import annotations

import asyncio

import pytest

from spectui.machine.probes import GPUProbe
from spectui.tui.config import AppConfig
from spectui.tui.supervisor import ServerSupervisor
from tests.fakes import FakeNVML


class AnsweringBackend:
    def __init__(self, answer: asyncio.Future) -> None:
        self.answer = answer

    async def kv_usage(self):
        return await self.answer


@pytest.fixture(autouse=True)
def _no_poll_timeout_in_the_window(monkeypatch):
    """The poll's own 0.8 s bound (asyncio.timeout) stretched to 600 s: a loaded machine that stalls this
    process for 0.8 s between the loop turns below would end the poll by its timeout (answer None), not by
    the answer or the cancel under test. What is tested, a cancel that lands as the answer does, is the same."""
    real = asyncio.timeout
    monkeypatch.setattr(asyncio, "timeout", lambda delay: real(None if delay is None else max(delay, 600.0)))


@pytest.mark.parametrize("turns", range(8))
async def test_a_poll_answered_as_the_quit_cancels_it_is_cancelled(turns):
    answer = asyncio.get_running_loop().create_future()
    config = AppConfig("http://127.0.0.1:1", "http://127.0.0.1:2", gpu_probe=GPUProbe(FakeNVML(fail_init=True)))
    supervisor = ServerSupervisor(config, lambda message: None)
    supervisor.backends = {"baseline": AnsweringBackend(answer)}  # type: ignore[dict-item]
    polling = asyncio.ensure_future(supervisor.poll_kv({"baseline"}))  # the sides connected
    for _ in range(3):
        await asyncio.sleep(0)
    assert not polling.done(), "the poll waits for its answer"
    answer.set_result((5, 100))
    for _ in range(turns):
        await asyncio.sleep(0)
    if polling.done():  # it finished before the quit: there was no cancel to lose
        assert supervisor.kv["baseline"] == (5, 100)
        return
    polling.cancel()
    with pytest.raises(asyncio.CancelledError):
        await polling
