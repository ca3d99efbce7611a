"""Repeated runs' figures on hand-made runs, against the README's rules written out in tests/oracles.py:
the geometric mean of the paired ratios with its 95 % t-interval on their logarithms (the t table, not scipy),
and the verdict the interval gives."""

from __future__ import annotations

import pytest

from spectui.core.events import StreamFinished
from spectui.core.figures import SideRecorder
from spectui.core.runner import PromptResult, Repeated
from spectui.core.types import Prompt
from tests.oracles import log_t_interval, verdict_by_hand


def repeated(ratios: list[float], accepted: list[int] | None = None) -> Repeated:
    prompt = Prompt("p")
    out = []
    for k, q in enumerate(ratios, 1):
        r = PromptResult(prompt, SideRecorder("b"), SideRecorder("c"), run=k, runs=len(ratios))
        r.baseline.figures.decode_tps, r.candidate.figures.decode_tps = 80.0, 80.0 * q
        r.candidate.figures.drafted, r.candidate.figures.accepted = 100, (accepted or [40] * len(ratios))[k - 1]
        for side in (r.baseline, r.candidate):
            side.finished = StreamFinished(1, "limit")
        out.append(r)
    return Repeated(prompt, out)


@pytest.mark.parametrize(
    "ratios",
    [
        [0.27, 0.28],
        [0.27, 0.28, 0.30],
        [1.01, 0.99, 1.03, 0.98],
        [1.2, 1.25, 1.22, 1.3, 1.18],
        [0.9, 1.1, 0.95, 1.05, 1.0, 1.02],
    ],
)
def test_the_speedup_interval_and_verdict_by_hand(ratios):
    rep = repeated(ratios)
    mid, low, high = log_t_interval(ratios)
    s = rep.speedup
    assert (s.median, s.low, s.high, s.n, s.level) == (
        pytest.approx(mid),
        pytest.approx(low),
        pytest.approx(high),
        len(ratios),
        0.95,
    )
    assert rep.verdict == verdict_by_hand(s.low, s.high, rep.tolerance)
    j = rep.to_json()
    assert j["runs"] == len(ratios) and j["verdict"] == rep.verdict and j["speedup"]["low"] == s.low
    assert j["decode_tps"]["baseline"]["median"] == 80.0 and j["acceptance_rate"] == [0.4] * len(ratios)


def test_an_acceptance_rate_that_moves_is_said():
    assert repeated([0.3, 0.3, 0.3]).acceptance_moved is False
    moved = repeated([0.3, 0.3, 0.3], accepted=[40, 41, 40])
    assert moved.acceptance_moved is True and moved.to_json()["acceptance_rate"] == [0.4, 0.41, 0.4]
