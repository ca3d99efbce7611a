"""A repeated sweep level on hand-made runs: medians, request and run numbers of a divergence, a failed run."""

from __future__ import annotations

import pytest

from spectui.core.compare import compare_tokens
from spectui.core.verdict import Verdict
from spectui.labs.sweep.levels import Level, SideLevel


def level(runs, divergence_at, divergences, failed_runs=()):
    verdicts = [
        Verdict("identical")
        if d is None
        else (
            Verdict("failed", reason="baseline failed: x")
            if d == "failed"
            else Verdict("differs", "text", d, "bytes differ")
        )
        for d in divergences
    ]
    lv = Level(2, SideLevel([], 1.0), SideLevel([], 1.0), verdicts)
    lv.runs, lv.divergence_at, lv.failed_runs = list(runs), list(divergence_at), list(failed_runs)
    return lv


def test_a_repeated_level_reports_medians_and_where_outputs_differed():
    d = compare_tokens([b"a", b"b"], [b"a", b"c"])
    lv = level(
        [(100.0, 30.0), (90.0, 36.0), (110.0, 33.0)],
        [(1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1)],
        [None, None, None, d, None, None],
    )
    # ratios 0.30, 0.40, 0.30: their geometric mean (the centre of the interval; the median would say 0.30)
    assert lv.speedup == pytest.approx((0.3 * 0.4 * 0.3) ** (1 / 3))
    assert lv.throughput("baseline") == 100.0 and lv.throughput("candidate") == 33.0
    j = lv.to_json()
    assert j["runs"] == 3 and j["divergent_runs"] == [2]
    assert j["differing_requests"] == [1]  # the request within its run, not an index over all runs
    assert lv.identical is False and lv.compared == 6


def test_a_run_where_a_side_failed_leaves_the_level_without_a_verdict():
    lv = level([(100.0, 30.0), (None, 31.0)], [(1, 0), (1, 1), (2, 0)], [None, None, "failed"], failed_runs=[2])
    assert lv.identical is None and lv.to_json()["failed_runs"] == [2]
    assert lv.outputs_text() == "2/2 identical; 1 not compared: baseline failed: x"
    assert lv.throughput("baseline") == 100.0  # the failed run's side gave no rate


class PacedSide(SideLevel):
    """A side whose streams ran at a given per-request rate (no recorders needed)."""

    def __init__(self, tps: float, lags_ms: list[float]) -> None:
        super().__init__([], 1.0, read_lag_ns=[int(x * 1e6) for x in lags_ms])
        self._tps = tps

    @property
    def per_request_tps(self) -> float:
        return self._tps


def test_a_client_that_read_late_says_so_and_one_that_kept_up_does_not():
    from spectui.labs.sweep.levels import text_table

    kept_up = PacedSide(50.0, [0.1] * 99 + [3.0])  # p99 ≈ 3 ms against a 20 ms gap between tokens
    behind = PacedSide(50.0, [1.0] * 90 + [36.0] * 10)  # p99 36 ms: a read can hold two of a stream's tokens
    assert not kept_up.client_behind and behind.client_behind
    assert behind.to_json()["client_read_lag_ms"]["p99"] == pytest.approx(36.0)
    assert behind.to_json()["client_behind"] is True
    table = text_table([Level(256, behind, kept_up, [])])
    assert "client behind at 256 (baseline): reads lagged their packets by 36 ms (p99)" in table
    assert "(candidate)" not in table
    unmeasured = SideLevel([], 1.0).to_json()  # no kernel stamps: nothing claimed either way
    assert unmeasured["client_read_lag_ms"] is None and unmeasured["client_behind"] is None
