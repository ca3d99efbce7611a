"""Speed-ups with error bars on real llama-servers: repeated, interleaved runs."""

from __future__ import annotations

import json

import pytest

from spectui.cli.main import main
from tests.oracles import log_t_interval, verdict_by_hand


def run(capsys, baseline, candidate, repeat, *extra):
    code = main(
        [
            "compare",
            "--baseline",
            baseline,
            "--candidate",
            candidate,
            "--prompt",
            "Write a Python function fizzbuzz(n).",
            "--max-tokens",
            "16",  # every run still drafts: the promises are the arithmetic, bytes and counters
            "--repeat",
            str(repeat),
            "--json",
            *extra,
        ]
    )
    return code, json.loads(capsys.readouterr().out)


def check_repeat(doc: dict, runs: int) -> dict:
    """What holds on any hardware: each run's ratio from its own figures, the median and the interval
    around it inside the runs' range, and the verdict the README's rule gives for that interval."""
    [rep] = doc["repeats"]
    assert rep["runs"] == runs and [p["run"] for p in doc["prompts"]] == list(range(1, runs + 1))
    ratios = [p["candidate"]["decode_tps"] / p["baseline"]["decode_tps"] for p in doc["prompts"]]
    mid, low, high = log_t_interval(ratios)
    sp = rep["speedup"]
    assert sp["n"] == runs and (sp["median"], sp["low"], sp["high"]) == pytest.approx((mid, low, high))
    assert rep["verdict"] == verdict_by_hand(sp["low"], sp["high"], rep["tolerance"])
    rates = [p["candidate"]["acceptance_rate"] for p in doc["prompts"]]
    assert rep["acceptance_rate"] == rates
    assert rep["acceptance_moved"] is (len({round(a, 6) for a in rates if a is not None}) > 1)
    assert rep["divergent_runs"] == [p["run"] for p in doc["prompts"] if not p["identical"]]
    return rep


def test_the_same_server_on_both_sides(llama_servers, capsys):
    # One llama-server as both sides, 6 runs (an even N, as the README advises: the side that runs
    # second can be a few % faster). Which verdict the interval gives depends on the machine's noise,
    # so the test checks the arithmetic and the rule, not the speed.
    code, doc = run(capsys, llama_servers["baseline"], llama_servers["baseline"], 6)
    rep = check_repeat(doc, 6)
    assert code == 0 and rep["divergent_runs"] == [] and all(p["identical"] for p in doc["prompts"])
    assert rep["acceptance_rate"] == [None] * 6  # nothing drafted: no rate, not 0 %


def test_draft_speculation_repeated_keeps_its_bytes_and_its_acceptance(llama_servers, capsys):
    code, doc = run(capsys, llama_servers["baseline"], llama_servers["draft"], 4)
    rep = check_repeat(doc, 4)
    assert code == 0 and rep["divergent_runs"] == []
    # the acceptance rate is the server's own counters' ratio, every run
    for p in doc["prompts"]:
        c = p["candidate"]
        assert c["drafted"] > 0 and c["acceptance_rate"] == pytest.approx(c["accepted"] / c["drafted"])


def test_repeat_zero_is_a_usage_error(capsys):
    assert (
        main(
            [
                "compare",
                "--baseline",
                "http://127.0.0.1:9",
                "--candidate",
                "http://127.0.0.1:9",
                "--prompt",
                "x",
                "--repeat",
                "0",
            ]
        )
        == 2
    )
