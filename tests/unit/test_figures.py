"""Every figure a side reports (core.figures), against values computed here from the raw recorded streams
or from hand-made events: the server's own counters and timings, written-out arithmetic, the README's
words. Written to kill the mutants `make mutate` found surviving in core/figures.py (MUTATION.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spectui.backends.labeller import LlamaCppLabeller
from spectui.backends.sse import iter_payloads
from spectui.core.events import SpecReport, StepEvent, StreamFailed, StreamFinished, StreamStarted, TokenEvent
from spectui.core.figures import UNMEASURED_WHEN_CUT, SideFigures, SideRecorder, per_position_alpha, rate_basis_note

DATA = Path(__file__).parent.parent / "data"
MS = 1_000_000


def raw(name: str) -> list[dict]:
    return [json.loads(x[6:]) for x in (DATA / name).read_text("utf-8").splitlines() if x.startswith("data: ")]


def recorded(name: str, start_ns: int = 0, n_max: float | None = None) -> SideRecorder:
    """The stream through the real labeller, payload i arriving at (i + 1) ms."""
    lab, rec = LlamaCppLabeller(), SideRecorder("candidate")
    rec.n_max_hint = n_max
    rec.feed(StreamStarted(start_ns, ""))
    for i, obj in enumerate(iter_payloads((DATA / name).read_text("utf-8").splitlines())):
        for ev in lab.feed(obj, (i + 1) * MS):
            rec.feed(ev)
    return rec


def steps_in(payloads: list[dict]) -> int:
    last, n = 0, 0
    for p in payloads:
        d = (p.get("timings") or {}).get("draft_n", last)
        n += d != last
        last = d
    return n


@pytest.mark.parametrize(
    "name,labels",
    [
        ("llamacpp-b11434-baseline-fizzbuzz.sse", "no speculation"),
        ("llamacpp-b11434-draft-simple-fizzbuzz.sse", "exact (draft counters)"),
        ("llamacpp-b11434-draft-simple-stop-word.sse", "exact (draft counters)"),
    ],
)
def test_a_recorded_streams_figures_are_the_servers_own(name, labels):
    payloads = raw(name)
    final, t = payloads[-1], payloads[-1]["timings"]
    rec = recorded(name, start_ns=-4 * MS)
    j = rec.figures.to_json()
    drafted, accepted = t.get("draft_n", 0), t.get("draft_n_accepted", 0)
    steps = steps_in(payloads)
    decode = (t["predicted_n"] - 1) / t["predicted_ms"] * 1000  # README: (predicted_n − 1) / predicted_ms
    assert j["tokens"] == final["tokens_predicted"]
    assert j["ttft_ms"] == 5.0  # started at −4 ms, the first token's event at +1 ms
    assert j["decode_tps"] == pytest.approx(decode, rel=1e-12) and j["server_decode_tps"] == j["decode_tps"]
    assert j["decode_source"] == "server timings" and j["rate_unit"] == "tok/s"
    assert j["server_prompt_ms"] == t["prompt_ms"]
    assert j["prompt_tokens"] == t["prompt_n"] and j["prompt_cached"] == t["cache_n"]
    assert (j["drafted"], j["accepted"], j["steps"]) == (drafted, accepted, steps)
    assert j["acceptance_rate"] == (accepted / drafted if drafted else None)  # no drafts: none, never 0.0
    assert j["mean_accepted_length"] == (1 + accepted / steps if steps else None)
    assert j["stop_type"] == final["stop_type"] and j["labels"] == labels
    assert j["label_counts"]["first"] == 1 and sum(j["label_counts"].values()) == j["tokens"]
    assert j["server_tps_incl_prefill"] is None and j["steps_inferred"] == 0
    assert rec.done and rec.finished is not None and rec.failed is None


def test_every_token_counted_by_its_label():
    # the fizzbuzz draft stream: one token per event, 45 accepted drafts (the server's draft_n_accepted),
    # one target token per step (15 steps), and the first token
    j = recorded("llamacpp-b11434-draft-simple-fizzbuzz.sse").figures.to_json()
    assert j["label_counts"] == {"first": 1, "accepted": 45, "target": 15}
    b = recorded("llamacpp-b11434-baseline-fizzbuzz.sse").figures.to_json()
    assert b["label_counts"] == {"first": 1, "target": 60}


def test_the_observed_rate_is_later_tokens_over_the_window():
    # fizzbuzz: one token per event at (i + 1) ms, the last token at event 60 (61 ms): the 60 tokens after
    # the first over the 60 ms from the first to the last
    rec = recorded("llamacpp-b11434-baseline-fizzbuzz.sse")
    assert rec.figures.observed_tps == pytest.approx(60 / 0.060, rel=1e-12)


def test_a_withheld_first_token_starts_the_clock_when_its_event_arrives():
    rec = SideRecorder("x")
    rec.feed(StreamStarted(1_000 * MS, ""))
    rec.feed(TokenEvent(0, 1, b"", 1_250 * MS, "first"))  # withheld bytes still start TTFT (the token came)
    rec.feed(TokenEvent(1, 2, b"\xc3\xa9", 1_300 * MS, "target"))
    rec.feed(StreamFinished(1_400 * MS, "limit", {}))
    f = rec.figures
    assert f.ttft_ms == 250.0 and f.tokens == 2 and f.label_counts == {"first": 1, "target": 1}
    assert (
        f.observed_tps == pytest.approx(1 / 0.05) and f.decode_source == "observed" and f.decode_tps == f.observed_tps
    )


def test_no_observed_rate_from_tokens_that_all_came_at_once():
    rec = SideRecorder("x")
    rec.feed(StreamStarted(0, ""))
    for i in range(3):
        rec.feed(TokenEvent(i, i, b"a", 7 * MS, "first" if i == 0 else "accepted"))
    rec.feed(StreamFinished(9 * MS, "limit", {}))
    assert rec.figures.observed_tps is None and rec.figures.decode_tps is None and rec.figures.decode_source is None


def test_one_token_has_no_rate_and_no_server_rate_from_one_predicted():
    rec = SideRecorder("x")
    rec.feed(StreamStarted(0, ""))
    rec.feed(TokenEvent(0, 5, b"a", 3 * MS, "first"))
    # llama.cpp times decoding from the first sampled token: at n = 1 predicted_ms is 0.001, no rate
    rec.feed(StreamFinished(4 * MS, "limit", {"predicted_n": 1, "predicted_ms": 0.001}))
    assert rec.figures.server_decode_tps is None and rec.figures.decode_tps is None


@pytest.mark.parametrize(
    "timings,want",
    [
        ({"predicted_n": 2, "predicted_ms": 10.0}, 100.0),  # (2 − 1) / 10 ms
        ({"predicted_n": 11, "predicted_ms": 1.0}, 10_000.0),
        ({"predicted_n": 11, "predicted_ms": 0.0}, None),  # no time: no rate
        ({"predicted_n": "x", "predicted_ms": 5.0}, None),  # not a number: missing, not a crash
        ({"predicted_per_second": 42.5}, 42.5),  # only the server's own rate: taken as it is
        ({"predicted_per_second": 42.5, "predicted_n": 3, "predicted_ms": 40.0}, 50.0),  # n and ms win
    ],
)
def test_the_server_timed_rate(timings, want):
    rec = SideRecorder("x")
    rec.feed(StreamStarted(0, ""))
    rec.feed(TokenEvent(0, 1, b"a", MS, "first"))
    rec.feed(StreamFinished(2 * MS, "limit", timings))
    assert rec.figures.server_decode_tps == want
    if want is not None:
        assert rec.figures.decode_tps == want and rec.figures.decode_source == "server timings"


def test_prompt_figures_come_from_the_final_timings():
    rec = SideRecorder("x")
    rec.feed(StreamFinished(1, "eos", {"prompt_n": "12", "cache_n": 30, "prompt_ms": "7.5"}))
    f = rec.figures
    assert (f.prompt_tokens, f.prompt_cached, f.server_prompt_ms, f.stop_type) == (12, 30, 7.5, "eos")
    assert SideRecorder("y").figures.prompt_tokens is None  # never a zero that looks measured


def test_steps_accumulate_every_verification():
    rec = SideRecorder("x")
    rec.feed(StepEvent(1, 8, 3, 1))
    rec.feed(StepEvent(2, 4, 4, 2))
    f = rec.figures
    assert (f.steps, f.drafted, f.accepted) == (2, 12, 7) and len(rec.steps) == 2
    assert f.acceptance_rate == 7 / 12 and f.mean_accepted_length == 1 + 7 / 2


def test_the_servers_step_count_wins_for_mean_length_and_alpha():
    f = SideFigures(drafted=16, accepted=8, steps=2)
    assert f.mean_accepted_length == 5.0
    f.metrics_steps = 4.0  # the server counted four steps where the stream showed two merged ones
    assert f.mean_accepted_length == 3.0
    assert f.alpha_per_position == pytest.approx(per_position_alpha(8, 16, 4))


@pytest.mark.parametrize(
    "accepted,drafted,steps,alpha",
    [
        (3, 8, 4, 0.5),  # γ = 2, accepted/step 0.75 = α + α² at α = 0.5
        (14, 12, 4, 1.0),  # more kept than drafted a step: every draft accepted
        (12, 12, 4, 1.0),
        (0, 12, 4, 0.0),
        (5, 0, 0, None),
        (5, 10, 0, None),
        (-1, 10, 2, None),
    ],
)
def test_alpha_per_position_by_hand(accepted, drafted, steps, alpha):
    got = per_position_alpha(accepted, drafted, steps)
    assert got == (pytest.approx(alpha, abs=1e-12) if alpha is not None else None)


def test_alpha_solves_the_sum_for_a_real_gamma():
    # γ = 3, α = 0.6: accepted per step = 0.6 + 0.36 + 0.216 = 1.176
    assert per_position_alpha(1.176 * 5, 15, 5) == pytest.approx(0.6, abs=1e-12)


def test_a_side_that_did_not_finish_reports_no_rates_or_drafts():
    rec = recorded("llamacpp-b11434-draft-simple-fizzbuzz.sse")
    j = rec.figures.to_json(measured=False)
    for key in UNMEASURED_WHEN_CUT:
        assert j[key] is None, key
    assert j["unmeasured"] == "the side did not finish: no rate, acceptance or draft figure from it"
    assert j["tokens"] == 61 and j["ttft_ms"] == 1.0  # what happened stays
    whole = rec.figures.to_json()
    assert "unmeasured" not in whole and whole["acceptance_rate"] == 45 / 119
    assert whole["mean_accepted_length"] == 1 + 45 / 15
    assert whole["alpha_per_position"] == pytest.approx(per_position_alpha(45, 119, 15))


def test_a_failed_side_keeps_its_tokens_and_its_observed_rate():
    rec = SideRecorder("x")
    rec.feed(StreamStarted(0, ""))
    rec.feed(TokenEvent(0, 1, b"a", 10 * MS, "first"))
    rec.feed(TokenEvent(1, 2, b"b", 30 * MS, "target"))
    rec.feed(StreamFailed(40 * MS, "connection lost"))
    assert rec.done and rec.failed.message == "connection lost" and rec.finished is None
    assert rec.figures.observed_tps == pytest.approx(1 / 0.02) and rec.figures.server_decode_tps is None


def test_output_and_token_bytes_carry_the_final_tail():
    rec = SideRecorder("x")
    rec.feed(TokenEvent(0, 1, b"ab", 1, "first"))
    rec.feed(TokenEvent(1, 2, b"c", 2, "target"))
    rec.feed(StreamFinished(3, "word", tail=b"de"))
    assert rec.output() == b"abcde" and rec.token_bytes() == [b"ab", b"cde"] and rec.tail == b"de"
    only_tail = SideRecorder("y")
    only_tail.feed(StreamFinished(3, "word", tail=b"zz"))
    assert only_tail.token_bytes() == [b"zz"] and only_tail.output() == b"zz"
    assert SideRecorder("z").token_bytes() == [] and SideRecorder("z").output() == b""
    fresh = SideRecorder("w")
    assert (fresh.name, fresh.tail, fresh.counts_from_metrics, fresh.relabelled, fresh.n_max_hint) == (
        "w",
        b"",
        False,
        False,
        None,
    )
    assert not fresh.done


def test_a_merged_step_is_found_from_the_finals_own_n_max():
    # the emoji stream: one step drafted 16 (> n_max 8): two steps' counters arrived together
    payloads = raw("llamacpp-b11434-draft-simple-emoji-utf8.sse")
    lab, rec = LlamaCppLabeller(), SideRecorder("c")
    for i, obj in enumerate(payloads):
        if obj.get("stop"):
            obj = dict(obj, generation_settings={**obj.get("generation_settings", {}), "speculative.n_max": 8})
        for ev in lab.feed(obj, i):
            rec.feed(ev)
    f = rec.figures
    assert f.steps_inferred == 1
    assert f.labels == (
        f"exact (draft counters) for {f.steps - 1} steps, inferred for 1 (two steps' counters arrived together)"
    )
    plain = recorded("llamacpp-b11434-draft-simple-emoji-utf8.sse")  # no n_max known: nothing called merged
    assert plain.figures.steps_inferred == 0 and plain.figures.labels == "exact (draft counters)"


def chunked(labels: list[str], ids: bool = True) -> SideRecorder:
    rec = SideRecorder("c")
    rec.feed(StreamStarted(0, ""))
    for i, label in enumerate(labels):
        rec.feed(TokenEvent(i, i if ids else None, b"x", (i + 1) * MS, label))
    return rec


def test_a_speculating_server_that_reports_nothing_is_inferred_from_chunking():
    rec = chunked(["first", "accepted", "accepted", "target"])
    rec.feed(StreamFinished(9 * MS, "limit", {}))
    assert rec.figures.labels == "inferred from chunking" and rec.counts_from_metrics is True
    with_spec = chunked(["first", "accepted", "accepted", "target"])
    with_spec.feed(StreamFinished(9 * MS, "limit", {}, spec=SpecReport("SGLang")))
    f = with_spec.figures
    assert f.labels == "inferred from chunking" and with_spec.counts_from_metrics is True and f.accepted == 2


def test_a_plain_stream_is_no_speculation_and_unknown_labels_say_nothing():
    rec = chunked(["first", "target", "target"])
    rec.feed(StreamFinished(9 * MS, "limit", {}))
    assert rec.figures.labels == "no speculation" and rec.counts_from_metrics is False
    spec = chunked(["first", "target"])
    spec.feed(StreamFinished(9 * MS, "limit", {}, spec=SpecReport("vLLM")))
    assert spec.figures.labels == "no speculation"
    unknown = chunked(["first", "unknown", "unknown"])
    unknown.feed(StreamFinished(9 * MS, "limit", {}))
    assert unknown.figures.labels is None  # a plain OpenAI-compatible server: never guessed


def test_summary_counts_without_per_step_lists():
    # vLLM without --per-request-spec-decode-metrics detailed: totals only
    rec = chunked(["first", "accepted", "target", "accepted", "accepted", "target"])
    rec.feed(StreamFinished(9 * MS, "limit", {}, spec=SpecReport("vLLM", steps=2, accepted=4, drafted=6)))
    f = rec.figures
    assert (f.steps, f.accepted, f.drafted) == (2, 4, 6) and rec.counts_from_metrics is False
    assert f.labels == "inferred from chunking (vLLM gives no per-step counts)"
    no_drafted = chunked(["first", "accepted", "target"])
    no_drafted.feed(StreamFinished(9 * MS, "limit", {}, spec=SpecReport("SGLang", steps=1)))
    g = no_drafted.figures
    assert (g.steps, g.accepted, g.drafted) == (1, 1, 0) and no_drafted.counts_from_metrics is True


def test_per_step_lists_relabel_every_token_and_recount():
    # chunks [1] [3] [2]: after the first, a step of 2 accepted + target, then 1 accepted + target
    rec = SideRecorder("c")
    rec.feed(StreamStarted(0, ""))
    k = 0
    for t, n in enumerate([1, 3, 2], 1):
        for _ in range(n):
            # chunk-numbered in `step` after the prefill chunk, as backends.chunks.ChunkLabeller does
            rec.feed(TokenEvent(k, k, b"x", t * MS, "first" if k == 0 else "unknown", t - 1 if t > 1 else None))
            k += 1
    rec.feed(StreamFinished(9 * MS, "limit", {}, spec=SpecReport("vLLM", [2, 1], [3, 3], 2, 3, 6, 6)))
    f = rec.figures
    assert [t.label for t in rec.tokens] == ["first", "accepted", "accepted", "target", "accepted", "target"]
    assert f.label_counts == {"first": 1, "accepted": 3, "target": 2}
    assert (f.tokens, f.drafted, f.accepted, f.steps) == (6, 6, 3, 2) and rec.relabelled is True
    assert f.labels == "exact (vLLM per-step counts)" and len(rec.steps) == 2
    assert [(st.step, st.drafted, st.accepted, st.t_ns) for st in rec.steps] == [(1, 3, 2, 9 * MS), (2, 3, 1, 9 * MS)]
    # the same counts on tokens without chunk numbers: placed in order, and said to be a guess
    plain = chunked(["first"] + ["unknown"] * 5)
    plain.feed(StreamFinished(9 * MS, "limit", {}, spec=SpecReport("vLLM", [2, 1], [3, 3], 2, 3, 6, 6)))
    assert plain.figures.labels.startswith("inferred (vLLM per-step counts placed in order")


@pytest.mark.parametrize(
    "ids,completion,unit",
    [(False, 7, "chunks/s"), (False, 3, "tok/s"), (True, 7, "tok/s"), (False, None, "tok/s")],
)
def test_chunks_are_called_chunks_only_where_the_count_is_unknown(ids, completion, unit):
    rec = chunked(["first", "unknown", "unknown"], ids=ids)
    rec.feed(StreamFinished(9 * MS, "limit", {"completion_tokens": completion} if completion else {}))
    assert rec.figures.rate_unit == unit


def test_vllm_rate_including_prefill_is_kept_apart():
    rec = chunked(["first", "target"])
    rec.feed(StreamFinished(9 * MS, "limit", {"tokens_per_second_incl_prefill": "55.5"}))
    assert rec.figures.server_tps_incl_prefill == 55.5 and rec.figures.server_decode_tps is None


def test_the_rate_basis_note_names_both_clocks():
    a, b = SideFigures(decode_source="server timings"), SideFigures(decode_source="observed")
    assert rate_basis_note(a, b) == (
        "the baseline's rate is from server timings, the candidate's from observed: the ratio mixes two clocks"
    )
    assert rate_basis_note(a, a) is None and rate_basis_note(a, SideFigures()) is None


def test_a_recorder_holding_plain_lists_gives_the_same_bytes_and_figures():
    """SideRecorder's tokens are a packed TokenLog; a plain list (what a caller may assign) must read the same."""
    rec = recorded("llamacpp-b11434-draft-simple-stop-word.sse")
    as_list = SideRecorder("c")
    as_list.tokens, as_list.steps, as_list.tail = list(rec.tokens), list(rec.steps), rec.tail
    assert as_list.output() == rec.output() and as_list.token_bytes() == rec.token_bytes()
    assert b"".join(t.data for t in rec.tokens) + rec.tail == rec.output()  # the bytes, joined by hand
    relabelled = SideRecorder("c")
    relabelled.tokens = [TokenEvent(0, 0, b"p", 1, "first"), TokenEvent(1, 1, b"q", 2, "accepted")]
    relabelled.feed(StreamFinished(3, "limit", {}))
    assert relabelled.figures.labels == "inferred from chunking"  # read the labels of a plain list too


def test_feeding_a_whole_stream_at_once_is_feeding_it_event_by_event():
    from spectui.core.tokens import EventLog

    lab = LlamaCppLabeller()
    events = [StreamStarted(0, "")]
    for i, obj in enumerate(
        iter_payloads((DATA / "llamacpp-b11434-draft-simple-fizzbuzz.sse").read_text().splitlines())
    ):
        events += lab.feed(obj, (i + 1) * MS)
    one_by_one = SideRecorder("c")
    for e in events:
        one_by_one.feed(e)
    for source in (events, EventLog(events)):  # a plain list, and a recorded EventLog (replay's fast path)
        whole = SideRecorder("c")
        whole.feed_all(source)
        assert whole.figures.to_json() == one_by_one.figures.to_json()
        assert whole.output() == one_by_one.output() and list(whole.tokens) == list(one_by_one.tokens)
        assert [(s.step, s.drafted, s.accepted) for s in whole.steps] == [
            (s.step, s.drafted, s.accepted) for s in one_by_one.steps
        ]


def test_summary_counts_without_accepted_count_nothing_accepted():
    # a server that reports its steps but neither accepted nor per-step counts, on a chunk with no accepted label
    rec = chunked(["first", "target"])
    rec.feed(StreamFinished(9 * MS, "limit", {}, spec=SpecReport("SGLang", steps=1)))
    assert rec.figures.accepted == 0 and rec.figures.steps == 1


def test_per_step_accepted_without_drafted_is_not_used_as_exact():
    rec = chunked(["first", "accepted", "target"])
    rec.feed(StreamFinished(9 * MS, "limit", {}, spec=SpecReport("vLLM", [1], None, steps=1, accepted=1)))
    assert rec.figures.labels == "inferred from chunking (vLLM gives no per-step counts)" and not rec.relabelled


def test_steps_made_from_per_step_counts_carry_the_final_events_time():
    rec = chunked(["first"] + ["unknown"] * 5)
    rec.feed(StreamFinished(9 * MS, "limit", {}, spec=SpecReport("vLLM", [2, 1], [3, 3], 2, 3, 6, 6)))
    assert [(s.step, s.drafted, s.accepted, s.t_ns) for s in rec.steps] == [(1, 3, 2, 9 * MS), (2, 3, 1, 9 * MS)]
    assert rec.figures.labels == (
        "inferred (vLLM per-step counts placed in order: the chunks do not match them, a chunk may hold two "
        "engine steps)"
    )
