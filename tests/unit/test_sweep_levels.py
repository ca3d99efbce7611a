"""A repeated sweep level on hand-made runs: medians, request and run numbers of a divergence, a failed run."""

from __future__ import annotations

import pytest

from spectui.core.compare import compare_tokens
from spectui.labs.sweep import Level, SideLevel


def level(runs, divergence_at, divergences, failed_runs=()):
    lv = Level(2, SideLevel([], 1.0), SideLevel([], 1.0), list(divergences))
    lv.runs, lv.divergence_at, lv.failed_runs = list(runs), list(divergence_at), list(failed_runs)
    return lv


def test_a_repeated_level_reports_medians_and_where_outputs_differed():
    d = compare_tokens([b"a", b"b"], [b"a", b"c"])
    lv = level(
        [(100.0, 30.0), (90.0, 36.0), (110.0, 33.0)],
        [(1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1)],
        [None, None, None, d, None, None],
    )
    assert lv.speedup == pytest.approx(0.3)  # ratios 0.30, 0.40, 0.30: median 0.30
    assert lv.throughput("baseline") == 100.0 and lv.throughput("candidate") == 33.0
    j = lv.to_json()
    assert j["runs"] == 3 and j["divergent_runs"] == [2]
    assert j["differing_requests"] == [1]  # the request within its run, not an index over all runs
    assert lv.identical is False and lv.compared == 6


def test_a_run_where_a_side_failed_leaves_the_level_without_a_verdict():
    lv = level([(100.0, 30.0), (None, 31.0)], [(1, 0), (1, 1)], [None, None], failed_runs=[2])
    assert lv.identical is None and lv.to_json()["failed_runs"] == [2]
