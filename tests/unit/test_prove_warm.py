"""A certificate's warm passes (run.prove.warm): each pass of a stateful drafter judged apart, the requests it
had been sent counted in recorded order, a prompt run cold only making IDENTICAL incomplete."""

from __future__ import annotations

from types import SimpleNamespace

from spectui.run.prove.warm import judged, warm_json


def result(types: str, identical: bool, drafted: int):
    fin = SimpleNamespace(settings={"speculative.types": types})
    fig = SimpleNamespace(drafted=drafted, accepted=drafted)
    return SimpleNamespace(run=1, identical=identical, candidate=SimpleNamespace(finished=fin, figures=fig))


def groups_and_sessions(types: str, flags: dict[str, list[bool]]):
    """Groups as derive makes them (each result's own run field left at 1, as greedy_groups leaves it) and one
    session whose records ran prompt by prompt."""
    groups, records = [], []
    for pid, runs in flags.items():
        g = SimpleNamespace(id=pid, runs=[])
        for k, same in enumerate(runs, 1):
            g.runs.append(SimpleNamespace(result=result(types, same, 0 if k == 1 else 50), run=k))
            records.append(SimpleNamespace(prompt=SimpleNamespace(id=pid), result={"run": k}))
        groups.append(g)
    return groups, [SimpleNamespace(prompts=records)]


def test_warm_passes_from_recorded_runs():
    groups, sessions = groups_and_sessions(
        "none,ngram-mod", {"a": [True, False, False], "b": [True, True, False], "c": [True, True, True]}
    )
    w, problems = warm_json(groups, sessions)
    assert problems == [] and w is not None and w["state_dependent"]
    assert [(p["pass"], p["differs"], p["requests_seen"]) for p in w["passes"]] == [
        (1, 0, [0, 6]),
        (2, 1, [1, 7]),
        (3, 2, [2, 8]),
    ]
    assert w["line"].startswith("identical cold (3/3), differs warm on 1/3 (pass 2), 2/3 (pass 3): state-dependent")
    # each moved prompt: identical cold, which warm runs differ, what was drafted in each run
    assert w["prompts"] == [
        {"id": "a", "cold_identical": True, "differs_in_runs": [2, 3], "drafted": [0, 50, 50], "state_dependent": True},
        {"id": "b", "cold_identical": True, "differs_in_runs": [3], "drafted": [0, 50, 50], "state_dependent": True},
    ]
    from spectui.run.prove.render import warm_prompts

    assert warm_prompts(w)[0].startswith("a: identical cold, differs in run(s) 2, 3; drafted 0/50/50 tokens by run")
    v = judged({"status": "different", "line": "DIFFERENT on 2/3 (greedy)"}, {"warm_passes": w})
    assert v["status"] == "different" and "state-dependent" in v["line"]


def test_no_warm_block_for_a_drafter_without_state():
    groups, sessions = groups_and_sessions("none,draft-simple", {"a": [True, True]})
    assert warm_json(groups, sessions) == (None, [])


def test_a_stateful_drafter_run_cold_only_makes_identical_incomplete():
    groups, sessions = groups_and_sessions("none,ngram-mod", {"a": [True], "b": [True]})
    w, problems = warm_json(groups, sessions)
    assert w is not None and w["cold_only"] == ["a", "b"] and "--runs 2" in problems[0]
    v = judged({"status": "identical", "line": "IDENTICAL on 2/2 (greedy)"}, {"warm_passes": w})
    assert v["status"] == "incomplete" and v["line"].startswith("INCOMPLETE: IDENTICAL on 2/2")
    # one server at a time starts the candidate anew each pass: no run of it was warm
    groups, sessions = groups_and_sessions("none,ngram-mod", {"a": [True, True]})
    w, problems = warm_json(groups, sessions, alone=True)
    assert w is not None and w["cold_only"] == ["a"] and "every run" in problems[0]
