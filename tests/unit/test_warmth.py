"""Passes judged apart for a drafter that keeps state (core.warmth), and the server's per-position counter beside
spectui's count from the stream (core.figures)."""

from __future__ import annotations

from types import SimpleNamespace

from spectui.core.events import StepEvent
from spectui.core.figures import per_position_check, stream_per_position
from spectui.core.warmth import warm_passes

NOTE = "stateful: ngram-mod keeps state across requests"


def res(run, identical, drafted=0, accepted=0):
    fig = SimpleNamespace(drafted=drafted, accepted=accepted)
    return SimpleNamespace(run=run, identical=identical, candidate=SimpleNamespace(figures=fig))


def prompt_major(cold, *warm):
    """Results as run_prompts makes them: each prompt's runs one after another. `cold`/`warm`: identical flags
    per prompt for each pass."""
    out = []
    for i in range(len(cold)):
        out.append(res(1, cold[i], drafted=2 if i == 0 else 0))
        for k, flags in enumerate(warm, 2):
            out.append(res(k, flags[i], drafted=40, accepted=38))
    return out


def test_identical_cold_differs_warm_is_state_dependent():
    results = prompt_major([True] * 8, [False] * 6 + [True] * 2, [False] * 5 + [True] * 3)
    w = warm_passes(results, NOTE)
    assert w is not None and w.state_dependent
    assert [(p.run, p.compared, p.differs) for p in w.passes] == [(1, 8, 0), (2, 8, 6), (3, 8, 5)]
    assert w.line.startswith("identical cold (8/8), differs warm on 6/8 (pass 2), 5/8 (pass 3): state-dependent")
    assert "drafted 2 tokens cold, 320/320 warm" in w.line and NOTE in w.line
    # how warm: the requests the candidate had been sent before each warm run (in the order they ran)
    assert w.passes[1].seen == (1, 22) and w.passes[0].seen == (0, 21)
    assert w.to_json()["passes"][1]["requests_seen"] == [1, 22]


def test_no_finding_for_a_drafter_without_state_and_one_pass_is_cold_only():
    results = prompt_major([True] * 4, [False] * 4)
    assert warm_passes(results, None) is None
    one = warm_passes(prompt_major([True] * 4), NOTE)
    assert one is not None and not one.state_dependent and "one pass only, cold" in one.line


def test_identical_warm_and_different_cold_are_said_as_they_are():
    same = warm_passes(prompt_major([True] * 3, [True] * 3), NOTE)
    assert same is not None and not same.state_dependent
    assert same.line.startswith("identical cold (3/3), identical warm on every pass (2)")
    cold = warm_passes(prompt_major([False, True, True], [False, False, True]), NOTE)
    assert cold is not None and not cold.state_dependent  # it differed cold already: not the state's doing alone
    assert cold.line.startswith("differs cold on 1/3, differs warm on 2/3 (pass 2);")


def steps(*accepted_drafted):
    return [StepEvent(i, d, a, 0) for i, (a, d) in enumerate(accepted_drafted, 1)]


def test_per_position_from_the_stream_counts_steps_that_accepted_past_each_position():
    assert stream_per_position(steps((3, 4), (1, 4), (0, 4), (4, 4))) == [3, 2, 2, 1]
    assert stream_per_position([]) == []


def test_the_servers_counter_is_shown_beside_the_stream_count_and_disagreement_named():
    stream = stream_per_position(steps((3, 4), (1, 4)))
    ok = per_position_check([2.0, 1.0, 1.0, 0.0, 0.0], stream)
    assert ok == "accepted per position: server 2 1 1 = stream (agree)"
    bad = per_position_check([2.0, 2.0, 1.0] + [0.0] * 61, stream)
    assert bad is not None and "DISAGREE at 1 position(s), first 1: server 2, stream 1" in bad
    assert per_position_check(None, stream) is None
    # ngram-mod drafts 64 at once: a long run of one value is written value×count
    assert per_position_check([3.0, 1.0] + [1.0] * 58 + [0.0] * 4, [3] + [1] * 59) == (
        "accepted per position: server 3 1×59 = stream (agree)"
    )
