"""The EAGLE-3 head's own c and R(k), measured (labs.theory.head_cost), not assumed 0.

The statistics lines below are copied from a llama-server b11434 log (`-md head.gguf --spec-type draft-eagle3
--spec-draft-n-max 3 -lv 4`, two /completion requests); every expected figure is worked out by hand beside it."""

from __future__ import annotations

import asyncio

from spectui.backends.launchspec import LaunchSpec
from spectui.labs.theory.curve import OTHER, CostCurve, Samples
from spectui.labs.theory.head_cost import (
    add_head_decode,
    draft_counters,
    head_type,
    per_token,
    reeval_from_batches,
    twin_argv,
)

FIRST = (
    "0.24.039.987 I spec common_specu: statistics     draft-eagle3: #calls(b,g,a) =    1     24     24, "
    "#gen drafts =     24, #acc drafts =     5, #gen tokens =     70, #acc tokens =     6, #mean acc len = 1.25, "
    "#acc rate/pos = (0.208, 0.042), dur(b,g,a) = 0.006, 817.215, 0.056 ms"
)
SECOND = (
    "0.35.564.678 I spec common_specu: statistics     draft-eagle3: #calls(b,g,a) =    2     47     47, "
    "#gen drafts =     47, #acc drafts =    10, #gen tokens =    137, #acc tokens =    13, #mean acc len = 1.28, "
    "#acc rate/pos = (0.213, 0.064), dur(b,g,a) = 0.013, 1550.146, 0.099 ms"
)
ARGV = [
    "/x/llama-server",
    "-m",
    "/m/target.F32.gguf",
    "--host",
    "127.0.0.1",
    "--port",
    "40001",
    "-t",
    "1",
    "-md",
    "/h/head.gguf",
    "--spec-type",
    "draft-eagle3",
    "--spec-draft-n-max",
    "2",
    "-lv",
    "1",
]


def s(*v: float) -> Samples:
    return Samples(tuple(v))


def test_the_statistics_line_gives_tokens_drafted_and_time_drafting():
    assert draft_counters(["noise", FIRST, "slot release"], "draft-eagle3") == (70, 817.215)
    # the last line wins (the counters are the server's totals so far)
    assert draft_counters([FIRST, SECOND], "draft-eagle3") == (137, 1550.146)
    assert draft_counters([FIRST], "draft-mtp") is None
    assert draft_counters(["statistics draft-eagle3: garbled"], "draft-eagle3") is None


def test_per_drafted_token_is_the_change_over_one_request():
    # (1550.146 - 817.215) ms / (137 - 70) tokens = 10.939… ms
    got = per_token((70, 817.215), (137, 1550.146))
    assert got is not None and abs(got - 732.931 / 67) < 1e-9
    assert per_token((70, 817.215), (70, 817.215)) is None  # drafted nothing in that request
    assert per_token((70, 817.215), None) is None


def test_the_twin_is_the_candidates_command_on_another_port_at_trace_level():
    twin = twin_argv(ARGV, 50123)
    assert twin[:3] == ARGV[:3] and "-md" in twin and "/h/head.gguf" in twin
    assert twin.count("--port") == 1 and twin[twin.index("--port") + 1] == "50123"
    assert twin.count("-lv") == 1 and twin[twin.index("-lv") + 1] == "4"
    assert twin[twin.index("--spec-draft-n-max") + 1] == "2"
    assert head_type(LaunchSpec.from_argv(ARGV)) == "draft-eagle3"
    assert head_type(LaunchSpec.from_argv(["/x/llama-server", "--spec-type", "ngram-cache"])) is None
    assert head_type(LaunchSpec()) is None


def test_the_twin_drafts_to_n_max_so_its_time_per_token_is_per_decode():
    # a draft stopped early under p_min decodes d + 1 times for d tokens; the terms' c is per decode
    twin = twin_argv([*ARGV, "--draft-p-min", "0.75"], 50123)
    assert "--draft-p-min" not in twin and "0.75" not in twin
    assert twin.count("--spec-draft-p-min") == 1 and twin[twin.index("--spec-draft-p-min") + 1] == "0"
    assert twin_argv(ARGV, 50123).count("--spec-draft-p-min") == 1


def head_curve() -> CostCurve:
    return CostCurve(
        context=100,
        repeats=2,
        target_step=s(50.0, 50.0),
        target_batch={1: s(52.0, 54.0), 4: s(70.0, 72.0)},
        candidate_batch={1: s(55.0, 53.0), 4: s(80.0, 77.0)},
        drafting=OTHER,
    )


def test_r_is_the_candidates_batch_minus_the_targets_clipped_at_zero_after_the_median():
    got = reeval_from_batches(head_curve())
    # k = 1: 55 - 52 = 3, 53 - 54 = -1 (kept: clipping each repeat first would move the median up); k = 4: 10, 5
    assert got is not None and got[1].values == (3.0, -1.0) and got[4].values == (10.0, 5.0)
    c = head_curve()
    c.draft_batch = got
    assert c.draft_ms(1) == 1.0  # median(3, -1)
    assert c.draft_ms(1, 1) == 0.0  # one repeat's own value, below 0, clipped
    c.draft_batch = {1: s(-3.0, -1.0)}
    assert c.draft_ms(1) == 0.0


def test_a_heads_measured_c_and_r_enter_the_terms():
    c = head_curve()
    c.draft_batch = reeval_from_batches(c)
    c.draft_decode = s(11.0, 9.0)
    t = c.terms()
    # c = median(11, 9) / median(50, 50) = 0.2; R(4) = median(10, 5) / 50 = 0.15; R(1) = median(3, -1) / 50 = 0.02
    assert abs(t.c - 0.2) < 1e-9
    assert abs(t.R(4) - 0.15) < 1e-9 and abs(t.R(1) - 0.02) < 1e-9


def test_a_candidate_not_launched_with_a_head_leaves_c_unmeasured():
    c = head_curve()
    c.sources["c"] = "not measured"
    asyncio.run(add_head_decode(c, None, LaunchSpec.from_argv(["/x/llama-server", "-m", "m.gguf"]), [1, 2, 3], 3))
    assert c.draft_decode is None and c.sources["c"] == "not measured"
