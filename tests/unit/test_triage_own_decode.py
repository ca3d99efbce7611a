"""Triage names a cause from the streams' own computation where a side gives it (its request again with
n_probs, kept only where it reproduces the stream), labels evidence asked apart as such, and its printed cause
agrees with its printed evidence (tests.oracles.cause_contradictions, which the suite's conftest applies to
every cause any test meets). The case of a second model family (Gemma 3 270M, draft-simple): asked apart, both
servers ranked '#' over 'filtered' by 0.294 nats; the baseline's own decode ranked 'filtered' over '#'."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from spectui.core.findings import Triage, evidence_lines
from spectui.core.types import GenerationParams
from spectui.run import triage as tr
from tests.oracles import cause_contradictions

HASH, FILTERED, OTHER = 2, 3, 4
APART_TOPS = [(HASH, "#", -1.693), (FILTERED, "filtered", -1.987), (OTHER, " x", -3.0)]


class Side:
    """A backend that answers the position asked apart, in a batch shape, and its own decode (ids + tops)."""

    def __init__(self, apart, own=None, shapes=None):
        self.capabilities = SimpleNamespace(logprobs=True, cache_reset=False, cache_prompt_control=False)
        self.apart, self.own, self.shapes = apart, own, shapes or {}
        self.info = None

    async def top_logprobs(self, text, prefix, n):
        return self.apart

    async def top_logprobs_in_batch(self, text, prefix, n, m):
        return self.shapes.get(m, ([], 0))

    async def own_decode_logprobs(self, text, params, n_tokens, n=3):
        if self.own is None:
            raise RuntimeError("not asked this way")
        return self.own[:n_tokens]


def tok(tid, step=None):
    return SimpleNamespace(token_id=tid, label="accepted" if step else "target", step=step)


def result(c_steps):
    return SimpleNamespace(
        divergence=SimpleNamespace(baseline_token=2, candidate_token=2),
        baseline=SimpleNamespace(tokens=[tok(10), tok(11), tok(FILTERED)]),
        candidate=SimpleNamespace(tokens=[tok(10, c_steps[0]), tok(11, c_steps[1]), tok(HASH, c_steps[2])]),
        rendered={"baseline": "B", "candidate": "C"},
    )


def numerics(b, c, r, threshold=0.05) -> Triage:
    steps = tr._Steps(b, c, r, GenerationParams(max_tokens=8), threshold, {})
    return asyncio.run(steps.numerics(None))


OWN_B = [(10, []), (11, []), (FILTERED, [(FILTERED, "filtered", -1.84), (HASH, "#", -1.90), (OTHER, " x", -3.1)])]
VERIFY = {
    1: ([(HASH, "#", -1.70), (FILTERED, "filtered", -1.99)], 1),
    3: ([(HASH, "#", -1.69), (FILTERED, "filtered", -1.98)], 3),
}


def test_a_close_choice_the_verification_batch_flipped_is_named_with_both_margins():
    b = Side(APART_TOPS, OWN_B)
    c = Side(APART_TOPS, shapes=VERIFY)  # a speculating candidate: its own decode gives no probabilities here
    t = numerics(b, c, result([1, 1, 1]))
    assert t.cause == "batch shape", t.summary  # 0.060 is over the 0.05-nat near-tie threshold
    assert "verification batch flipped" in t.summary and "'filtered' 0.060 nats over '#'" in t.summary
    assert "puts '#' 0.290 nats over 'filtered'" in t.summary  # the candidate's target in the M = 3 shape
    assert "compute different distributions" not in t.summary
    assert cause_contradictions(t, 0.05) == []
    lines = evidence_lines(t.logprobs)
    assert any(
        line.startswith("baseline's own decode at token 2 (its stream's request with n_probs)") for line in lines
    )
    assert any("asked apart" in line for line in lines)
    # under a wider threshold the same evidence is the near-tie it is
    t = numerics(b, c, result([1, 1, 1]), threshold=0.1)
    assert t.cause == "near-tie" and t.summary.startswith("a near-tie the candidate's verification batch flipped")
    assert cause_contradictions(t, 0.1) == []


def test_without_own_evidence_identical_answers_asked_apart_are_not_different_distributions():
    t = numerics(Side(APART_TOPS), Side(APART_TOPS), result([1, 1, 1]))
    assert t.cause == "batch shape" and "compute different distributions" not in t.summary
    assert "asked apart" in t.summary and cause_contradictions(t, 0.05) == []


def test_an_own_decode_that_does_not_reproduce_the_stream_is_not_used():
    own = [(10, []), (12, []), (FILTERED, OWN_B[2][1])]  # token 1 moved: another computation
    t = numerics(Side(APART_TOPS, own), Side(APART_TOPS), result([1, 1, 1]))
    assert "own" not in t.logprobs and any("did not reproduce its stream" in n for n in t.notes)


def test_two_plain_decodes_a_near_tie_in_their_own_decode():
    own_c = [(10, []), (11, []), (HASH, [(HASH, "#", -1.86), (FILTERED, "filtered", -1.88)])]
    own_b = [(10, []), (11, []), (FILTERED, [(FILTERED, "filtered", -1.85), (HASH, "#", -1.87)])]
    t = numerics(Side(APART_TOPS, own_b), Side(APART_TOPS, own_c), result([None, None, None]))
    assert t.cause == "near-tie" and "0.020 nats apart at token 2 in the baseline's own decode" in t.summary
    assert cause_contradictions(t, 0.05) == []


def test_the_check_catches_a_cause_that_contradicts_its_evidence():
    # what triage printed before it took the streams' own evidence: a configuration difference beside the same
    # top tokens on both sides
    evidence = {
        "position": 2,
        "baseline_token": FILTERED,
        "candidate_token": HASH,
        "baseline": [["#", -1.693], ["filtered", -1.987]],
        "candidate": [["#", -1.693], ["filtered", -1.987]],
        "margin": -0.294,
    }
    bad = Triage(
        "configuration",
        "the two servers compute different distributions: configuration no speculation vs spec draft-simple "
        "(margin at the divergence 0.294 nats)",
        [],
        evidence,
    )
    assert any("different distributions" in c for c in cause_contradictions(bad))
    made_up = Triage("near-tie", "the two chosen tokens were 0.013 nats apart at token 2", [], evidence)
    assert cause_contradictions(made_up)


def test_llama_cpp_own_decode_sends_the_runs_own_request_with_n_probs_and_reads_each_token():
    import json

    import httpx

    from spectui.backends.llamacpp import LlamaCppBackend

    asked: list[dict] = []

    def handler(request):
        asked.append(json.loads(request.content))
        probs = [
            {
                "id": 7,
                "top_logprobs": [{"id": 7, "token": "a", "logprob": -0.5}, {"id": 8, "token": "b", "logprob": -1.0}],
            },
            {"id": 9},  # a verified token: llama.cpp gives it no probabilities
        ]
        return httpx.Response(200, json={"tokens": [7, 9], "completion_probabilities": probs})

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            b = LlamaCppBackend("http://b", client)
            return await b.own_decode_logprobs("P", GenerationParams(max_tokens=64, cache_prompt=True, seed=3), 2, 3)

    got = asyncio.run(go())
    assert got == [(7, [(7, "a", -0.5), (8, "b", -1.0)]), (9, [])]
    body = asked[0]
    assert (body["prompt"], body["n_predict"], body["n_probs"], body["stream"]) == ("P", 2, 3, False)
    assert (body["seed"], body["cache_prompt"], body["temperature"]) == (3, True, 0.0)  # the run's own parameters


def test_each_stream_choosing_its_own_first_token_after_verification_batches_is_the_batch_shape():
    # the n-gram candidate on Gemma: token 2 came from a plain decode step, after earlier verified tokens
    own_b = [(10, []), (11, []), (FILTERED, [(FILTERED, "filtered", -0.976), (HASH, "#", -1.610)])]
    own_c = [(10, []), (11, []), (HASH, [(HASH, "#", -1.253), (FILTERED, "filtered", -1.277)])]
    t = numerics(Side(APART_TOPS, own_b), Side(APART_TOPS, own_c), result([1, 1, None]))
    assert t.cause == "batch shape" and "'filtered' 0.634 nats over '#'" in t.summary
    assert "'#' 0.024 over 'filtered'" in t.summary and "near-tie in the candidate's own computation" in t.summary
    assert cause_contradictions(t, 0.05) == []
