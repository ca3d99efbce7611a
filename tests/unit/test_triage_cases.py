"""Triage's cause on scripted llama-servers that replay a recorded stream (tests/data), varied only where
the case needs it: a prompt-cache hit that changes the output, and log-probabilities whose margin is a
bound (a chosen token missing from a side's top-k)."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path

import httpx

from spectui.backends.llamacpp import LlamaCppBackend
from spectui.core.runner import compare_prompt
from spectui.core.types import GenerationParams, Prompt
from spectui.run.triage import triage

RECORDED = Path(__file__).parents[1] / "data" / "llamacpp-b11434-baseline-fizzbuzz.sse"
EVENTS = [json.loads(line[6:]) for line in RECORDED.read_text().splitlines() if line.startswith("data: ")]
PROMPT_IDS = list(range(1, 58))  # the recorded prompt was 57 tokens


def sse(change_at: int | None = None, cache_n: int = 0) -> bytes:
    """The recorded stream, its token `change_at` replaced by another (id 9999, text " else"), every
    timings.cache_n set to `cache_n`."""
    out = []
    for i, ev in enumerate(EVENTS):
        ev = copy.deepcopy(ev)
        if i == change_at:
            ev["content"], ev["tokens"] = " else", [9999]
        if "timings" in ev:
            ev["timings"]["cache_n"] = cache_n
            ev["timings"]["prompt_n"] = 57 - cache_n
        out.append("data: " + json.dumps(ev) + "\n\n")
    return "".join(out).encode()


class ScriptedServer:
    """A llama-server that replays the recording: with `cache_changes_at`, a request that finds its prompt
    cached (cache_prompt on, the prompt seen before) answers with token `cache_changes_at` changed; with
    `differs_at`, every answer has that token changed. `top` is its /completion n_probs answer."""

    def __init__(self, differs_at=None, cache_changes_at=None, top=None, nondeterministic_at=None):
        self.differs_at, self.cache_changes_at, self.top = differs_at, cache_changes_at, top
        self.nondeterministic_at = nondeterministic_at
        self.seen: set[str] = set()
        self.streams = 0

    def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/tokenize":
            return httpx.Response(200, json={"tokens": PROMPT_IDS})
        if path.startswith("/slots"):
            return httpx.Response(501, json={"error": {"message": "slot save path not set"}})
        if path == "/metrics":
            return httpx.Response(501, text="metrics off")
        if path == "/completion":
            body = json.loads(request.content)
            if body.get("n_probs"):
                top = [{"id": i, "token": t, "logprob": lp} for i, t, lp in self.top]
                return httpx.Response(200, json={"completion_probabilities": [{"top_logprobs": top}]})
            self.streams += 1
            cached = body.get("cache_prompt", True) and body["prompt"] in self.seen
            self.seen.add(body["prompt"])
            at = self.differs_at
            if cached and self.cache_changes_at is not None:
                at = self.cache_changes_at
            if self.nondeterministic_at is not None and self.streams % 2 == 0:
                at = self.nondeterministic_at
            return httpx.Response(
                200, content=sse(at, 56 if cached else 0), headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(404)


def run(baseline: ScriptedServer, candidate: ScriptedServer, params: GenerationParams):
    async def go():
        async with (
            httpx.AsyncClient(transport=httpx.MockTransport(baseline.handler)) as cb,
            httpx.AsyncClient(transport=httpx.MockTransport(candidate.handler)) as cc,
        ):
            b, c = LlamaCppBackend("http://b", cb), LlamaCppBackend("http://c", cc)
            result = await compare_prompt(b, c, Prompt("fizz", raw="Write fizzbuzz."), params)
            assert result.divergence is not None
            return await triage(b, c, result, params)

    return asyncio.run(go())


def test_a_cache_effect_on_the_same_conditions_rerun_is_not_nondeterminism():
    # the prompt cache on: the baseline's first run is cold, its rerun finds the prompt cached and the hit
    # changes its output at token 3 — the same change the candidate had (its prompt was warm)
    baseline = ScriptedServer(cache_changes_at=3)
    candidate = ScriptedServer(cache_changes_at=3)
    candidate.seen.add("Write fizzbuzz.")
    t = run(baseline, candidate, GenerationParams(max_tokens=64, cache_prompt=True))
    assert t.cause == "cache", t.to_json()
    assert "56 tokens reused" in t.summary


def test_a_cache_effect_that_does_not_explain_the_divergence_goes_on_to_the_other_steps():
    # both cold at first; the reruns find their prompts cached and change; cold, each reproduces itself
    # but the two still differ (at token 5): the cache is noted, the cause is elsewhere
    baseline = ScriptedServer(cache_changes_at=3, top=[(9424, "izz", -0.1), (9999, " else", -2.6), (7, "x", -4.0)])
    candidate = ScriptedServer(  # its distribution differs from the baseline's: the cause is configuration
        differs_at=5, cache_changes_at=3, top=[(9999, " else", -0.1), (9424, "izz", -2.6), (7, "x", -4.0)]
    )
    t = run(baseline, candidate, GenerationParams(max_tokens=64, cache_prompt=True))
    assert t.cause == "configuration", t.to_json()
    assert any("prompt cache changes its output" in n for n in t.notes)


def test_two_cold_runs_that_differ_are_still_nondeterminism():
    baseline = ScriptedServer(nondeterministic_at=8)  # every second request changes token 8
    candidate = ScriptedServer(differs_at=5)
    t = run(baseline, candidate, GenerationParams(max_tokens=64, cache_prompt=False))
    assert t.cause == "nondeterminism", t.to_json()


def test_with_the_cache_on_two_cold_runs_that_differ_are_nondeterminism_after_the_cache_step():
    # the rerun finds its prompt cached (and changes at token 3); the first run (cold) and the cold rerun
    # must then agree: here the cold rerun differs at token 9
    baseline = ScriptedServer(cache_changes_at=3)
    candidate = ScriptedServer(differs_at=5)
    calls = {"n": 0}
    inner = baseline.handler

    def flaky(request):  # the cold rerun (third stream) differs at token 9 from the first cold run
        if request.url.path == "/completion" and not json.loads(request.content).get("n_probs"):
            calls["n"] += 1
            if calls["n"] == 3:
                baseline.differs_at = 9
        return inner(request)

    baseline.handler = flaky
    t = run(baseline, candidate, GenerationParams(max_tokens=64, cache_prompt=True))
    assert t.cause == "nondeterminism" and "two runs without cached prompt tokens" in t.summary, t.to_json()


def _tops(chosen_b_listed: bool):
    """Top-3 at position 5 where the baseline chose id 9424 ("izz") and the candidate id 9999."""
    # the baseline's top-3: its own token, then two others 0.034 nats below it; the candidate's token is
    # not listed (its logprob is at most −1.034: a bound of 0.034 on the margin)
    base = [(9424, "izz", -1.0), (11, "a", -1.02), (12, "b", -1.034)]
    # the candidate's top-3 has both: its own 2.48 nats above the baseline's
    cand = [(9999, " else", -0.02), (13, "c", -1.5), (9424, "izz", -2.5)]
    if not chosen_b_listed:
        cand = [(9999, " else", -0.02), (13, "c", -1.5), (14, "d", -2.0)]
    return base, cand


def test_a_margin_that_is_only_a_bound_is_never_a_near_tie():
    base, cand = _tops(chosen_b_listed=True)
    t = run(ScriptedServer(top=base), ScriptedServer(differs_at=5, top=cand), GenerationParams(max_tokens=64))
    assert t.cause == "configuration", t.to_json()
    lp = t.logprobs
    assert lp["baseline_margin_exact"] is False and abs(lp["baseline_margin"] - 0.034) < 1e-9
    assert lp["candidate_margin_exact"] is True and abs(lp["candidate_margin"] + 2.48) < 1e-9
    # the smallest margin over the sides lies between 0.034 and 2.48: not known, only its bound
    assert lp["margin"] is None and abs(lp["margin_bound"] - 0.034) < 1e-9
    assert "≥ 0.034" in t.summary and "near-tie" not in t.summary


def test_an_exact_small_margin_is_a_near_tie():
    base = [(9424, "izz", -0.70), (9999, " else", -0.72), (12, "b", -3.0)]
    cand = [(9999, " else", -0.70), (9424, "izz", -0.71), (12, "b", -3.0)]
    t = run(ScriptedServer(top=base), ScriptedServer(differs_at=5, top=cand), GenerationParams(max_tokens=64))
    assert t.cause == "near-tie", t.to_json()
    assert abs(abs(t.logprobs["margin"]) - 0.01) < 1e-9


def test_an_exact_margin_beside_a_larger_bound_is_exact():
    # the baseline's bound (≥ 2.0) cannot fall below the candidate's exact 0.01: the margin is exact
    base = [(9424, "izz", -0.1), (11, "a", -1.9), (12, "b", -2.1)]
    cand = [(9999, " else", -0.70), (9424, "izz", -0.71), (12, "b", -3.0)]
    t = run(ScriptedServer(top=base), ScriptedServer(differs_at=5, top=cand), GenerationParams(max_tokens=64))
    assert t.cause == "near-tie" and abs(abs(t.logprobs["margin"]) - 0.01) < 1e-9
