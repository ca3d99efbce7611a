"""The sampling lab's pieces on fixed inputs: TVD by hand, the encoding (no pooling, an ended sample its own
category), which promise applies to which drafting mode, and the verdict where nothing could be tested."""

import pytest

from spectui.core.events import StreamFailed, StreamFinished, StreamStarted, TokenEvent
from spectui.core.figures import SideRecorder
from spectui.core.runner import PromptResult
from spectui.core.types import Prompt, ServerInfo
from spectui.labs.sampling.exact import (
    NOT_ENOUGH,
    SamplingResult,
    distribution_pass,
    distribution_test,
    encode,
    guarantee_for,
    launch_argv,
    tvd,
)


def test_tvd_by_hand():
    # a: x 3/4, y 1/4; b: x 1/4, y 3/4 → TVD = (|3/4-1/4| + |1/4-3/4|)/2 = 1/2
    assert tvd(list("xxxy"), list("xyyy")) == pytest.approx(0.5)
    assert tvd(list("ab"), list("ab")) == 0.0


def test_encoding_keeps_every_token_and_marks_ended_samples():
    codes = encode([[7, 8], [7]], [[9, 8, 1]], 5)
    # width: the longest sample (3), not k; 0 where a sample had ended; no token merged with another
    assert codes.tolist() == [[1, 1, 0], [1, 0, 0], [2, 1, 1]]


def test_rare_tokens_are_not_pooled():
    # the old lab merged tokens seen fewer than 5 times into one "other": these two sides (disjoint
    # tokens, each seen twice) had TVD 0 there
    t = distribution_test([[1], [1], [2], [2]] * 3, [[3], [3], [4], [4]] * 3, 1, detect=False)
    assert t.positions[0].tvd == pytest.approx(1.0) and t.verdict == "different"


def test_the_tvd_expected_by_chance_is_reported_beside_it():
    # the plug-in TVD is biased upward: identical sides of 6 tokens at N = 10 show a TVD well above 0
    t = distribution_test([[i % 6] for i in range(10)], [[(i + 3) % 6] for i in range(10)], 1, detect=False)
    pos = t.positions[0]
    assert pos.tvd_by_chance > 0.2 and pos.z is not None


def _run(k: int, b_tokens, c_tokens, c_failed=False) -> PromptResult:
    def side(name, toks, failed):
        rec = SideRecorder(name)
        rec.feed(StreamStarted(0, "p"))
        for i, t in enumerate(toks):
            rec.feed(TokenEvent(i, t, bytes([65 + t % 26]), i + 1, "unknown"))
        rec.feed(StreamFailed(99, "boom") if failed else StreamFinished(99, "limit"))
        return rec

    return PromptResult(Prompt("p"), side("baseline", b_tokens, False), side("candidate", c_tokens, c_failed), run=k)


def test_zero_tested_positions_is_not_enough_samples_and_text_says_so():
    # every candidate sample failed: before, this said "consistent" and text() raised a TypeError
    res = SamplingResult(Prompt("p"), [_run(i, [1, 2], [], c_failed=True) for i in range(6)])
    distribution_pass(res, 4)
    assert res.verdict == NOT_ENOUGH
    text = res.text()
    assert "NOT ENOUGH SAMPLES TO DECIDE" in text and "consistent" not in text


def test_ids_on_one_side_and_bytes_on_the_other_are_never_compared():
    runs = [_run(i, [1, 2], [1, 2]) for i in range(4)]
    runs[0].candidate.tokens[0] = TokenEvent(0, None, b"B", 1, "unknown")  # one token without an id
    res = SamplingResult(Prompt("p"), runs)
    distribution_pass(res, 2)
    assert res.representation == "token bytes"


@pytest.mark.parametrize(
    "kind,argv,spec_type,drafting,promise",
    [
        ("llama.cpp", ["llama-server", "-md", "d.gguf"], None, "greedy", "seeded bytes"),
        (
            "llama.cpp",
            ["llama-server", "-md", "d", "--spec-draft-sampling", "probabilistic"],
            None,
            "probabilistic",
            "distribution only",
        ),
        (
            "llama.cpp",
            ["llama-server", "--spec-type", "draft-mtp", "--spec-draft-sampling=greedy"],
            None,
            "greedy",
            "seeded bytes",
        ),
        ("llama.cpp", ["llama-server", "-m", "x.gguf"], "draft-simple", "none", "seeded bytes"),
        ("llama.cpp", None, "draft-simple", "unknown", "unknown"),
        ("llama.cpp", None, "ngram-simple", "n-gram", "seeded bytes"),
        ("llama.cpp", None, "none", "none", "seeded bytes"),
        ("vllm", None, None, "own randomness", "distribution only"),
        ("sglang", None, None, "own randomness", "distribution only"),
        ("openai", None, None, "unknown", "unknown"),
    ],
)
def test_which_promise_applies(kind, argv, spec_type, drafting, promise):
    info = ServerInfo("http://x", speculative={"type": spec_type} if spec_type else {})
    g = guarantee_for(kind, info, argv)
    assert (g.drafting, g.promise) == (drafting, promise)


def test_a_seeded_mismatch_under_probabilistic_drafting_is_not_a_failure():
    from spectui.core.verdict import judge

    runs = [_run(i, [1, 2], [1, 3]) for i in range(4)]
    for r in runs:  # the seeds' bytes differ
        r.verdict = judge(r.baseline, r.candidate, True)
    res = SamplingResult(Prompt("p"), runs)
    assert res.seeded_identical == 0
    res.guarantee = guarantee_for(
        "llama.cpp", None, ["llama-server", "-md", "d", "--spec-draft-sampling", "probabilistic"]
    )
    assert not res.seeded_mismatch_is_failure
    res.guarantee = guarantee_for("llama.cpp", None, ["llama-server", "-md", "d"])
    assert res.seeded_mismatch_is_failure
    res.guarantee = guarantee_for("llama.cpp", ServerInfo("http://x", speculative={"type": "draft-simple"}), None)
    assert res.seeded_mismatch_is_failure  # unknown: never called a pass


def test_argv_is_read_only_for_local_servers():
    assert launch_argv("http://example.com:8080") is None
    assert launch_argv("not a url") is None


def test_the_sampling_mode_set_in_the_launched_environment_is_read():
    # common/arg.cpp:4236: LLAMA_ARG_SPEC_DRAFT_SAMPLING sets --spec-draft-sampling; the argument wins
    argv = ["llama-server", "-md", "d"]
    g = guarantee_for("llama.cpp", None, argv, {"LLAMA_ARG_SPEC_DRAFT_SAMPLING": "probabilistic"})
    assert (g.drafting, g.promise) == ("probabilistic", "distribution only")
    assert "LLAMA_ARG_SPEC_DRAFT_SAMPLING in its environment" in g.why
    wins = guarantee_for(
        "llama.cpp",
        None,
        [*argv, "--spec-draft-sampling", "greedy"],
        {"LLAMA_ARG_SPEC_DRAFT_SAMPLING": "probabilistic"},
    )
    assert (wins.drafting, wins.promise) == ("greedy", "seeded bytes")
    unread = guarantee_for("llama.cpp", None, argv)
    assert unread.promise == "seeded bytes" and "not read" in unread.why
