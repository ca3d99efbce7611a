"""Speed-ups with error bars on real llama-servers: repeated, interleaved runs."""

from __future__ import annotations

import json

from spectui.cli.main import main


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
            "32",
            "--repeat",
            str(repeat),
            "--json",
            *extra,
        ]
    )
    return code, json.loads(capsys.readouterr().out)


def test_the_same_server_on_both_sides_shows_no_measurable_difference(llama_servers, capsys):
    # One llama-server as both sides: two separately started identical servers are not identical in
    # speed on this 2-core machine (1-thread processes land on different cores beside the other test
    # servers): measured 1.013x [1.004-1.016] for a fresh twin alone, and [0.888-0.996] with the suite's
    # other servers up. With one process the interleaved ratio carries only the run-to-run noise, and
    # an order effect: the side that goes second can run a few % faster (seen: 1.003-1.117 over 5 runs,
    # three of them baseline-first). An even N lets both orders count alike, as the README advises.
    code, doc = run(capsys, llama_servers["baseline"], llama_servers["baseline"], 6)
    [rep] = doc["repeats"]
    assert code == 0 and rep["runs"] == 6 and rep["divergent_runs"] == []
    assert all(p["identical"] for p in doc["prompts"]) and [p["run"] for p in doc["prompts"]] == [1, 2, 3, 4, 5, 6]
    sp = rep["speedup"]
    assert sp["low"] <= 1.0 <= sp["high"] or (sp["low"] >= 0.98 and sp["high"] <= 1.02), sp
    assert rep["verdict"] == "no measurable difference"


def test_draft_speculation_on_this_cpu_is_slower_with_its_interval_below_one(llama_servers, capsys):
    code, doc = run(capsys, llama_servers["baseline"], llama_servers["draft"], 3)
    [rep] = doc["repeats"]
    assert rep["speedup"]["high"] < 1.0 and rep["verdict"] == "slower"
    assert rep["acceptance_moved"] is False  # temperature 0: the same drafts accepted every run


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
