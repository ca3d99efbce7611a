"""The theory verdict: "agrees" only where the measured interval could have disagreed, its width shown; terms that
were assumed (--no-measure) never "account for" the speed-up nor give a break-even "with the measured costs"."""

from __future__ import annotations

from spectui.labs.theory.steps import RunSteps
from spectui.labs.theory.terms import StepCosts, check

MEASURED = {"c": "measured: a", "verify": "measured: b", "reeval": "measured: c"}
RUN = RunSteps(drafted=(4,) * 10, accepted=(3,) * 10, plain=0, n_max=4)
COSTS = StepCosts(0.05, (1.0, 1.2, 1.4, 1.6, 1.8), (), MEASURED)


def first() -> tuple[float, float]:
    probe = check(RUN, COSTS, 1.0, 0.5, 1.5, runs=3)
    return probe.predicted, probe.terms[0].speedup  # the prediction, and the ideal formula's speed-up


def test_a_narrow_interval_around_the_prediction_agrees_and_shows_its_width():
    predicted, ideal = first()
    assert ideal > predicted * 1.2  # the ideal promises more: a narrow interval can tell them apart
    chk = check(RUN, COSTS, predicted, predicted * 0.97, predicted * 1.03, runs=3)
    assert chk.agree is True
    text = chk.text()
    assert "account for the measured speed-up" in text
    assert f"(width {predicted * 0.06:.2f}×)" in text


def test_an_interval_that_holds_the_ideal_too_is_too_few_runs_not_agreement():
    predicted, ideal = first()
    chk = check(RUN, COSTS, predicted, predicted * 0.9, ideal * 1.1, runs=2)
    assert chk.agree is None and chk.miss is None
    text = chk.text()
    assert "too few runs to test the prediction" in text and "account for" not in text
    assert f"also holds the ideal formula's {ideal:.2f}×" in text


def test_assumed_terms_never_account_for_nor_give_a_measured_break_even():
    ideal_costs = StepCosts.ideal(0.0, "not measured (--no-measure)")
    assert ideal_costs.none_measured
    _, ideal = first()
    chk = check(RUN, ideal_costs, ideal, ideal * 0.9, ideal * 1.1, runs=3)
    text = chk.text()
    assert "account for" not in text
    assert "with the measured costs" not in text
    assert "with the ideal costs (c = 0, V = 1, R = 0 assumed)" in text
    assert "not a test of it" in text


def test_the_servers_edges_are_charged_as_it_runs_them():
    from spectui.labs.theory.steps import edge_caps

    # n_predict 10: the first token from the prompt; a step of 4 tokens drafts under cap 10 − 1 − 1 = 8,
    # the next (5 made) under 4, then the last plain token (9 made) has cap 0: no draft call
    assert edge_caps([4, 4, 1], [True, True, False], 10) == ([8, 4], 1)
    assert edge_caps([4, 1], [True, False], None) == ([], 0)
    costs = StepCosts(0.1, (1.0, 1.5, 2.0, 2.5), (), MEASURED)
    run = RunSteps(drafted=(3, 1), accepted=(3, 0), plain=1, n_max=3, caps=(8, 1), undrafted=1)
    # step 1: 3 drafted at its limit 3 → 3 decodes + V(4): 0.3 + 2.5; step 2: 1 drafted at the cap 1 → 1
    # decode + V(2): 0.1 + 1.5; the last token: no draft decode, V(1) = 1.0
    assert abs(run.cost(costs) - (2.8 + 1.6 + 1.0)) < 1e-9
    old = RunSteps(drafted=(3, 1), accepted=(3, 0), plain=1, n_max=3)
    assert abs(old.cost(costs) - (2.8 + 1.7 + 1.1)) < 1e-9  # without the edges: a decode too many twice
    chk = check(run, costs, 1.0, 0.9, 1.1, runs=3)
    assert any("1 draft(s) capped at n_remaining − 1" in n and "1 final step(s)" in n for n in chk.notes)


def test_a_recorded_llama_server_stream_has_its_last_draft_capped_at_n_remaining_minus_one():
    from pathlib import Path

    from spectui.backends.labeller import LlamaCppLabeller
    from spectui.backends.recorded import load_payloads
    from spectui.core.events import StreamStarted
    from spectui.core.figures import SideRecorder
    from spectui.labs.theory.steps import run_steps

    data = Path(__file__).resolve().parent.parent / "data" / "llamacpp-b11434-draft-simple-fizzbuzz.sse"
    lab, rec = LlamaCppLabeller(), SideRecorder("candidate")
    rec.feed(StreamStarted(10, "x"))
    for k, obj in enumerate(load_payloads(data)):
        for ev in lab.feed(obj, 1_000 + 37 * k):
            rec.feed(ev)
    assert rec.finished is not None and rec.finished.settings["n_predict"] == 64  # kept by the labeller
    run = run_steps(rec)
    assert run is not None and len(run.caps) == len(run.drafted)
    assert run.caps[0] == 64 - 1 - 1  # one token made (the prompt's) before the first step
    # each later cap: n_predict − the tokens made before that step − 1, counted here from the steps
    made = 1
    for a, cap in zip(run.accepted, run.caps, strict=True):  # no plain steps in this stream
        assert cap == 64 - made - 1
        made += a + 1
    assert run.drafted[-1] == run.caps[-1] == 7  # the last draft stopped at the cap, not at 8
