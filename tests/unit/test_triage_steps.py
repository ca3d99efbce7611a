"""run/triage's steps one at a time, on backends written here (in-process objects that answer top
log-probabilities as told and record what they were asked): the margins and their bounds, the lossy step,
the batch shapes and their words, the configuration's differences. Log-probabilities are binary fractions
(−0.25, −0.75 …) so every expected margin is exact and worked by hand."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from spectui.backends.launchspec import LaunchSpec
from spectui.core.types import GenerationParams, ServerInfo
from spectui.run import triage as tr


class Fake:
    """A backend that answers top log-probabilities (and per batch shape) from what it was given."""

    def __init__(self, top=None, *, logprobs=True, shapes=None, fail=None, info=None, fail_batch_at=None):
        self.capabilities = SimpleNamespace(logprobs=logprobs, cache_reset=False, cache_prompt_control=False)
        self.top, self.shapes, self.fail, self.fail_batch_at = top, shapes or {}, fail, fail_batch_at
        self.info = info
        self.asked: list[tuple] = []
        self.batches: list[tuple] = []

    async def top_logprobs(self, text, prefix, n):
        self.asked.append((text, list(prefix), n))
        if self.fail is not None:
            raise self.fail
        return self.top

    async def top_logprobs_in_batch(self, text, prefix, n, m):
        self.batches.append((text, list(prefix), n, m))
        if m == self.fail_batch_at:
            raise RuntimeError("no batch")
        return self.shapes.get(m, ([], 0))


def tok(tid, label="target", step=None):
    return SimpleNamespace(token_id=tid, label=label, step=step)


def result(b_ids, c_ids, at, c_labels=None, c_steps=None, at_b=None):
    """A divergent result: the two sides' token ids, the divergence at token `at` (both sides, unless `at_b`)."""
    labels = c_labels or ["target"] * len(c_ids)
    steps = c_steps or [None] * len(c_ids)
    return SimpleNamespace(
        divergence=SimpleNamespace(baseline_token=at if at_b is None else at_b, candidate_token=at),
        baseline=SimpleNamespace(tokens=[tok(i) for i in b_ids]),
        candidate=SimpleNamespace(tokens=[tok(i, lab, s) for i, lab, s in zip(c_ids, labels, steps, strict=True)]),
        rendered={"baseline": "B text", "candidate": "C text"},
    )


TEXT = {"baseline": "B text", "candidate": "C text"}


def sides(b, c):
    return {"baseline": (b, None), "candidate": (c, None)}


def go(coro):
    return asyncio.run(coro)


# ------------------------------------------------------------------ pure helpers


def test_margins_exact_bounded_and_unknown():
    top = [(5, "a", -0.25), (6, "b", -0.75), (7, "c", -2.0)]
    assert tr._margins(top, 5, 6) == (0.5, True)
    assert tr._margins(top, 6, 5) == (-0.5, True)
    assert tr._margins(top, 5, 99) == (1.75, False)  # −0.25 − (−2.0): the missing one is at most −2.0
    assert tr._margins(top, 99, 6) == (-1.25, False)  # −2.0 − (−0.75)
    assert tr._margins(top, 98, 99) == (None, False)
    assert tr._margins([], 5, 6) == (None, False)
    # an entry without an id is never either side's token: a chosen token past the end (None) is not it
    assert tr._margins([(None, "x", -0.5), (5, "a", -0.25)], None, 5) == (-0.25, False)


def test_below_first_exact_bounded_and_none():
    top = [(6, "b", -0.75), (5, "a", -0.25), (None, "?", -2.0)]
    assert tr._below_first(top, 6) == (0.5, True)
    assert tr._below_first(top, 5) == (0.0, True)
    assert tr._below_first(top, 99) == (1.75, False)
    assert tr._below_first(top, None) is None
    assert tr._below_first([], 5) is None


def test_config_differences_name_each_differing_field():
    a = ServerInfo(url="a", build="b1", model="m.gguf")
    b = ServerInfo(url="b", build=None, model="n.gguf", speculative={"type": "draft-simple"})
    assert tr._config_differences(Fake(info=a), Fake(info=b)) == [
        "model m.gguf vs n.gguf",
        "build b1 vs ?",
        "configuration no speculation vs spec draft-simple",
    ]
    assert tr._config_differences(Fake(info=a), Fake(info=a)) == []
    assert tr._config_differences(Fake(info=None), Fake(info=a)) == []
    assert tr._config_differences(Fake(info=a), Fake(info=None)) == []


def test_verify_width_from_the_launch_then_the_steps_then_the_default():
    r = result([1, 2, 3, 4, 5], [1, 2, 3, 4, 5], 0, c_steps=[1, 1, 1, 2, 2])
    assert tr._verify_width({"candidate": LaunchSpec(values={"n_max": "7"})}, r) == 8
    assert tr._verify_width({"candidate": LaunchSpec(values={"n_max": "many"})}, r) == 3  # 3 tokens in step 1
    assert tr._verify_width({"candidate": LaunchSpec(values={})}, r) == 3
    assert tr._verify_width({"baseline": LaunchSpec(values={"n_max": "7"})}, r) == 3
    one_each = result([1, 2], [1, 2], 0, c_steps=[1, 2])
    assert tr._verify_width({}, one_each) == 4  # no step above one token: llama.cpp's default of 3 drafts
    assert tr._verify_width({}, result([1], [1], 0)) == 4


def test_shape_words_name_each_flip_or_say_there_is_none():
    assert tr._shape_words(None) == ""
    assert tr._shape_words({"batch_shapes": {}}) == ""
    flip = {"1": {"top": 5, "top_text": "a", "margin": 0.0101}, "4": {"top": 6, "top_text": "b", "margin": 0.0042}}
    steady = {"1": {"top": 5, "top_text": "a", "margin": 0.5}, "4": {"top": 5, "top_text": "a", "margin": 0.25}}
    half = {"1": {"top": 5, "top_text": "a", "margin": 0.5}}
    ev = {"batch_width": 4, "batch_shapes": {"baseline": flip, "candidate": flip}}
    assert tr._shape_words(ev) == (
        "; batch shape: the baseline's target picks 'a' at M = 1 and 'b' at M = 4 (margins 0.010, 0.004 nats)"
        "; the candidate's target picks 'a' at M = 1 and 'b' at M = 4 (margins 0.010, 0.004 nats)"
    )
    ev = {"batch_width": 4, "batch_shapes": {"baseline": steady, "candidate": half}}
    assert tr._shape_words(ev) == "; batch shape: no side's argmax moves between M = 1 and M = 4"


# ------------------------------------------------------------------ near-tie evidence


def test_near_tie_asks_each_side_at_the_common_prefix_and_keeps_its_margins():
    b = Fake([(30, "x", -0.25), (40, "y", -0.75), (50, "z", -2.0)])
    c = Fake([(40, "y", -0.25), (30, "x", -0.5), (50, "z", -2.0)])
    r = result([10, 20, 30], [10, 20, 40], 2)
    notes: list[str] = []
    ev = go(tr._near_tie(sides(b, c), r, TEXT, notes))
    assert b.asked == [("B text", [10, 20], 3)] and c.asked == [("C text", [10, 20], 3)]
    assert notes == []
    assert ev == {
        "position": 2,
        "baseline_token": 30,
        "candidate_token": 40,
        "baseline": [["x", -0.25], ["y", -0.75], ["z", -2.0]],
        "baseline_candidate_below_first": 0.5,
        "baseline_candidate_below_first_exact": True,
        "baseline_margin": 0.5,
        "baseline_margin_exact": True,
        "candidate": [["y", -0.25], ["x", -0.5], ["z", -2.0]],
        "candidate_candidate_below_first": 0.0,
        "candidate_candidate_below_first_exact": True,
        "candidate_margin": -0.25,
        "candidate_margin_exact": True,
        "margin": -0.25,  # the smaller of 0.5 and −0.25 by size
    }


def test_near_tie_a_bound_below_the_exact_margin_leaves_only_a_bound():
    b = Fake([(30, "x", -0.25), (60, "p", -0.375), (50, "z", -0.5)])  # 40 missing: margin ≥ 0.25 (a bound)
    c = Fake([(40, "y", -0.25), (30, "x", -0.75), (50, "z", -2.0)])  # exact −0.5
    ev = go(tr._near_tie(sides(b, c), result([10, 30], [10, 40], 1), TEXT, []))
    assert (ev["baseline_margin"], ev["baseline_margin_exact"]) == (0.25, False)
    assert (ev["margin"], ev["margin_bound"]) == (None, 0.25)
    # the bound equal to the exact margin's size is no lower: the margin is exact
    b = Fake([(30, "x", -0.25), (50, "z", -0.75)])
    ev = go(tr._near_tie(sides(b, c), result([10, 30], [10, 40], 1), TEXT, []))
    assert ev["margin"] == -0.5 and "margin_bound" not in ev
    # bounds only: the smallest of them
    c = Fake([(40, "y", -0.25), (50, "z", -1.25)])
    ev = go(tr._near_tie(sides(b, c), result([10, 30], [10, 40], 1), TEXT, []))
    assert (ev["margin"], ev["margin_bound"]) == (None, 0.5)


def test_near_tie_says_why_it_asked_nothing():
    notes: list[str] = []
    r = result([10], [10], None, at_b=None)
    r.divergence = SimpleNamespace(baseline_token=None, candidate_token=None)
    assert go(tr._near_tie(sides(Fake(), Fake()), r, TEXT, notes)) is None
    assert notes == ["near-tie: the divergence is past the end of both outputs; no position to ask about"]
    for b_ids, c_ids in (([10, 30], [11, 40]), ([None, 30], [None, 40])):
        notes = []
        assert go(tr._near_tie(sides(Fake(), Fake()), result(b_ids, c_ids, 1), TEXT, notes)) is None
        assert notes == ["near-tie: the sides' token ids before the divergence are unknown or differ; not asked"]


def test_near_tie_goes_on_past_a_side_that_cannot_answer():
    b = Fake(logprobs=False)
    c = Fake(fail=RuntimeError("boom"))
    notes: list[str] = []
    assert go(tr._near_tie(sides(b, c), result([10, 30], [10, 40], 1), TEXT, notes)) is None
    assert notes == [
        "baseline: gives no log-probabilities; near-tie not checked on this side",
        "candidate: log-probabilities unavailable (RuntimeError: boom)",
    ]
    assert b.asked == []


def test_near_tie_without_either_chosen_token_listed_keeps_the_lists_only():
    b = Fake([(50, "z", -0.25)])
    ev = go(tr._near_tie(sides(b, Fake(logprobs=False)), result([10, 30], [10, 40], 1), TEXT, []))
    assert ev == {
        "position": 1,
        "baseline_token": 30,
        "candidate_token": 40,
        "baseline": [["z", -0.25]],
        "baseline_candidate_below_first": 0.0,
        "baseline_candidate_below_first_exact": False,
    }


def test_near_tie_past_one_sides_end_and_a_margin_that_is_not_finite():
    # the divergence at the baseline's end: it chose nothing there (None), the candidate token 40
    b = Fake([(40, "y", -0.25), (50, "z", float("-inf"))])
    r = result([10], [10, 40], 1)
    ev = go(tr._near_tie(sides(b, Fake(logprobs=False)), r, TEXT, []))
    assert (ev["baseline_token"], ev["candidate_token"]) == (None, 40)
    assert "baseline_margin" not in ev  # −inf − (−0.25): no finite margin, none kept
    r = result([10, 30], [10], 1)
    ev = go(tr._near_tie(sides(Fake([(30, "x", -0.25)]), Fake(logprobs=False)), r, TEXT, []))
    assert (ev["baseline_token"], ev["candidate_token"]) == (30, None)


# ------------------------------------------------------------------ lossy verification


def lossy_case(c_top, b_top=None, labels=("target", "target", "accepted"), b_info=None, c_info=None):
    b = Fake(b_top, logprobs=b_top is not None, info=b_info)
    c = Fake(c_top, logprobs=c_top is not None, info=c_info)
    r = result([10, 20, 30], [10, 20, 40], 2, c_labels=list(labels))
    return b, c, r


def test_lossy_from_the_candidates_own_target():
    b, c, r = lossy_case([(30, "x", -0.25), (40, "y", -0.75)])
    notes: list[str] = []
    t = go(tr._lossy(sides(b, c), r, TEXT, notes, 0.5, {}, b, c))
    assert t.cause == "lossy verification" and t.reruns == [] and t.notes is notes
    assert t.summary == (
        "the candidate accepted a draft the target would not choose at token 2 (margin 0.500 nats below the first "
        "choice, from its own target's log-probabilities); spectui recognises no lossy setting on its command line "
        "(a relaxed or typical acceptance, or a server spectui did not launch)"
    )
    assert (t.logprobs["lossy_margin"], t.logprobs["lossy_margin_exact"], t.logprobs["lossy_settings"]) == (
        0.5,
        True,
        [],
    )
    # a margin under the threshold is no lossy verification
    assert go(tr._lossy(sides(b, c), r, TEXT, [], 0.625, {}, b, c)) is None


def test_lossy_names_the_setting_and_a_bound():
    b, c, r = lossy_case([(30, "x", -0.25), (50, "z", -1.0)])  # 40 missing: at least 0.75 below
    spec = LaunchSpec(argv=("llama-server", "--spec-synth-len", "4"))
    t = go(tr._lossy(sides(b, c), r, TEXT, [], 0.05, {"candidate": spec}, b, c))
    assert t.summary == (
        "the candidate accepted a draft the target would not choose at token 2 (margin ≥ 0.750 nats below the "
        "first choice, from its own target's log-probabilities); the candidate runs with --spec-synth-len 4, "
        "which accepts drafts without the target's agreement"
    )
    assert (t.logprobs["lossy_margin_exact"], t.logprobs["lossy_settings"]) == (False, ["--spec-synth-len 4"])


def test_lossy_from_the_baselines_log_probabilities_only_where_the_servers_agree():
    same = ServerInfo(url="a", build="b1", model="m.gguf")
    b, c, r = lossy_case(None, b_top=[(30, "x", -0.25), (40, "y", -1.25)], b_info=same, c_info=same)
    t = go(tr._lossy(sides(b, c), r, TEXT, [], 0.05, {}, b, c))
    assert "(margin 1.000 nats below the first choice, from the baseline's log-probabilities)" in t.summary
    other = ServerInfo(url="c", build="b2", model="m.gguf")
    b, c, r = lossy_case(None, b_top=[(30, "x", -0.25), (40, "y", -1.25)], b_info=same, c_info=other)
    assert go(tr._lossy(sides(b, c), r, TEXT, [], 0.05, {}, b, c)) is None


def test_lossy_only_for_an_accepted_draft_with_evidence():
    top = [(30, "x", -0.25), (40, "y", -0.75)]
    for labels in (("target", "target", "target"), ("target", "target", "first")):
        b, c, r = lossy_case(top, labels=labels)
        assert go(tr._lossy(sides(b, c), r, TEXT, [], 0.05, {}, b, c)) is None
        assert c.asked == []  # not even asked
    b, c, r = lossy_case(top)
    r.divergence = SimpleNamespace(baseline_token=2, candidate_token=3)  # past the candidate's end
    assert go(tr._lossy(sides(b, c), r, TEXT, [], 0.05, {}, b, c)) is None
    r.divergence = SimpleNamespace(baseline_token=2, candidate_token=None)
    assert go(tr._lossy(sides(b, c), r, TEXT, [], 0.05, {}, b, c)) is None
    b, c, r = lossy_case(None)
    notes: list[str] = []
    assert go(tr._lossy(sides(b, c), r, TEXT, notes, 0.05, {}, b, c)) is None
    assert notes == ["lossy verification: the divergent token was an accepted draft, but no log-probabilities"]


# ------------------------------------------------------------------ batch shapes


def test_batch_shapes_ask_each_side_at_one_token_and_a_verification_batch():
    shapes = {1: ([(6, "b", -0.75), (5, "a", -0.25), (7, "c", -2.0)], 12), 4: ([(6, "b", -0.5), (5, "a", -0.75)], 15)}
    b, c = Fake(shapes=shapes), Fake(shapes=shapes, fail_batch_at=1)
    r = result([10, 20, 30], [10, 20, 40], 2)
    ev = {"position": 2}
    notes: list[str] = []
    go(tr._batch_shapes(sides(b, c), r, TEXT, ev, {}, notes))
    assert b.batches == [("B text", [10, 20], 3, 1), ("B text", [10, 20], 3, 4)]
    assert c.batches == [("C text", [10, 20], 3, 1)]  # its first shape failed: not asked again
    assert notes == ["candidate: batch shape M = 1 not checked (RuntimeError: no batch)"]
    assert ev == {
        "position": 2,
        "batch_width": 4,
        "batch_shapes": {
            "baseline": {
                "1": {"top": 5, "top_text": "a", "margin": 0.5, "processed": 12},
                "4": {"top": 6, "top_text": "b", "margin": 0.25, "processed": 15},
            }
        },
    }


def test_batch_shapes_skip_what_cannot_be_asked():
    r = result([10, 20, 30], [10, 20, 40], 2)
    b = Fake(shapes={1: ([(5, "a", -0.25)], 1), 8: ([], 0)})
    ev = {"position": 2}
    go(
        tr._batch_shapes(
            sides(b, Fake()), r, {"baseline": "B"}, ev, {"candidate": LaunchSpec(values={"n_max": "7"})}, []
        )
    )
    assert b.batches == [("B", [10, 20], 3, 1), ("B", [10, 20], 3, 8)]
    assert ev == {"position": 2}  # one entry is no margin: nothing kept
    ev = {"position": 2, "batch_shapes": {"x": 1}}
    b = Fake()
    go(tr._batch_shapes(sides(b, Fake()), r, TEXT, ev, {}, []))
    assert b.batches == []  # asked already
    r = result([None, 20, 30], [None, 20, 40], 2)
    go(tr._batch_shapes(sides(b, Fake()), r, TEXT, {"position": 2}, {}, []))
    assert b.batches == []  # no prefix to ask at
    r = result([10, 20, 30], [10, 20, 40], 2)
    go(
        tr._batch_shapes(
            sides(b, Fake()), r, TEXT, {"position": 2}, {"candidate": LaunchSpec(values={"n_max": "0"})}, []
        )
    )
    assert [x[3] for x in b.batches] == [1]  # a width of one: one shape


# ------------------------------------------------------------------ numerics: near-tie or configuration


def steps(b, c, r, threshold=0.05, specs=None):
    return tr._Steps(b, c, r, GenerationParams(max_tokens=8), threshold, specs or {})


def test_numerics_an_exact_small_margin_is_a_near_tie():
    b = Fake([(30, "x", -0.25), (40, "y", -0.28125)])
    c = Fake([(40, "y", -0.25), (30, "x", -0.3125)])
    t = go(steps(b, c, result([10, 30], [10, 40], 1), threshold=0.05).numerics(None))
    assert t.cause == "near-tie"
    assert t.summary == (
        "the two chosen tokens were 0.031 nats apart at token 1 (under 0.05): a numerical difference between two "
        "almost equally likely tokens"
    )  # neither side answers a batch shape: no words about it


def test_numerics_at_the_threshold_is_a_configuration_with_its_differences():
    b = Fake([(30, "x", -0.25), (40, "y", -0.5)], info=ServerInfo(url="a", build="b1", model="m"))
    c = Fake([(40, "y", -0.25), (30, "x", -0.5)], info=ServerInfo(url="b", build="b2", model="m"))
    t = go(steps(b, c, result([10, 30], [10, 40], 1), threshold=0.25).numerics({"baseline": "--flash-attn on"}))
    assert t.cause == "configuration"
    assert t.summary == (
        "the two servers compute different distributions: build b1 vs b2; --flash-attn on vs not launched by "
        "spectui (margin at the divergence 0.250 nats)"
    )
    assert t.logprobs["margin"] == 0.25


def test_numerics_without_differences_or_evidence_says_so():
    b, c = Fake(logprobs=False), Fake(logprobs=False)
    s = steps(b, c, result([10, 30], [10, 40], 1))
    t = go(s.numerics({"baseline": "same", "candidate": "same"}))
    assert (t.cause, t.logprobs) == ("configuration", None)
    assert t.summary == "the two servers compute different distributions: no configuration difference is reported"
    t = go(steps(b, c, result([10, 30], [10, 40], 1)).numerics({"candidate": "--spec x"}))
    assert t.summary == ("the two servers compute different distributions: not launched by spectui vs --spec x")


def test_numerics_with_only_a_bound_says_it_is_a_bound():
    b = Fake([(30, "x", -0.25), (50, "z", -0.375)])  # 40 missing: ≥ 0.125
    c = Fake([(40, "y", -0.25), (30, "x", -0.75)])  # exact −0.5
    t = go(steps(b, c, result([10, 30], [10, 40], 1)).numerics(None))
    assert t.cause == "configuration"
    assert t.summary == (
        "the two servers compute different distributions: no configuration difference is reported (margin at the "
        "divergence ≥ 0.125 nats: a chosen token was outside a side's top log-probabilities, so only a bound is "
        "known)"
    )


# ------------------------------------------------------------------ promises


@pytest.mark.parametrize("cause", ["near-tie", "configuration", "nondeterminism", "cache"])
def test_a_determinism_promise_is_named_beside_the_cause(cause):
    from spectui.core.findings import Triage

    spec = LaunchSpec(argv=("python", "-m", "sglang.launch_server", "--enable-deterministic-inference"))
    t = tr._against_promises(Triage(cause, "why"), {"baseline": spec, "candidate": LaunchSpec(argv=("x",))})
    assert t.summary == (
        "why; the baseline runs with SGLang --enable-deterministic-inference: this difference breaks its promise"
    )
    assert tr._against_promises(Triage(cause, "why"), {"candidate": LaunchSpec(argv=("x",))}).summary == "why"
    lossy = Triage("lossy verification", "why")
    assert tr._against_promises(lossy, {"baseline": spec}).summary == "why"


# ------------------------------------------------------------------ the cache step (reruns written here)


class Side:
    """A side's recorded output: its tokens' bytes and its prompt-cache count."""

    def __init__(self, name, data, cached=0):
        self.name, self.data = name, data
        self.figures = SimpleNamespace(prompt_cached=cached)
        self.failed = None

    def token_bytes(self):
        return list(self.data)


class CacheFake(Fake):
    def __init__(self, reset=False, control=False):
        super().__init__()
        self.capabilities = SimpleNamespace(logprobs=False, cache_reset=reset, cache_prompt_control=control)
        self.resets = 0

    async def reset_cache(self):
        self.resets += 1
        return "slot 0 erased"


def cache_steps(monkeypatch, b_side, c_side, reruns, b=None, c=None, text=TEXT):
    """_Steps over two recorded sides; each rerun answers the next of `reruns` (None: it failed)."""
    asked = []
    answers = list(reruns)

    async def rerun(name, backend, prompt_text, params):
        asked.append((name, backend, prompt_text, params))
        return answers.pop(0)

    monkeypatch.setattr(tr, "_rerun", rerun)
    r = SimpleNamespace(baseline=b_side, candidate=c_side, rendered=dict(text))
    s = tr._Steps(b or CacheFake(), c or CacheFake(), r, GenerationParams(max_tokens=8, cache_prompt=True), 0.05, {})
    return s, asked


def test_a_cached_side_recomputed_cold_that_matches_is_the_cache(monkeypatch):
    b_side, c_side = Side("baseline", [b"ab", b"cd"], cached=56), Side("candidate", [b"ab", b"ce"])
    b = CacheFake(reset=True, control=True)
    s, asked = cache_steps(monkeypatch, b_side, c_side, [Side("baseline", [b"ab", b"ce"], cached=0)], b=b)
    t = go(s.cache())
    assert [(n, x, p.cache_prompt) for n, _b, x, p in asked] == [("baseline", "B text", False)]
    assert asked[0][1] is b and b.resets == 1
    assert t.cause == "cache"
    assert t.summary == (
        "a prompt-cache hit changed the greedy output (56 tokens reused); recomputed, the baseline is identical to "
        "the candidate"
    )
    assert t.reruns == [
        {
            "what": "baseline recomputed without its prompt cache (slot 0 erased)",
            "identical": True,
            "first_divergence": None,
            "prompt_cached_before": 56,
            "prompt_cached_now": 0,
        }
    ]


def test_a_cold_rerun_that_still_differs_is_recorded_and_the_steps_go_on(monkeypatch):
    b_side, c_side = Side("baseline", [b"ab"]), Side("candidate", [b"ab", b"cd"], cached=9)
    c = CacheFake(control=True)
    s, asked = cache_steps(monkeypatch, b_side, c_side, [Side("candidate", [b"ab", b"cx"], cached=0)], c=c)
    assert go(s.cache()) is None
    assert c.resets == 0 and asked[0][3].cache_prompt is False
    assert s.reruns == [
        {
            "what": "candidate recomputed without its prompt cache (cache_prompt: false)",
            "identical": False,
            "first_divergence": 2,  # b"ab" + b"cx" against b"ab": the baseline ends at byte 2
            "prompt_cached_before": 9,
            "prompt_cached_now": 0,
        }
    ]


def test_a_server_that_can_only_erase_keeps_the_runs_cache_setting(monkeypatch):
    b_side, c_side = Side("baseline", [b"ab"], cached=3), Side("candidate", [b"ax"])
    b = CacheFake(reset=True)
    s, asked = cache_steps(monkeypatch, b_side, c_side, [None], b=b)
    assert go(s.cache()) is None
    assert asked[0][3].cache_prompt is True and b.resets == 1
    assert s.notes == ["baseline: the cold rerun failed"] and s.reruns == []


def test_the_cache_step_skips_and_says_what_it_cannot_do(monkeypatch):
    # the baseline reused cached tokens but cannot run cold: said; the candidate's turn still comes
    b_side, c_side = Side("baseline", [b"ab"], cached=5), Side("candidate", [b"ax"], cached=4)
    c = CacheFake(reset=True)
    s, asked = cache_steps(monkeypatch, b_side, c_side, [Side("candidate", [b"ab"])], c=c)
    t = go(s.cache())
    assert s.notes == ["baseline: reused 5 cached prompt tokens but offers no way to run cold"]
    assert [a[0] for a in asked] == ["candidate"] and t.cause == "cache"
    # a side that reused nothing, or whose prompt is unknown, is not asked; the next side is
    b_side, c_side = Side("baseline", [b"ab"], cached=0), Side("candidate", [b"ax"], cached=4)
    s, asked = cache_steps(monkeypatch, b_side, c_side, [Side("candidate", [b"ab"])], c=CacheFake(control=True))
    assert go(s.cache()).cause == "cache" and [a[0] for a in asked] == ["candidate"]
    b_side = Side("baseline", [b"ab"], cached=5)
    s, asked = cache_steps(
        monkeypatch, b_side, c_side, [], b=CacheFake(control=True), c=CacheFake(), text={"candidate": "C text"}
    )
    assert go(s.cache()) is None and asked == []
    assert s.notes == ["candidate: reused 4 cached prompt tokens but offers no way to run cold"]


def test_an_unsettled_rerun_is_judged_against_the_cold_first_run(monkeypatch):
    b_side, c_side = Side("baseline", [b"ab", b"cd"]), Side("candidate", [b"ab", b"ce"])
    warm = Side("baseline", [b"ab", b"cz"], cached=56)
    s, _ = cache_steps(monkeypatch, b_side, c_side, [Side("baseline", [b"ab", b"cy"])], b=CacheFake(control=True))
    s.unsettled["baseline"] = warm
    t = go(s.cache())
    assert t.cause == "nondeterminism"
    assert t.summary == (
        "the baseline does not reproduce itself: two runs without cached prompt tokens differ at byte 3"
    )
    # the cold rerun equals the cold first run: the cache moved the rerun, not this divergence
    s, _ = cache_steps(monkeypatch, b_side, c_side, [Side("baseline", [b"ab", b"cd"])], b=CacheFake(control=True))
    s.unsettled["baseline"] = warm
    assert go(s.cache()) is None
    assert s.notes == [
        "baseline: its rerun reused 56 cached prompt tokens and differed from its first run (0): the prompt cache "
        "changes its output, though not this divergence"
    ]
    assert s.reruns[-1]["prompt_cached_before"] == 56  # the rerun's, larger than the first run's 0


def test_an_unsettled_side_with_no_cold_run_before_is_judged_on_the_other_side(monkeypatch):
    b_side, c_side = Side("baseline", [b"ab", b"cd"], cached=10), Side("candidate", [b"ab", b"ce"])
    s, _ = cache_steps(monkeypatch, b_side, c_side, [Side("baseline", [b"ab", b"ce"])], b=CacheFake(control=True))
    s.unsettled["baseline"] = Side("baseline", [b"ab", b"cz"], cached=56)
    t = go(s.cache())
    assert t.cause == "cache" and "(56 tokens reused)" in t.summary


def test_the_lossy_step_keeps_the_reruns_before_its_own():
    b = Fake([(30, "x", -0.25), (40, "y", -0.75)])
    c = Fake([(30, "x", -0.25), (40, "y", -0.75)])
    r = result([10, 20, 30], [10, 20, 40], 2, c_labels=["target", "target", "accepted"])
    s = tr._Steps(b, c, r, GenerationParams(max_tokens=8), 0.5, {})
    earlier = {"what": "candidate again under the same conditions", "identical": False, "first_divergence": 4}
    s.reruns.append(earlier)
    s.notes.append("kept")
    t = go(s.lossy())
    assert t.cause == "lossy verification" and t.reruns == [earlier] and t.notes == ["kept"]
    assert b.asked == [("B text", [10, 20], 3)] and c.asked == [("C text", [10, 20], 3)]
    s = tr._Steps(b, c, r, GenerationParams(max_tokens=8), 0.625, {})
    assert go(s.lossy()) is None  # 0.5 below the first choice, under 0.625
    spec = LaunchSpec(argv=("llama-server", "--spec-synth-rates", "0.9"))
    s = tr._Steps(b, c, r, GenerationParams(max_tokens=8), 0.5, {"candidate": spec})
    assert go(s.lossy()).logprobs["lossy_settings"] == ["--spec-synth-rates 0.9"]
    same = ServerInfo(url="a", build="b1", model="m.gguf")
    b = Fake([(30, "x", -0.25), (40, "y", -0.75)], info=same)
    c = Fake(logprobs=False, info=same)
    s = tr._Steps(b, c, r, GenerationParams(max_tokens=8), 0.5, {})
    assert "from the baseline's log-probabilities" in go(s.lossy()).summary


# ------------------------------------------------------------------ what the first round left alive


def test_two_promises_and_two_lossy_settings_are_listed_with_commas():
    from spectui.core.findings import Triage

    spec = LaunchSpec(argv=("python", "-m", "sglang.launch_server", "--enable-deterministic-inference"))
    t = tr._against_promises(Triage("configuration", "why"), {"baseline": spec, "candidate": spec})
    assert t.summary == (
        "why; the baseline runs with SGLang --enable-deterministic-inference, the candidate runs with SGLang "
        "--enable-deterministic-inference: this difference breaks its promise"
    )
    b, c, r = lossy_case([(30, "x", -0.25), (40, "y", -0.75)])
    spec = LaunchSpec(argv=("llama-server", "--spec-synth-len", "4", "--spec-synth-rates", "0.9"))
    t = go(tr._lossy(sides(b, c), r, TEXT, [], 0.05, {"candidate": spec}, b, c))
    assert t.summary.endswith(
        "; the candidate runs with --spec-synth-len 4, --spec-synth-rates 0.9, which accepts drafts without the "
        "target's agreement"
    )


def test_small_edges_of_the_helpers():
    # an entry with no text is still its id's log-probability
    assert tr._below_first([(5, None, -0.25), (6, "b", -0.75)], 5) == (0.0, True)
    a = ServerInfo(url="a", build=None, model="m")
    b = ServerInfo(url="b", build="b1", model="m")
    assert tr._config_differences(Fake(info=a), Fake(info=b)) == ["build ? vs b1"]
    r = result([1, 2, 3], [1, 2, 3], 0, c_steps=[1, 1, 2])
    assert tr._verify_width({}, r) == 2  # two tokens in step 1: k + 1 = 2


def test_a_side_that_fails_to_answer_does_not_stop_the_other():
    b = Fake(fail=RuntimeError("boom"))
    c = Fake([(40, "y", -0.25), (30, "x", -0.5)])
    notes: list[str] = []
    ev = go(tr._near_tie(sides(b, c), result([10, 30], [10, 40], 1), TEXT, notes))
    assert notes == ["baseline: log-probabilities unavailable (RuntimeError: boom)"]
    assert ev["candidate_margin"] == -0.25 and ev["margin"] == -0.25


def test_near_tie_with_one_list_and_no_chosen_token_on_one_side_keeps_the_list():
    # the candidate ended at the divergence (no token there); the baseline's token is not in its list
    b = Fake([(50, "z", -0.25)])
    ev = go(tr._near_tie(sides(b, Fake(logprobs=False)), result([10, 30], [10], 1), TEXT, []))
    assert ev == {"position": 1, "baseline_token": 30, "candidate_token": None, "baseline": [["z", -0.25]]}


def test_batch_shapes_go_on_to_the_wider_shape_past_a_short_answer():
    shapes = {1: ([(5, "a", -0.25)], 3), 4: ([(6, "b", -0.5), (5, "a", -0.75)], 7)}
    b = Fake(shapes=shapes)
    ev = {"position": 1}
    go(tr._batch_shapes(sides(b, Fake()), result([10, 30], [10, 40], 1), {"baseline": "B"}, ev, {}, []))
    assert ev["batch_shapes"] == {"baseline": {"4": {"top": 6, "top_text": "b", "margin": 0.25, "processed": 7}}}


FLIP = {1: ([(30, "x", -0.25), (40, "y", -0.5)], 5), 4: ([(40, "y", -0.25), (30, "x", -0.375)], 8)}


def test_numerics_words_the_batch_shapes_for_either_cause():
    b = Fake([(30, "x", -0.25), (40, "y", -0.28125)], shapes=FLIP)
    c = Fake([(40, "y", -0.25), (30, "x", -0.3125)])
    t = go(steps(b, c, result([10, 30], [10, 40], 1), threshold=0.05).numerics(None))
    assert t.cause == "near-tie" and t.summary.endswith(
        "equally likely tokens; batch shape: the baseline's target picks 'x' at M = 1 and 'y' at M = 4 "
        "(margins 0.250, 0.125 nats)"
    )
    t = go(steps(b, c, result([10, 30], [10, 40], 1), threshold=0.01).numerics(None))
    assert t.cause == "configuration" and t.summary == (
        "the two servers compute different distributions: no configuration difference is reported (margin at the "
        "divergence 0.031 nats); batch shape: the baseline's target picks 'x' at M = 1 and 'y' at M = 4 (margins "
        "0.250, 0.125 nats)"
    )


# ------------------------------------------------------------------ the whole triage and its first step


class Rich(Side):
    """A recorded side with token ids and labels too (for the steps that ask log-probabilities)."""

    def __init__(self, name, data, cached=0, ids=(), labels=()):
        super().__init__(name, data, cached)
        self.tokens = [tok(i, lab) for i, lab in zip(ids, labels or ["target"] * len(ids), strict=True)]


def whole(b_side, c_side, text=TEXT, failed=False, at=1):
    return SimpleNamespace(
        baseline=b_side,
        candidate=c_side,
        rendered=dict(text),
        divergence=None if at is None else SimpleNamespace(baseline_token=at, candidate_token=at),
        failed=failed,
    )


def test_triage_runs_only_on_a_divergent_prompt_that_did_not_fail(monkeypatch):
    asked = []

    async def rerun(*a):
        asked.append(a)
        return None

    monkeypatch.setattr(tr, "_rerun", rerun)
    b_side, c_side = Rich("baseline", [b"ab"], ids=[1]), Rich("candidate", [b"ax"], ids=[1])
    p = GenerationParams(max_tokens=8)
    assert go(tr.triage(Fake(), Fake(), whole(b_side, c_side, at=None), p)) is None
    assert go(tr.triage(Fake(), Fake(), whole(b_side, c_side, failed=True), p)) is None
    assert asked == []


def test_the_whole_triage_hands_on_the_launch_notes_and_the_promises(monkeypatch):
    async def rerun(name, backend, text, params):
        return {"baseline": b_side, "candidate": c_side}[name]  # each side reproduces itself

    monkeypatch.setattr(tr, "_rerun", rerun)
    b_side = Rich("baseline", [b"a", b"b"], ids=[1, 2])
    c_side = Rich("candidate", [b"a", b"c"], ids=[1, 3])
    b, c = Fake(logprobs=False), Fake(logprobs=False)
    det = LaunchSpec(argv=("python", "-m", "sglang.launch_server", "--enable-deterministic-inference"))
    t = go(
        tr.triage(
            b,
            c,
            whole(b_side, c_side),
            GenerationParams(max_tokens=8),
            launched={"candidate": "--spec x"},
            specs={"candidate": det},
        )
    )
    assert t.cause == "configuration"
    assert t.summary == (
        "the two servers compute different distributions: not launched by spectui vs --spec x; the candidate runs "
        "with SGLang --enable-deterministic-inference: this difference breaks its promise"
    )
    assert t.reruns == [
        {"what": "baseline again under the same conditions", "identical": True, "first_divergence": None},
        {"what": "candidate again under the same conditions", "identical": True, "first_divergence": None},
    ]


def run_to_run(monkeypatch, b_side, c_side, reruns, b=None, c=None, text=TEXT, threshold=0.05):
    asked = []
    answers = dict(reruns)

    async def rerun(name, backend, prompt_text, params):
        asked.append((name, prompt_text))
        return answers[name]

    monkeypatch.setattr(tr, "_rerun", rerun)
    r = whole(b_side, c_side, text)
    s = tr._Steps(b or CacheFake(), c or CacheFake(), r, GenerationParams(max_tokens=8), threshold, {})
    return s, asked


def test_run_to_run_says_what_it_could_not_rerun_and_goes_on(monkeypatch):
    b_side, c_side = Rich("baseline", [b"ab"], ids=[1]), Rich("candidate", [b"ax"], ids=[1])
    s, asked = run_to_run(monkeypatch, b_side, c_side, {"candidate": None}, text={"candidate": "C"})
    assert go(s.run_to_run()) is None
    assert asked == [("candidate", "C")]
    assert s.notes == ["baseline: its rendered prompt is unknown; no rerun", "candidate: the rerun failed"]
    s, asked = run_to_run(monkeypatch, b_side, c_side, {"baseline": None, "candidate": c_side})
    assert go(s.run_to_run()) is None
    assert asked == [("baseline", "B text"), ("candidate", "C text")] and s.notes == ["baseline: the rerun failed"]
    assert s.reruns == [
        {"what": "candidate again under the same conditions", "identical": True, "first_divergence": None}
    ]


def test_a_side_that_moves_is_nondeterminism_said_with_the_cache_counts(monkeypatch):
    b_side, c_side = Rich("baseline", [b"ab", b"cd"], ids=[1, 2]), Rich("candidate", [b"ab", b"ce"], ids=[1, 3])
    moved = Rich("baseline", [b"ab", b"cx"], cached=56, ids=[1, 4])
    s, _ = run_to_run(monkeypatch, b_side, c_side, {"baseline": moved})  # no way to run cold
    t = go(s.run_to_run())
    assert t.cause == "nondeterminism"
    assert t.summary == (
        "the baseline does not reproduce itself: its rerun differs from its first run at byte 3 (its rerun reused 56 "
        "cached prompt tokens, its first run 0; the server offers no cold run to tell the cache from nondeterminism)"
    )
    assert t.reruns == [{"what": "baseline again under the same conditions", "identical": False, "first_divergence": 3}]
    same_cache = Rich("baseline", [b"ab", b"cx"], ids=[1, 4])
    s, _ = run_to_run(monkeypatch, b_side, c_side, {"baseline": same_cache})
    assert go(s.run_to_run()).summary == (
        "the baseline does not reproduce itself: its rerun differs from its first run at byte 3"
    )


def test_a_move_under_another_cache_state_waits_for_the_cache_step(monkeypatch):
    b_side, c_side = Rich("baseline", [b"ab", b"cd"], ids=[1, 2]), Rich("candidate", [b"ab", b"ce"], ids=[1, 3])
    moved = Rich("baseline", [b"ab", b"cx"], cached=56, ids=[1, 4])
    for caps in ({"control": True}, {"reset": True}):
        s, asked = run_to_run(
            monkeypatch, b_side, c_side, {"baseline": moved, "candidate": c_side}, b=CacheFake(**caps)
        )
        assert go(s.run_to_run()) is None
        assert s.unsettled == {"baseline": moved} and [a[0] for a in asked] == ["baseline", "candidate"]


def test_a_candidate_that_moves_on_an_accepted_draft_is_lossy_with_a_note(monkeypatch):
    top = [(2, "x", -0.25), (3, "y", -0.75)]  # the target's first choice 2; the candidate took 3, 0.5 below
    b_side = Rich("baseline", [b"ab", b"cd"], ids=[1, 2])
    c_side = Rich("candidate", [b"ab", b"ce"], ids=[1, 3], labels=["target", "accepted"])
    moved = Rich("candidate", [b"ab", b"cz"], ids=[1, 4])
    b, c = Fake(top), Fake(top)
    s, _ = run_to_run(monkeypatch, b_side, c_side, {"baseline": b_side, "candidate": moved}, b=b, c=c)
    t = go(s.run_to_run())
    assert t.cause == "lossy verification"
    assert t.notes == [
        "the candidate's rerun also differed from its first run at byte 3: a verifier that accepts drafts at random "
        "moves from run to run unless the request is seeded"
    ]
    assert [r["what"] for r in t.reruns] == [
        "baseline again under the same conditions",
        "candidate again under the same conditions",
    ]
    # the same move on the baseline's side is nondeterminism: only the candidate verifies drafts
    b_side2 = Rich("baseline", [b"ab", b"cd"], ids=[1, 2], labels=["target", "accepted"])
    s, _ = run_to_run(
        monkeypatch, b_side2, c_side, {"baseline": Rich("baseline", [b"ab", b"cz"], ids=[1, 4])}, b=b, c=c
    )
    assert go(s.run_to_run()).cause == "nondeterminism"


def test_a_failed_rerun_is_none_and_a_whole_one_is_kept():
    from spectui.core.events import StreamFailed, StreamFinished, StreamStarted, TokenEvent

    class Streamer:
        info = None

        def __init__(self, fail):
            self.fail = fail

        async def counters(self):
            return None

        async def stream(self, text, params):
            yield StreamStarted(1, text)
            yield TokenEvent(0, 7, b"ok", 2, "target")
            yield StreamFailed(3, "gone") if self.fail else StreamFinished(3, "limit")

    p = GenerationParams(max_tokens=8)
    assert go(tr._rerun("baseline", Streamer(True), "hi", p)) is None
    rec = go(tr._rerun("baseline", Streamer(False), "hi", p))
    assert rec.token_bytes() == [b"ok"] and rec.failed is None


def test_batch_shapes_skip_a_side_whose_prompt_is_unknown_and_ask_the_other():
    shapes = {1: ([(6, "b", -0.5), (5, "a", -0.75)], 7)}
    b, c = Fake(shapes=shapes), Fake(shapes=shapes)
    ev = {"position": 1}
    spec = {"candidate": LaunchSpec(values={"n_max": "0"})}  # a width of one: M = 1 only
    go(tr._batch_shapes(sides(b, c), result([10, 30], [10, 40], 1), {"candidate": "C"}, ev, spec, []))
    assert b.batches == [] and c.batches == [("C", [10], 3, 1)]
    assert ev["batch_shapes"] == {"candidate": {"1": {"top": 6, "top_text": "b", "margin": 0.25, "processed": 7}}}
