"""Exact under sampling, on real llama-servers: seeded bytes, and the distributions themselves."""

from __future__ import annotations

import json

import pytest

from spectui.cli.main import main
from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv
from tests.oracles import check_sampling, sampling_exit, sampling_samples

# Both controls sample one short raw prompt: each sample pays its whole prompt (the sampling pass turns the
# prompt cache off), and on these 1-thread servers a prompt token costs about what a generated one does, so the
# chat template's 35 tokens ("Name a colour." as the controls first asked it) were over 80 % of their CPU. Measured
# here at N = 30, K = 4: the twin is `consistent` at seed bases 1000 to 6000 (detectable TVD 0.40–0.45, 3–4
# positions varying), where "Name a colour." under the template is `consistent` at 1000 only at the 0.50 limit
# and "not enough samples to decide" at 2000 (0.55).
PROMPT = ("--raw", "--prompt", "The capital of France is")


def sampling(capsys, baseline, candidate, *extra, save=None):
    """`spectui sampling --json`; with `save`, every sample is recorded and the JSON checked against it."""
    more = ["--save", str(save)] if save else []
    code = main(["sampling", "--baseline", baseline, "--candidate", candidate, "--json", *more, *extra])
    doc = json.loads(capsys.readouterr().out)
    if save:
        [p] = doc["prompts"]
        check_sampling(p, sampling_samples(save))
        assert code == sampling_exit(p)
    return code, doc


def test_draft_speculation_keeps_every_seeded_sample_byte_identical(llama_servers, capsys, tmp_path):
    code, doc = sampling(
        capsys,
        llama_servers["baseline"],
        llama_servers["draft"],
        "--prompt",
        "Tell me a short story about a cat.",
        "--temperature",
        "0.8",
        "--samples",
        "4",
        "--max-tokens",
        "16",
        save=tmp_path / "s.jsonl",
    )
    [p] = doc["prompts"]
    assert code == 0 and p["seeded_identical"] == 4 and p["samples"] == 4
    assert p["acceptance_rate"] is not None  # it did speculate at this temperature


def test_a_different_model_is_found_different(llama_servers, assets_found, capsys, tmp_path):
    """Positive control: the Q2_K draft file served as the candidate's main model, against the session's
    baseline (the same argv as a server of the Q4 file started here). Measured here on PROMPT: `different`
    at N = 40 for seed bases 1000 to 5000, p 0.005 at 1000 (0.001, the test's floor, at the other four),
    TVD 0.33–0.67 at the four positions."""
    with Launcher() as launcher:
        other = launcher.add(
            ServerProcess("q2", llama_server_argv(assets_found.llama_server, assets_found.draft_model, 0))
        )
        other.argv[other.argv.index("--port") + 1] = str(other.port)
        launcher.start_all(timeout=120)
        code, doc = sampling(
            capsys,
            llama_servers["baseline"],
            other.url,
            *PROMPT,
            "--temperature",
            "0.8",
            "--samples",
            "40",
            "--max-tokens",
            "4",
            save=tmp_path / "s.jsonl",
        )
    [p] = doc["prompts"]
    assert code == 3 and p["verdict"] == "different"
    assert any(t["p_adjusted"] < 0.05 for t in p["positions"])


def test_the_same_model_on_two_servers_is_consistent(llama_servers, assets_found, capsys, tmp_path):
    """Two processes serving the same model (not one server on both sides): every seed's bytes agree, so
    every position's TVD is 0 and nothing can be called different."""
    with Launcher() as launcher:
        twin = launcher.add(ServerProcess("twin", llama_server_argv(assets_found.llama_server, assets_found.model, 0)))
        twin.argv[twin.argv.index("--port") + 1] = str(twin.port)
        launcher.start_all(timeout=120)
        code, doc = sampling(
            capsys,
            llama_servers["baseline"],
            twin.url,
            *PROMPT,
            "--temperature",
            "0.8",
            "--samples",
            "30",  # 10 (and 20) could find only TVD ≥ 0.55 on this prompt: "not enough samples to decide"
            "--max-tokens",
            "4",
            "--distribution",
            save=tmp_path / "s.jsonl",
        )
    [p] = doc["prompts"]
    assert code == 0 and p["verdict"] == "consistent" and p["seeded_identical"] == 30, (
        p["verdict"],
        p["smallest_detectable_tvd"],
    )
    assert len(p["positions"]) == 4 and all(t["tvd"] == 0.0 for t in p["positions"])


@pytest.mark.parametrize("bad", [["--temperature", "0"], ["--samples", "1"], ["--max-tokens", "0"], ["--top-p", "1.5"]])
def test_invalid_inputs_are_usage_errors(bad):
    assert (
        main(
            ["sampling", "--baseline", "http://127.0.0.1:9", "--candidate", "http://127.0.0.1:9", "--prompt", "x", *bad]
        )
        == 2
    )
