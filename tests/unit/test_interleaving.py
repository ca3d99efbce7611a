"""README: repeated runs are interleaved (B C, C B, B C, …) so drift on a shared machine falls on both sides
alike; `compare --repeat` and `sweep --repeat` alike. The order is read from which side's stream opened
first, on recorded streams played through the real run loop and sweep."""

from __future__ import annotations

import asyncio

from spectui.backends.recorded import ReplayBackend
from spectui.core.runner import run_prompts
from spectui.core.types import GenerationParams
from spectui.labs.sweep.levels import sweep
from spectui.store import prompts
from tests.recordings import BASELINE, DRAFT, INFO, payloads


class Logged(ReplayBackend):
    """A recorded stream that notes, in a shared list, when each of its streams opens."""

    def __init__(self, name: str, path, order: list[str]) -> None:
        super().__init__(f"replay://{name}", payloads(path), INFO, virtual_ms_per_event=1.0)
        self.name, self.order = name, order

    async def stream(self, prompt, params):
        self.order.append(self.name)
        async for ev in super().stream(prompt, params):
            yield ev


def test_compare_repeat_alternates_which_side_goes_first():
    order: list[str] = []
    b, c = Logged("B", BASELINE, order), Logged("C", DRAFT, order)
    results = asyncio.run(run_prompts(b, c, [prompts.single("x")], GenerationParams(max_tokens=64), repeat=4))
    assert order == ["B", "C", "C", "B", "B", "C", "C", "B"]
    assert [(r.run, r.runs) for r in results] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert all(r.identical for r in results)  # the two recordings agree byte for byte, every run


def test_sweep_repeat_alternates_which_side_goes_first_at_each_level():
    order: list[str] = []
    b, c = Logged("B", BASELINE, order), Logged("C", DRAFT, order)
    p = [prompts.single("x")]
    levels = asyncio.run(sweep(b, c, p, [1, 2], GenerationParams(max_tokens=64), repeat=3))
    # level 1: three runs of one request a side; level 2: three runs of two concurrent requests a side
    assert order == ["B", "C", "C", "B", "B", "C"] + ["B", "B", "C", "C", "C", "C", "B", "B", "B", "B", "C", "C"]
    assert [lv.concurrency for lv in levels] == [1, 2] and all(len(lv.runs) == 3 for lv in levels)
    assert [lv.compared for lv in levels] == [3, 6]  # every run's outputs compared, not only the first
