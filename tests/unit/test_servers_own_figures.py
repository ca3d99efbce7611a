"""Truth at the edges: figures and labels on the streams where they used to break.

Expected values come from the servers' own fields in the recorded streams (tests/data/README.md) or
from a hand computation on a constructed stream, never from spectui's output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spectui.backends.labeller import LlamaCppLabeller
from spectui.backends.sse import iter_payloads
from spectui.core.events import StreamStarted, TokenEvent
from spectui.core.figures import SideRecorder

DATA = Path(__file__).parent.parent / "data"
STREAMS = [
    "llamacpp-b11434-baseline-fizzbuzz.sse",
    "llamacpp-b11434-draft-simple-fizzbuzz.sse",
    "llamacpp-b11434-draft-simple-emoji-utf8.sse",
    "llamacpp-b11434-draft-simple-stop-word.sse",
]


def replay(name: str, n_max: float | None = None) -> tuple[SideRecorder, dict]:
    payloads = list(iter_payloads((DATA / name).read_text().splitlines()))
    lab, rec = LlamaCppLabeller(), SideRecorder("x")
    rec.n_max_hint = n_max
    rec.feed(StreamStarted(0, ""))
    for i, obj in enumerate(payloads):
        for ev in lab.feed(obj, (i + 1) * 1_000_000):
            rec.feed(ev)
    return rec, payloads[-1]["timings"]


@pytest.mark.parametrize("name", STREAMS)
def test_the_decode_rate_beside_the_speedup_is_the_servers_own(name):
    rec, timings = replay(name)
    f = rec.figures
    assert f.decode_source == "server timings"
    assert f.decode_tps == pytest.approx(timings["predicted_per_second"], rel=0.005)


@pytest.mark.parametrize("name", STREAMS)
def test_token_counts_equal_the_servers_tokens_predicted(name):
    rec, _ = replay(name)
    payloads = list(iter_payloads((DATA / name).read_text().splitlines()))
    assert rec.figures.tokens == payloads[-1]["tokens_predicted"]


def test_the_observed_rate_does_not_count_tokens_that_came_with_the_first_event():
    # constructed: the first event carries 3 tokens (a verification step) at t = 0, then one token every
    # 10 ms for 10 events; the window holds the 10 later tokens over 100 ms: 100 tok/s (not 12/0.1 = 120)
    rec = SideRecorder("x")
    rec.feed(StreamStarted(-50_000_000, ""))
    for i in range(3):
        rec.feed(TokenEvent(i, i, b"a", 0, "first" if i == 0 else "accepted"))
    for k in range(1, 11):
        rec.feed(TokenEvent(2 + k, 2 + k, b"b", k * 10_000_000, "target"))
    from spectui.core.events import StreamFinished

    rec.feed(StreamFinished(100_000_000, "limit"))
    assert rec.figures.observed_tps == pytest.approx(100.0)
    assert rec.figures.decode_source == "observed"


def test_a_merged_step_is_marked_inferred_not_exact():
    # the emoji stream: two verification steps' counter updates arrived between the same two events
    # (the server's /metrics delta counted 11 steps; the stream shows 10, one of them drafting 16 > n_max 8)
    rec, _ = replay("llamacpp-b11434-draft-simple-emoji-utf8.sse", n_max=8)
    assert rec.figures.steps == 10 and rec.figures.steps_inferred == 1
    assert "inferred for 1" in rec.figures.labels and "exact (draft counters) for 9 steps" in rec.figures.labels


def test_vllm_tokens_per_second_is_not_shown_as_a_decode_rate():
    from spectui.core.events import SpecReport, StreamFinished

    rec = SideRecorder("x")
    rec.feed(StreamStarted(0, ""))
    rec.feed(TokenEvent(0, 1, b"a", 10, "first"))
    rec.feed(TokenEvent(1, 2, b"b", 20, "target"))
    rec.feed(
        StreamFinished(
            30, "limit", {"tokens_per_second_incl_prefill": 55.0, "completion_tokens": 2}, spec=SpecReport("vLLM")
        )
    )
    f = rec.figures
    assert f.server_decode_tps is None and f.server_tps_incl_prefill == 55.0
    assert f.decode_source == "observed"


def test_chunks_are_not_called_tokens():
    from spectui.core.events import StreamFinished

    rec = SideRecorder("x")
    rec.feed(StreamStarted(0, ""))
    for i in range(3):  # three chunks, no ids; the server's usage says 7 tokens
        rec.feed(TokenEvent(i, None, b"ab", 10 * (i + 1), "first" if i == 0 else "unknown"))
    rec.feed(StreamFinished(40, "limit", {"completion_tokens": 7}))
    assert rec.figures.rate_unit == "chunks/s"


def test_rendered_prompts_that_differ_are_said_before_the_verdict():
    from spectui.core.runner import PromptResult
    from spectui.core.types import Prompt

    r = PromptResult(
        Prompt("p"),
        SideRecorder("b"),
        SideRecorder("c"),
        rendered={"baseline": "<|im_start|>user\nhi", "candidate": "<|im_start|>user\n hi"},
    )
    assert r.prompts_differ_at == len(b"<|im_start|>user\n")


def test_the_sweep_takes_the_servers_counts_when_the_stream_has_none():
    from spectui.labs.sweep.levels import SideLevel

    rec = SideRecorder("c")
    rec.counts_from_metrics = True  # labels inferred from chunking, no per-request counts (vLLM summary mode)
    lvl = SideLevel([rec], 1.0, metrics_drafted=40.0, metrics_accepted=22.0)
    assert (lvl.drafted, lvl.accepted) == (40, 22) and lvl.acceptance_rate == pytest.approx(0.55)
    assert lvl.metrics_check.startswith("ok (counts from the server")


def test_the_sweep_plot_draws_a_missing_value_as_a_gap():
    from spectui.labs.sweep.levels import Level, SideLevel, svg_chart

    ok = SideLevel([SideRecorder("b")], 1.0)
    ok.recorders[0].figures.tokens = 100
    failed = SideLevel([SideRecorder("c")], 0.0)  # wall 0: no rate at this level
    svg = svg_chart([Level(1, ok, failed), Level(2, ok, ok)])
    import re

    cand = re.findall(r'<path d="([^"]*)" fill="none" stroke="#2ca02c"', svg)[0]
    assert cand.startswith("M") and cand.count("M") == 1 and "L" not in cand  # one point, at level 2 only


def test_vllm_steps_that_drafted_nothing_are_aligned_by_chunk():
    # vLLM's per-step lists skip steps with no drafts (its scheduler tests: an empty step leaves no entry).
    # Chunks after prefill: [3 tokens] [1: no drafts] [1: no drafts] [2 tokens]; reported steps: accepted
    # [2, 1], drafted [3, 3]. By hand: chunk 1 = 2 accepted + target (✗1), chunks 2-3 the target's own,
    # chunk 4 = 1 accepted + target (✗2).
    from spectui.backends.chunks import ChunkLabeller
    from spectui.core.events import SpecReport, StreamFinished

    lab, rec = ChunkLabeller(True), SideRecorder("c")
    rec.feed(StreamStarted(0, ""))
    tid = iter(range(100))
    for t, n in enumerate([1, 3, 1, 1, 2], 1):
        for ev in lab.feed(b"x" * n, [next(tid) for _ in range(n)], n, t):
            rec.feed(ev)
    rec.feed(StreamFinished(9, "limit", spec=SpecReport("vLLM", [2, 1], [3, 3], 2, 3, 6, 8)))
    assert [t.label for t in rec.tokens] == [
        "first",
        "accepted",
        "accepted",
        "target",
        "target",
        "target",
        "accepted",
        "target",
    ]
    assert [t.rejected for t in rec.tokens] == [0, 0, 0, 1, 0, 0, 0, 2]
    assert rec.figures.labels.startswith("exact (vLLM per-step counts)")


def test_chunks_that_cannot_hold_the_reported_steps_are_inferred():
    from spectui.backends.chunks import ChunkLabeller
    from spectui.core.events import SpecReport, StreamFinished

    lab, rec = ChunkLabeller(True), SideRecorder("c")
    rec.feed(StreamStarted(0, ""))
    tid = iter(range(100))
    for t, n in enumerate([1, 5], 1):  # one chunk of 5 holding two engine steps of 2 + 3 tokens
        for ev in lab.feed(b"x" * n, [next(tid) for _ in range(n)], n, t):
            rec.feed(ev)
    rec.feed(StreamFinished(9, "limit", spec=SpecReport("vLLM", [1, 2], [3, 3], 2, 3, 6, 6)))
    assert rec.figures.labels.startswith("inferred")
