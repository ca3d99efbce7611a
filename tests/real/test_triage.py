"""Divergence triage on real llama-servers: the cause, with its evidence."""

from __future__ import annotations

import json

from spectui.cli.main import main

FIZZ = "Write a Python function fizzbuzz(n) that returns a list of strings for 1..n. Keep it short."


def compare(capsys, baseline, candidate, *extra):
    code = main(
        [
            "compare",
            "--baseline",
            baseline,
            "--candidate",
            candidate,
            "--prompt",
            FIZZ,
            "--max-tokens",
            "64",
            "--json",
            *extra,
        ]
    )
    return code, json.loads(capsys.readouterr().out)


def test_a_quantised_kv_cache_is_configuration_or_near_tie_with_logprob_evidence(llama_servers, capsys, tmp_path):
    session = tmp_path / "s.jsonl"
    code, doc = compare(capsys, llama_servers["baseline"], llama_servers["kvq4"], "--triage", "--save", str(session))
    assert code == 3
    t = doc["prompts"][0]["triage"]
    assert t["cause"] in ("configuration", "near-tie") and t["cause"] != "cache"
    # the evidence: both sides' own top tokens at the divergent position, and the margin between the two
    # tokens the sides chose there
    lp = t["logprobs"]
    assert lp["position"] == doc["prompts"][0]["first_divergence"]["baseline_token"]
    assert len(lp["baseline"]) == 3 and len(lp["candidate"]) == 3 and isinstance(lp["margin"], float)
    # both reruns reproduced their side (run-to-run is not the cause)
    assert [r["identical"] for r in t["reruns"]] == [True, True]
    # the session records it, and replay shows it without any server
    out = main(["replay", str(session), "--no-tui"])
    text = capsys.readouterr().out
    assert out == 3 and f"cause: {t['cause']}" in text


def test_identical_pairs_run_no_triage(llama_servers, capsys):
    code, doc = compare(capsys, llama_servers["baseline"], llama_servers["draft"], "--triage")
    assert code == 0 and doc["prompts"][0]["triage"] is None


def test_triage_never_touches_the_notebook_or_the_figures(llama_servers, capsys, tmp_path):
    nb = tmp_path / "nb.toml"
    code, doc = compare(capsys, llama_servers["baseline"], llama_servers["kvq4"], "--triage", "--notebook", str(nb))
    import tomllib

    rows = tomllib.loads(nb.read_text())["measurement"]
    assert len(rows) == 1 and rows[0]["cause"] == doc["prompts"][0]["triage"]["cause"]  # one entry, not one per rerun
    p = doc["prompts"][0]
    assert p["candidate"]["tokens"] == len(p["candidate"]["output"].encode()) or p["candidate"]["tokens"] <= 64
