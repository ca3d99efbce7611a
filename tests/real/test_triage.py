"""Divergence triage on real llama-servers: the cause, with its evidence."""

from __future__ import annotations

import json

from spectui.cli.main import main
from tests.oracles import cause_by_the_evidence

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
    """The cause with its evidence, saved and replayed; and --near-tie NATS decides between near-tie and
    configuration: the same divergence judged at a threshold above any exact margin (50) and below any."""
    session = tmp_path / "s.jsonl"
    code, doc = compare(
        capsys, llama_servers["baseline"], llama_servers["kvq4"], "--triage", "--near-tie", "50", "--save", str(session)
    )
    assert code == 3
    t = doc["prompts"][0]["triage"]
    # both reruns reproduced their side (not run-to-run); above any exact margin: a near-tie where the margin is
    # exact, else (a bound only) the configuration
    assert t["cause"] == cause_by_the_evidence(t, 50.0)
    # the evidence: both sides' own top tokens at the divergent position, and the margin between the two
    # tokens the sides chose there (exact, or a bound where a chosen token was outside a side's top 3)
    lp = t["logprobs"]
    assert lp["position"] == doc["prompts"][0]["first_divergence"]["baseline_token"]
    assert len(lp["baseline"]) == 3 and len(lp["candidate"]) == 3
    assert isinstance(lp["margin"], float) or isinstance(lp.get("margin_bound"), float), lp
    # M = 1 vs M = k + 1 on each side, each shape the batch the server says it processed; the baseline's own
    # one-token decode at that position picks the token the baseline generated there (it was made that way)
    shapes, width = lp["batch_shapes"], lp["batch_width"]
    assert set(shapes) == {"baseline", "candidate"} and width == 4  # no drafts: llama.cpp's default 3 + 1
    for per in shapes.values():
        assert per["1"]["processed"] == 1 and per[str(width)]["processed"] == width
        assert all(s["margin"] >= 0 for s in per.values())
    assert shapes["baseline"]["1"]["top"] == lp["baseline_token"]
    assert "batch shape:" in t["summary"]
    # the session records it, and replay shows it without any server
    out = main(["replay", str(session), "--no-tui"])
    text = capsys.readouterr().out
    assert out == 3 and f"cause: {t['cause']}" in text
    # below any margin: the same divergence is a configuration difference
    code, doc = compare(capsys, llama_servers["baseline"], llama_servers["kvq4"], "--triage", "--near-tie", "0.000001")
    low = doc["prompts"][0]["triage"]
    assert code == 3 and low["cause"] == cause_by_the_evidence(low, 0.000001) == "configuration"


def test_identical_pairs_run_no_triage(llama_servers, capsys):
    # 16 tokens (the last --max-tokens given wins): identical is all this needs, and the draft pair is the
    # suite's costliest per token
    code, doc = compare(capsys, llama_servers["baseline"], llama_servers["draft"], "--triage", "--max-tokens", "16")
    assert code == 0 and doc["prompts"][0]["triage"] is None and doc["prompts"][0]["candidate"]["tokens"] == 16


def test_triage_never_touches_the_notebook_or_the_figures(llama_servers, assets_found, capsys, tmp_path):
    import tomllib

    import httpx

    from spectui.backends.metrics import PREDICTED, parse_metrics, total
    from spectui.machine.launcher import Launcher
    from tests.conftest import server_spec

    nb = tmp_path / "nb.toml"
    # a q4_0 candidate of its own: the /metrics counters of a server other tests share can still move
    # from their requests (a cancelled stream finishes generating after the test that cancelled it)
    with Launcher() as launcher:
        kvq4 = launcher.add(server_spec("kvq4", assets_found))
        kvq4.argv[kvq4.argv.index("--port") + 1] = str(kvq4.port)
        launcher.start_all(timeout=120)

        def predicted():  # the candidate server's own count of every token it generated
            return total(parse_metrics(httpx.get(kvq4.url + "/metrics").text), PREDICTED)

        before = predicted()
        code, doc = compare(capsys, llama_servers["baseline"], kvq4.url, "--triage", "--notebook", str(nb))
        generated = predicted() - before
    rows = tomllib.loads(nb.read_text())["measurement"]
    assert len(rows) == 1 and rows[0]["cause"] == doc["prompts"][0]["triage"]["cause"]  # one entry, not one per rerun
    tokens = doc["prompts"][0]["candidate"]["tokens"]
    # the server made the run's tokens, the identical rerun's, one for the log-probability request, two for
    # each batch shape asked (a priming request and the asking one, n_predict 1 each), and its own decode
    # again with n_probs up to and including the divergent token (position + 1); the figures report only
    # the run's
    evidence = doc["prompts"][0]["triage"]["logprobs"]
    shapes = len((evidence.get("batch_shapes") or {}).get("candidate") or {})
    own = evidence["position"] + 1
    assert generated == 2 * tokens + 1 + 2 * shapes + own, (generated, tokens, shapes, own)


def test_a_prompt_cache_hit_that_changes_the_output_is_cause_cache(capsys, tmp_path):
    """A baseline that never caches against a candidate that reuses the whole prompt (warmed by one
    request first): on chat-pets the cache hit changed SmolLM2's greedy output here (89 tokens reused)."""
    import httpx
    import tomli_w

    from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv
    from spectui.store.prompts import load_set
    from tests.conftest import _need_assets

    found = _need_assets()
    pets = next(p for p in load_set("default")[1] if p.id == "chat-pets")
    prompts = tmp_path / "pets.toml"
    prompts.write_text(tomli_w.dumps({"name": "pets", "prompt": [{"id": pets.id, "messages": pets.messages}]}))
    with Launcher() as launcher:
        cold = launcher.add(
            ServerProcess("cold", llama_server_argv(found.llama_server, found.model, 0, extra=["--no-cache-prompt"]))
        )
        warm = launcher.add(ServerProcess("warm", llama_server_argv(found.llama_server, found.model, 0)))
        for s in (cold, warm):
            s.argv[s.argv.index("--port") + 1] = str(s.port)
        launcher.start_all(timeout=120)
        text = httpx.post(warm.url + "/apply-template", json={"messages": pets.messages}).json()["prompt"]
        httpx.post(warm.url + "/completion", json={"prompt": text, "n_predict": 1}, timeout=60)
        code = main(
            [
                "compare",
                "--baseline",
                cold.url,
                "--candidate",
                warm.url,
                "--prompts",
                str(prompts),
                "--max-tokens",
                "64",
                "--cache-prompt",
                "server",
                "--triage",
                "--json",
            ]
        )
        doc = json.loads(capsys.readouterr().out)
    p = doc["prompts"][0]
    assert code == 3 and p["baseline"]["prompt_cached"] == 0 and p["candidate"]["prompt_cached"] > 0
    t = p["triage"]
    assert t["cause"] == "cache", t
    cold_rerun = t["reruns"][-1]
    assert cold_rerun["identical"] is True and "without its prompt cache" in cold_rerun["what"]
