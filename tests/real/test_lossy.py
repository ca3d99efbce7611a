"""Lossy verification named at the first difference, on real llama-servers: a candidate that accepts drafts
at random (llama.cpp's benchmarking-only `--spec-synth-len`) against a plain baseline, and a lossless
draft-simple candidate on the same prompt."""

from __future__ import annotations

import asyncio

from spectui.backends.detect import resolve
from spectui.backends.launchspec import LaunchSpec
from spectui.backends.transport import stamped_client
from spectui.core.runner import connect
from spectui.core.types import GenerationParams, Prompt
from spectui.machine.launcher import Launcher
from spectui.run.session import RunOptions, RunSession
from tests.conftest import server_spec

PROMPT = Prompt("fizz", messages=[{"role": "user", "content": "Write a Python function fizzbuzz(n). Keep it short."}])


async def _run(base_url: str, cand_url: str, cand_argv: list[str]):
    async with stamped_client() as client:
        base, _ = await resolve("llama.cpp", base_url, client, None)
        cand, _ = await resolve("llama.cpp", cand_url, client, None)
        for b in (base, cand):
            await connect(b, 120)
        options = RunOptions(launched={"candidate": LaunchSpec.from_argv(cand_argv)})
        session = RunSession(base, cand, GenerationParams(max_tokens=64, cache_prompt=False), options)
        return (await session.run([PROMPT]))[0]


def _token_at(result, k):
    return result.candidate.tokens[k]


def test_a_random_verifier_is_named_lossy_with_its_flag(llama_servers, assets_found):
    with Launcher() as launcher:
        synth = launcher.add(server_spec("draft", assets_found, extra=("--spec-synth-len", "3")))
        synth.argv[synth.argv.index("--port") + 1] = str(synth.port)
        launcher.start_all(timeout=120)
        result = asyncio.run(_run(llama_servers["baseline"], synth.url, synth.argv))
    assert result.verdict is not None and result.verdict.status == "differs"
    t = result.triage
    assert t is not None
    k = result.divergence.candidate_token
    # on a common prefix the target's own token equals the baseline's, so the first difference is a draft
    # accepted at random
    assert _token_at(result, k).label == "accepted"
    assert t.cause == "lossy verification", t.summary
    assert "--spec-synth-len 3" in t.summary and "would not choose" in t.summary
    # the margin is the candidate target's own log-probabilities, as the evidence records them
    lp = t.logprobs
    assert lp is not None and lp["lossy_margin"] >= 0.05
    assert lp["lossy_settings"] == ["--spec-synth-len 3"]


def test_a_lossless_draft_on_the_same_prompt_stays_identical(llama_servers):
    draft = llama_servers["_procs"]["draft"]
    result = asyncio.run(_run(llama_servers["baseline"], llama_servers["draft"], draft.argv))
    assert result.verdict is not None and result.verdict.status == "identical"
    assert result.triage is None
