"""Exact under sampling, on real llama-servers: seeded bytes, and the distributions themselves."""

from __future__ import annotations

import json

import pytest

from spectui.cli.main import main
from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv
from tests.conftest import _need_assets
from tests.oracles import check_sampling, sampling_exit, sampling_samples


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


def test_a_different_model_is_found_different(capsys, tmp_path):
    """Positive control: the Q2_K draft file served as the candidate's main model (measured here: all 4
    positions different at N = 40, TVD 0.47 at the first token)."""
    found = _need_assets()
    with Launcher() as launcher:
        base = launcher.add(ServerProcess("q4", llama_server_argv(found.llama_server, found.model, 0)))
        other = launcher.add(ServerProcess("q2", llama_server_argv(found.llama_server, found.draft_model, 0)))
        for s in (base, other):
            s.argv[s.argv.index("--port") + 1] = str(s.port)
        launcher.start_all(timeout=120)
        code, doc = sampling(
            capsys,
            base.url,
            other.url,
            "--prompt",
            "Name a colour.",
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
            "--prompt",
            "Name a colour.",
            "--temperature",
            "0.8",
            "--samples",
            "30",  # 10 (and 20) could find only TVD ≥ 0.55: "not enough samples to decide" since issue 36
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
