import pytest

from spectui.core.errors import InputError
from spectui.labs.theory import formula as theory


def test_leviathan_worked_example():
    assert theory.tokens_per_step(0.8, 4) == pytest.approx(3.3616, abs=1e-4)
    assert round(theory.speedup(0.8, 4, 0.05), 2) == 2.80


def test_break_even_gives_speedup_one():
    for gamma, cost in ((4, 0.05), (3, 0.3), (8, 0.1)):
        a = theory.break_even_alpha(gamma, cost)
        assert a is not None
        assert theory.speedup(a, gamma, cost) == pytest.approx(1.0, abs=1e-6)


def test_no_break_even_when_draft_costs_as_much_as_target():
    # (γ+1)/(γc+1) ≤ 1 for c = 1: a draft as slow as the target never pays
    assert theory.break_even_alpha(4, 1.0) is None


def test_zero_cost_breaks_even_at_zero():
    assert theory.break_even_alpha(4, 0.0) == 0.0


def test_best_gamma_grows_with_alpha():
    assert theory.best_gamma(0.9, 0.05)[0] > theory.best_gamma(0.5, 0.05)[0]


@pytest.mark.parametrize("alpha,gamma,cost", [(1.0, 4, 0.1), (-0.1, 4, 0.1), (0.5, 0, 0.1), (0.5, 4, -1)])
def test_invalid_inputs(alpha, gamma, cost):
    with pytest.raises(InputError):
        theory.speedup(alpha, gamma, cost)


def test_cli_theory_errors_are_one_line(capsys):
    from spectui.cli.main import main

    assert main(["theory", "--alpha", "1.2", "--gamma", "4", "--cost", "0.05"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "[0, 1)" in err


# -- the measured point: a synthetic stream that follows Leviathan's model exactly --------------------


def leviathan_result(alpha, gamma, cost, steps=4000, plain_every=0, seed=0, baseline_tps=100.0):
    """A compared prompt whose candidate follows the paper: each verification step drafts γ tokens, each
    accepted with probability α given the ones before were, and costs (γc + 1) target steps; with
    `plain_every` = k, every k-th step has an empty draft (llama.cpp does not count it as a step) and costs
    one target step. Both sides' events go through the recorders, as a live stream's would."""
    import random

    from spectui.core.events import StepEvent, StreamFinished, StreamStarted, TokenEvent
    from spectui.core.figures import SideRecorder
    from spectui.core.runner import PromptResult
    from spectui.core.types import Prompt

    rng = random.Random(seed)
    t_ms = 1000.0 / baseline_tps  # one target step
    cand = SideRecorder("candidate")
    cand.feed(StreamStarted(0, "p"))
    n, now, k = 1, 0.0, 0
    cand.feed(TokenEvent(0, 1, b"x", 1, "first"))
    for j in range(steps):
        if plain_every and j % plain_every == 0:
            now += t_ms
            cand.feed(TokenEvent(n, 1, b"x", int(now * 1e6) + 1, "target"))
            n += 1
            continue
        a = 0
        while a < gamma and rng.random() < alpha:
            a += 1
        k += 1
        now += t_ms * (gamma * cost + 1)
        cand.feed(StepEvent(k, gamma, a, int(now * 1e6)))
        for i in range(a + 1):
            cand.feed(TokenEvent(n, 1, b"x", int(now * 1e6) + 1, "accepted" if i < a else "target"))
            n += 1
    timings = {"predicted_n": n, "predicted_ms": now}
    cand.feed(StreamFinished(int(now * 1e6) + 2, "limit", timings, tokens_predicted=n))
    base = SideRecorder("baseline")
    base.feed(StreamStarted(0, "p"))
    for i in range(n):
        base.feed(TokenEvent(i, 1, b"x", int(i * t_ms * 1e6) + 1, "first" if i == 0 else "unknown"))
    base.feed(StreamFinished(int(n * t_ms * 1e6), "limit", {"predicted_n": n, "predicted_ms": (n - 1) * t_ms}))
    return PromptResult(Prompt("p"), base, cand)


@pytest.mark.parametrize("alpha,gamma,cost", [(0.8, 4, 0.0), (0.8, 4, 0.05), (0.6, 3, 0.2), (0.9, 8, 0.02)])
def test_a_synthetic_leviathan_stream_lands_on_its_own_curve(alpha, gamma, cost):
    m = theory.from_result(leviathan_result(alpha, gamma, cost))
    # the case that was wrong (0.8, 4, 0): accepted/drafted said α 0.59 and predicted 2.27× against 3.36× measured
    assert m["alpha"] == pytest.approx(alpha, abs=0.01)
    assert m["acceptance_per_drafted_token"] == pytest.approx(
        sum(alpha**i for i in range(1, gamma + 1)) / gamma, abs=0.01
    )
    on_curve = theory.speedup(m["alpha"], gamma, cost)
    assert on_curve == pytest.approx(m["measured_speedup"], rel=0.02)
    assert m["implied_cost"] == pytest.approx(cost, abs=0.005)
    assert "runs" not in m["why"]


def test_empty_draft_steps_do_not_inflate_the_implied_cost():
    # the case that was wrong: half the steps plain, a free draft: c came out 0.2 and "a verification step took
    # 1.6× a target step" (truth 1.0×)
    m = theory.from_result(leviathan_result(0.8, 4, 0.0, plain_every=2))
    assert m["implied_cost"] == pytest.approx(0.0, abs=0.005)
    assert m["step_time_over_target_step"] == pytest.approx(1.0, abs=0.01)
    assert m["alpha"] == pytest.approx(0.8, abs=0.015) and m["plain_tokens"] > 0
    m = theory.from_result(leviathan_result(0.7, 5, 0.1, plain_every=3))
    assert m["implied_cost"] == pytest.approx(0.1, abs=0.005)


def test_alpha_per_position_inverts_the_sum():
    from spectui.core.figures import per_position_alpha

    assert per_position_alpha(0.8 + 0.64 + 0.512 + 0.4096, 4, 1) == pytest.approx(0.8)
    assert per_position_alpha(0, 4, 1) == 0.0 and per_position_alpha(8, 8, 2) == 1.0
    assert per_position_alpha(3, 0, 0) is None


def test_compare_json_carries_alpha_per_position_beside_acceptance_per_drafted_token():
    from spectui.core.report import side_json

    r = leviathan_result(0.8, 4, 0.0, steps=500)
    d = side_json(r.candidate)
    assert d["alpha_per_position"] == pytest.approx(0.8, abs=0.03)
    assert d["acceptance_rate"] == pytest.approx(0.59, abs=0.03)
