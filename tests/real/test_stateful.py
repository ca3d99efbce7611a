"""A drafter that keeps state between requests, on real llama-servers: a fresh `--spec-type ngram-mod`
candidate (its n-gram pool is shared by every request and only grows: common/speculative.cpp:1933-2000)
against a plain baseline over a few code prompts that repeat themselves, three passes. `compare --repeat 3`
and `prove` judge the cold pass (run 1 of each prompt) apart from the warm ones and say where the bytes moved;
the certificate says the drafter is stateful; the server's per-position counter is shown beside spectui's
count from the stream. And a `--spec-synth-len` server started outside spectui (a plain subprocess) is
triaged as lossy with the flag named, read from its process's command line.

Small in CPU: 3 prompts × 3 passes × 80 tokens, then prove at 2 runs on a fresh candidate (-t 1 each)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from spectui.backends.detect import resolve
from spectui.backends.transport import stamped_client
from spectui.cli.main import main
from spectui.core.runner import connect
from spectui.core.types import GenerationParams, Prompt
from spectui.core.warmth import warm_passes
from spectui.machine import assets
from spectui.machine.launcher import Launcher, ServerProcess, free_port, llama_server_argv
from spectui.run.prove.certificate import verify
from spectui.run.session import RunOptions, RunSession
from spectui.store.session import load_session, results_for

PROMPTS = """name = "repeating-code"

[[prompt]]
id = "stack"
category = "code"
text = "Write a Python class Stack with methods push, pop, peek, is_empty and size. Keep it short."

[[prompt]]
id = "queue"
category = "code"
text = "Write a Python class Queue with methods enqueue, dequeue, peek, is_empty and size. Keep it short."

[[prompt]]
id = "fizzbuzz"
category = "code"
text = "Write a Python function fizzbuzz(n) that returns a list of strings for 1..n. Keep it short."
"""
MAX_TOKENS = "80"


def _found() -> assets.Assets:
    found = assets.find_all()
    if not (found.llama_server and found.model):
        pytest.fail("llama-server or SmolLM2 missing: run `make test` (it runs `spectui setup`)")
    return found


@pytest.fixture
def fresh_pair():
    """A plain baseline and a fresh ngram-mod candidate, started for one test and stopped after it."""
    found = _found()
    launcher = Launcher()
    servers = {
        "baseline": launcher.add(ServerProcess("baseline", llama_server_argv(found.llama_server, found.model, 0))),
        "candidate": launcher.add(
            ServerProcess(
                "ngram-mod",
                llama_server_argv(found.llama_server, found.model, 0, extra=["--spec-type", "ngram-mod"]),
            )
        ),
    }
    for s in servers.values():
        s.argv[s.argv.index("--port") + 1] = str(s.port)
    launcher.start_all(timeout=120)
    try:
        yield {name: s.url for name, s in servers.items()}
    finally:
        launcher.stop_all()
    assert all(s.exited() is not None for s in servers.values())


def _prompts_file(tmp_path: Path) -> Path:
    path = tmp_path / "repeating-code.toml"
    path.write_text(PROMPTS, encoding="utf-8")
    return path


def test_compare_repeat_judges_the_cold_pass_apart_and_shows_the_servers_per_position_counter(
    fresh_pair, tmp_path, capsys
):
    session = tmp_path / "s.jsonl"
    code = main(
        ["compare", "--baseline", fresh_pair["baseline"], "--candidate", fresh_pair["candidate"]]
        + ["--prompts", str(_prompts_file(tmp_path)), "--repeat", "3", "--max-tokens", MAX_TOKENS]
        + ["--save", str(session), "--triage", "--triage-limit", "2"]
    )
    text = capsys.readouterr().out
    assert code in (0, 3), text
    # the label names the type as the request's final event reported it, and that it keeps state
    assert "spec ngram-mod (stateful: ngram-mod keeps state across requests)" in text
    results = results_for(load_session(session))
    assert len(results) == 9 and [r.run for r in results[:3]] == [1, 2, 3]
    for r in results:
        assert r.candidate.finished is not None
        assert r.candidate.finished.settings["speculative.types"] == "none,ngram-mod"  # a real final event
    # the state is real: the drafter drafts more once it has seen the prompts
    cold = sum(r.candidate.figures.drafted for r in results if r.run == 1)
    warm = sum(r.candidate.figures.drafted for r in results if r.run > 1) / 2
    assert warm > cold, (cold, warm)
    # the finding, from the verdicts themselves: each pass's differences as the runs recorded them
    w = warm_passes(results, "stateful: ngram-mod keeps state across requests")
    assert w is not None and [p.prompts for p in w.passes] == [3, 3, 3]
    for p in w.passes:
        assert p.differs == sum(1 for r in results if r.run == p.run and r.identical is False)
    assert f"{'warm passes':<18} {w.line}" in text
    if any(p.differs for p in w.warm):
        assert "differs warm on" in w.line
        # each difference triaged has its cause, beside the prompt
        triaged = [r for r in results if r.triage is not None]
        assert triaged and all(r.triage.cause for r in triaged)
    # the server's own per-position counter beside spectui's count from the stream, on every drafting run
    drafting = [r for r in results if r.candidate.figures.accepted]
    assert drafting and text.count("accepted per position: server ") == len(drafting)
    assert "DISAGREE" not in text or "steps merged" in text


def test_prove_certificate_of_a_stateful_drafter_says_so_and_covers_every_pass(fresh_pair, tmp_path, capsys):
    out = tmp_path / "cert"
    code = main(
        ["prove", "--baseline", fresh_pair["baseline"], "--candidate", fresh_pair["candidate"]]
        + ["--prompts", str(_prompts_file(tmp_path)), "--max-tokens", MAX_TOKENS, "--runs", "2"]
        + ["--sampled", "0", "--no-terms", "--triage-limit", "2", "-o", str(out), "--no-notebook"]
    )
    text = capsys.readouterr().out
    doc = json.loads((out / "certificate.json").read_text(encoding="utf-8"))
    assert code in (0, 3), text
    w = doc["derived"]["warm_passes"]
    assert w["stateful"] == "stateful: ngram-mod keeps state across requests"
    assert [p["pass"] for p in w["passes"]] == [1, 2] and w["cold_only"] == []
    # how warm: the requests the drafter had been sent before each warm run (prompt by prompt, 2 runs each)
    assert w["passes"][1]["requests_seen"] == [1, 5]
    # the verdict covers every pass: a prompt differing in its warm run only is a difference
    per = {p["id"]: p for p in doc["derived"]["greedy"]["per_prompt"]}
    assert doc["derived"]["greedy"]["differs"] == sum(1 for p in per.values() if "differs" in p["verdicts"])
    assert w["line"] in doc["verdict"]["line"]
    md = (out / "certificate.md").read_text(encoding="utf-8")
    assert "Warm passes (a stateful drafter)" in md
    # each prompt whose bytes moved: its cold run judged apart, the cause said where its cold run was identical
    moved = {p["id"]: p for p in w["prompts"]}
    assert set(moved) == {i for i, p in per.items() if "differs" in p["verdicts"]}
    for pid, p in moved.items():
        assert p["cold_identical"] == (per[pid]["verdicts"][0] == "identical")
        if p["state_dependent"]:
            assert f"{pid}: identical cold, differs in run(s)" in md and "state-dependent" in md
    assert verify(out / "certificate.json").ok  # derived again from the sessions, warm passes included
    # NVIDIA Model-Optimizer's profile beside the certificate, from the same runs
    prof = json.loads((out / "speculation_profile.json").read_text(encoding="utf-8"))
    assert prof["schema_version"] == "1.0" and prof["method"] == "ngram-mod"
    drafted = sum(a["drafted"] for a in w["passes"])
    assert prof["measured"] is (drafted > 0)


def test_a_stateful_drafter_needs_a_warm_pass_to_be_proven(fresh_pair, tmp_path, capsys):
    code = main(
        ["prove", "--baseline", fresh_pair["baseline"], "--candidate", fresh_pair["candidate"]]
        + ["--prompts", str(_prompts_file(tmp_path)), "--runs", "1", "-o", str(tmp_path / "c"), "--no-notebook"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "keeps state between requests" in err and "--runs 2" in err


def _wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "llama-server exited while starting"
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise AssertionError(f"{url} not healthy in {timeout} s")


async def _run(base_url: str, cand_url: str):
    async with stamped_client() as client:
        base, _ = await resolve("llama.cpp", base_url, client, None)
        cand, _ = await resolve("llama.cpp", cand_url, client, None)
        for b in (base, cand):
            await connect(b, 120)
        prompt = Prompt("fizz", messages=[{"role": "user", "content": "Write a Python function fizzbuzz(n)."}])
        # nothing launched: every setting comes from the processes' command lines
        session = RunSession(base, cand, GenerationParams(max_tokens=64, cache_prompt=False), RunOptions())
        result = (await session.run([prompt]))[0]
        return result, session.infos()["candidate"]


def test_a_lossy_server_started_outside_spectui_is_triaged_lossy_with_its_flag(fresh_pair):
    found = _found()
    port = free_port()
    argv = llama_server_argv(found.llama_server, found.model, port, extra=["-md", str(found.draft_model)])
    argv += ["--spec-type", "draft-simple", "--spec-synth-len", "3"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # not spectui's launcher
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, proc)
        result, info = asyncio.run(_run(fresh_pair["baseline"], url))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "--spec-synth-len 3: drafts accepted at random (lossy) (from the process command line)" in (
        info.describe_speedup()
    )
    assert result.verdict is not None and result.verdict.status == "differs"
    t = result.triage
    assert t is not None and t.cause == "lossy verification", t.summary if t else None
    assert "--spec-synth-len 3 (from the process command line)" in t.summary
    assert t.logprobs["lossy_settings_source"] == "from the process command line"
