"""The draft probe's pieces on hand-made inputs: llama.cpp's n-gram drafter, the self-check, the record."""

from __future__ import annotations

from spectui.run.probe import ProbeResult, StepSpan, check_step, ngram_simple_draft, ngram_sizes_from_argv


def test_ngram_simple_draft_follows_llamacpp():
    # history 1 2 3 4 5 1 2 | sampled 3, n=3 m=2: pattern (1 2 3) matched at 0? position 0 never matches
    assert ngram_simple_draft([1, 2, 3, 4, 5, 1, 2], 3, 3, 2) == []
    # with a token before it the match at 1 counts; the draft copies what followed: 4 5 … (m=3 → 4 5 9)
    hist = [9, 1, 2, 3, 4, 5, 9, 1, 2]
    assert ngram_simple_draft(hist, 3, 3, 3) == [4, 5, 9]
    # a history of n + m + 1 tokens or fewer: nothing (11 <= 3 + 8 + 1)
    assert ngram_simple_draft([9, 1, 2, 3, 4, 1, 2, 7, 7, 1, 2], 3, 3, 8) == []
    assert ngram_simple_draft([1, 2], 3, 3, 8) == []
    # the most recent earlier match wins (searched backwards)
    hist = [0, 1, 2, 3, 7, 7, 7, 1, 2, 3, 8, 8, 8, 5, 5, 1, 2]
    assert ngram_simple_draft(hist, 3, 3, 3) == [8, 8, 8]


def test_copy_length():
    # match at 1, copy_max = min(8, 14 − (1 + 3)) = 8: the eight tokens after the match
    assert ngram_simple_draft([0, 1, 2, 3, 4, 5, 6, 1, 2, 9, 9, 9, 1, 2], 3, 3, 8) == [4, 5, 6, 1, 2, 9, 9, 9]
    # match at 2, copy_max = min(1, 7 − 5) = 1 < n = 3: nothing
    assert ngram_simple_draft([0, 5, 1, 2, 3, 1, 2], 3, 3, 1) == []


def test_self_check():
    out = [10, 11, 12, 13, 14, 15]
    span = StepSpan(step=1, position=1, drafted=4, accepted=2)  # kept 11 12, target wrote 13
    assert check_step(span, [11, 12, 99, 98], out) == (True, "")
    ok, why = check_step(span, [11, 77, 99, 98], out)
    assert ok is False and "accepted" in why
    ok, why = check_step(span, [11, 12, 13, 98], out)  # the rejected draft equals the target's token
    assert ok is False and "would have been accepted" in why
    ok, why = check_step(span, [11, 12], out)
    assert ok is False and "2 of the 4" in why
    # llama.cpp never accepts a drafted end-of-generation token while drafts follow it
    assert check_step(span, [11, 12, 13, 98], out, eog_at=3) == (True, "")
    assert check_step(span, [11, 12, 99, 98], [10, None, 12, 13])[0] is None


def test_record_round_trip_and_damage():
    d = {
        "method": "m",
        "steps": [
            {
                "step": 1,
                "position": 3,
                "drafted": 4,
                "accepted": 1,
                "draft_ids": [1, 2, 3, 4],
                "rejected_text": "x",
                "agrees": True,
            },
            {"step": "bad"},
            "junk",
        ],
    }
    r = ProbeResult.from_json(d)
    assert len(r.steps) == 1 and r.agreed == 1 and r.rejected_at() == {4: "x"}
    assert ProbeResult.from_json(r.to_json()).to_json() == r.to_json()


def test_ngram_sizes_from_argv():
    argv = ["llama-server", "--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3"]
    assert ngram_sizes_from_argv(argv) == (3, 48)
    assert ngram_sizes_from_argv(None) is None


def test_rejected_by_position_counts_each_category_and_chain_position():
    from spectui.core.figures import SideRecorder
    from spectui.core.findings import ProbeResult
    from spectui.core.report import rejected_by_position
    from spectui.core.runner import PromptResult
    from spectui.core.types import Prompt

    def step(accepted, text, agrees=True):
        return {"step": 1, "position": 0, "drafted": 8, "accepted": accepted, "rejected_text": text, "agrees": agrees}

    code = PromptResult(Prompt("a", "code"), SideRecorder("b"), SideRecorder("c"))
    code.drafts = ProbeResult.from_json(
        {"steps": [step(0, "x"), step(0, "y"), step(2, "z"), step(2, "w", agrees=False)]}
    )
    chat = PromptResult(Prompt("b", "chat"), SideRecorder("b"), SideRecorder("c"))
    chat.drafts = ProbeResult.from_json({"steps": [step(5, "q")]})
    lines = rejected_by_position([code, chat])
    assert lines[2] == "  chat             6: 1 ('q')"
    assert lines[3] == "  code             1: 2 ('x', 'y'); 3: 1 ('z')"  # the disagreeing step is not counted
    assert rejected_by_position([PromptResult(Prompt("n"), SideRecorder("b"), SideRecorder("c"))]) == []


def test_the_target_token_is_named_by_its_text_even_when_its_bytes_came_later():
    """A token ending in split UTF-8 arrives with no bytes (its bytes come with the next token): the report
    names the target's token by the text the server gave for it, not by the empty streamed bytes."""
    from spectui.core.events import TokenEvent
    from spectui.core.figures import SideRecorder
    from spectui.core.findings import ProbeResult
    from spectui.core.report import drafts_lines
    from spectui.core.runner import PromptResult
    from spectui.core.types import Prompt

    cand = SideRecorder("c")
    for i, data in enumerate([b"A", b"", "é!".encode()]):
        cand.feed(TokenEvent(i, 10 + i, data, i, "target"))
    r = PromptResult(Prompt("p"), SideRecorder("b"), cand)
    step = {"step": 1, "position": 1, "drafted": 3, "accepted": 0, "agrees": True, "rejected_text": " x"}
    r.drafts = ProbeResult.from_json({"summary": "s", "steps": [dict(step, target_text="é")]})
    assert drafts_lines(r)[1].endswith("draft guessed ' x', target wrote 'é'")
    r.drafts = ProbeResult.from_json(
        {"summary": "s", "steps": [step]}
    )  # a recording from before target_text: the streamed bytes
    assert drafts_lines(r)[1].endswith("target wrote a token whose bytes came with the next one")
