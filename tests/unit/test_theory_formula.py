"""Mutation survivors of spectui/labs/theory/formula.py: every expected value is worked by hand in the test
(Leviathan et al. 2023: E = 1 + Σ_{i=1..γ} α^i = (1−α^(γ+1))/(1−α), S = E/(γc+1)), never read back from
the code under test."""

from __future__ import annotations

import pytest
from scipy.optimize import brentq

from spectui.core.errors import InputError
from spectui.core.events import StreamFailed, StreamFinished, StreamStarted, TokenEvent
from spectui.core.figures import SideRecorder
from spectui.core.runner import PromptResult
from spectui.core.types import Prompt
from spectui.labs.theory import formula


def test_tokens_per_step_safe_is_the_geometric_sum():
    # α = 0.5, γ = 2: 1 + 0.5 + 0.25
    assert formula.tokens_per_step_safe(0.5, 2) == pytest.approx(1.75)


def test_best_gamma_takes_gamma_one_when_drafting_barely_pays():
    # α = 0.1, c = 0.5: S(1) = 1.1/1.5, S(2) = 1.11/2, and S keeps falling with γ
    g, s = formula.best_gamma(0.1, 0.5)
    assert g == 1
    assert s == pytest.approx(1.1 / 1.5)


def test_best_gamma_stops_at_32_by_default_and_at_max_gamma():
    # c = 0: S = E rises with γ, so the largest γ searched wins: 32 by default
    g, s = formula.best_gamma(0.99, 0.0)
    assert g == 32
    assert s == pytest.approx(sum(0.99**i for i in range(33)))
    g, s = formula.best_gamma(0.99, 0.0, max_gamma=5)
    assert g == 5
    assert s == pytest.approx(sum(0.99**i for i in range(6)))


def test_break_even_at_gamma_one():
    # γ = 1, c = 0.5: S = (1 + α)/1.5 = 1 at α = 0.5
    assert formula.break_even_alpha(1, 0.5) == pytest.approx(0.5, abs=1e-6)
    # γ = 1, c = 1: S(α→1) = 2/2 = 1, never above: no break-even
    assert formula.break_even_alpha(1, 1.0) is None


def test_implied_cost_without_a_token_count():
    # 10 steps, 20 accepted: 30 tokens; at 2× the decode took 15 target steps → 1.5 per step, c = 0.5/4
    assert formula._implied_cost(2.0, 4.0, 10, 20, None) == pytest.approx((0, 1.5, 0.125))
    # tokens = 0 is no count either
    assert formula._implied_cost(2.0, 4.0, 10, 20, 0) == pytest.approx((0, 1.5, 0.125))
    # at 4×: 7.5 target steps, 0.75 per step (below 1: c clamps to 0)
    assert formula._implied_cost(4.0, 4.0, 10, 20, None) == pytest.approx((0, 0.75, 0.0))


def test_implied_cost_with_one_token():
    # tokens = 1 is a count: window 1/2 target step, 0.05 per step, no plain step
    assert formula._implied_cost(2.0, 4.0, 10, 20, 1) == pytest.approx((0, 0.05, 0.0))


def test_from_measurement_fills_the_formula():
    # 10 steps, 40 drafted (γ = 4), 20 accepted; 10 → 20 tok/s (2×); no token count
    out = formula.from_measurement(10.0, 20.0, 40, 20, 10)
    a = out["alpha_per_position"]
    assert sum(a**i for i in range(1, 5)) == pytest.approx(2.0, abs=1e-9)  # Σ α^i = accepted/steps
    assert out["alpha"] == pytest.approx(a)
    assert out["verification_steps"] == 10
    assert out["plain_tokens"] is None
    assert out["measured_tokens_per_step"] == pytest.approx(3.0)  # 1 + 20/10
    assert out["predicted_speedup_free_draft"] == pytest.approx(3.0)  # 1 + Σ α^i
    assert out["predicted_tokens_per_step"] == pytest.approx(3.0)
    # implied c = (15/10 − 1)/4 = 0.125, so S = 3/(4·0.125 + 1) = 2
    assert out["implied_cost"] == pytest.approx(0.125)
    assert out["predicted_speedup"] == pytest.approx(2.0)


def test_from_measurement_nothing_accepted():
    out = formula.from_measurement(10.0, 8.0, 40, 0, 10)
    assert out["alpha"] == 0.0
    assert out["predicted_speedup_free_draft"] == pytest.approx(1.0)  # E = 1 at α = 0


def test_from_measurement_needs_steps_and_drafts():
    assert formula.from_measurement(10.0, 20.0, 40, 20, 0) is None
    assert formula.from_measurement(10.0, 20.0, 0, 0, 10) is None


TAIL = (
    " — on compute-bound hardware (a CPU) or under batching, verifying γ+1 tokens is not one step's cost, "
    "so the payoff shrinks or reverses."
)


def _filled():
    return {
        "alpha": 0.5,
        "gamma": 4.0,
        "acceptance_per_drafted_token": 0.5,
        "step_time_over_target_step": 1.5,
        "measured_speedup": 2.0,
        "implied_cost": 0.3,
        "predicted_speedup_free_draft": 1.9375,
        "predicted_speedup": 0.881,
    }


HEAD = (
    "α = 0.50 per position (Σ α^i over γ = 4.00 positions = 2.00 accepted per step; accepted/drafted = 0.50 "
    "is the acceptance per drafted token). A verification step took 1.50× a target step here; the formula "
    "charges it 1× plus γ·c for drafting. With a free draft it predicts 1.94×; the measured 2.00× implies c = 0.30"
)


def test_why_without_a_token_count():
    got = formula._why(_filled(), 20, 10, 0, None)
    assert got == HEAD + " (every token taken to come from a verification step: the token count is unknown)" + TAIL


def test_why_with_plain_steps():
    got = formula._why(_filled(), 20, 10, 5, 50)
    assert got == (
        HEAD + " (5 of 50 tokens came from steps without a draft, counted as one target step each; "
        "with them the formula's S is 0.88× for the verification steps alone)" + TAIL
    )


def test_why_with_a_count_and_no_plain_steps():
    assert formula._why(_filled(), 20, 10, 0, 30) == HEAD + TAIL


def test_by_position_line():
    # α = 0.8: the model's α^1, α^2 = 0.80, 0.64
    assert formula._by_position([0.5, 0.25], 0.8) == (
        " The server's share of steps accepting position i: 0.50, 0.25; the model's α^i: 0.80, 0.64"
        " (where they part, acceptance is not one α at every position)."
    )


def _table(be):
    return {
        "alpha": 0.5,
        "gamma": 2,
        "cost": 0.1,
        "tokens_per_step": 1.75,
        "speedup": 1.4583,
        "break_even_alpha": be,
        "best_gamma": 3,
        "best_speedup": 1.5,
        "table": [{"alpha": 0.0, "speedup": 0.5}, {"alpha": 0.1, "speedup": 1.26}],
    }


def _lines(be_text):
    return "\n".join(
        [
            "α = 0.5 per position, γ = 2, c = 0.1",
            "tokens per verification step E = (1−α^(γ+1))/(1−α) = 1.75",
            "speed-up S = E/(γc+1) = 1.46×",
            "break-even α per position (S = 1): " + be_text,
            "best γ for α = 0.5, c = 0.1: 3 (S = 1.50×)",
            "",
            "  α     S",
            "  0.0   0.50  " + "█" * 5,  # round(0.5·10)
            "  0.1   1.26  " + "█" * 13,  # round(12.6)
            "assumes verifying γ+1 tokens costs one target step: false on a CPU and under concurrency",
        ]
    )


def test_text_without_break_even():
    assert formula.text(_table(None)) == _lines("none — this draft never pays at this γ and c")


def test_text_with_break_even():
    assert formula.text(_table(0.25)) == _lines("0.250")


# -- the inputs' checks: what is wrong and what to do ------------------------------------------------------


@pytest.mark.parametrize(
    "args,message,hint",
    [
        ((1.0, 2, 0.0), "acceptance rate α must be in [0, 1), not 1.0", "e.g. --alpha 0.8"),
        ((-0.1, 2, 0.0), "acceptance rate α must be in [0, 1), not -0.1", "e.g. --alpha 0.8"),
        ((0.5, 0, 0.0), "draft length γ must be at least 1, not 0", ""),
        ((0.5, 2, -1.0), "draft cost ratio c must be >= 0, not -1.0", "c = draft step time / target step time"),
    ],
)
def test_each_bad_input_says_what_is_wrong(args, message, hint):
    with pytest.raises(InputError) as e:
        formula.speedup(*args)
    assert (str(e.value), e.value.hint) == (message, hint)


# -- from_measurement's later figures ---------------------------------------------------------------------


def _root(f) -> float:
    """An independent root of f on [0, 0.999] (scipy's Brent method, not the bisection under test)."""
    return brentq(f, 0.0, 0.999, xtol=1e-12)


def test_from_measurement_gives_the_break_even_at_its_gamma_and_implied_cost():
    # γ = 4, c = 0.125 (test_from_measurement_fills_the_formula): S = E/1.5 = 1 where 1 + α + … + α⁴ = 1.5
    out = formula.from_measurement(10.0, 20.0, 40, 20, 10)
    assert out["break_even_alpha"] == pytest.approx(_root(lambda a: sum(a**i for i in range(5)) - 1.5), abs=1e-6)
    assert "accepted_by_position" in out and out["accepted_by_position"] is None  # none given
    # γ = 10/10 = 1; 12/10 = 1.2×: 15 tokens over 10 steps took 12.5 target steps, 1.25 a step, so c = 0.25;
    # S = (1 + α)/1.25 = 1 at α = 0.25 (at γ = 2 it would be 0.366)
    out = formula.from_measurement(10.0, 12.0, 10, 5, 10)
    assert (out["gamma"], out["implied_cost"]) == pytest.approx((1.0, 0.25))
    assert out["break_even_alpha"] == pytest.approx(0.25, abs=1e-6)


def test_from_measurement_names_the_plain_steps_it_counted():
    # 50 tokens after the first: 10 verification steps gave 10 + 20, so 20 came from plain steps
    out = formula.from_measurement(10.0, 20.0, 40, 20, 10, 50)
    assert out["plain_tokens"] == 20
    assert "(20 of 50 tokens came from steps without a draft" in out["why"]
    # 30 tokens: every one from a verification step, and the count is known
    out = formula.from_measurement(10.0, 20.0, 40, 20, 10, 30)
    assert out["plain_tokens"] == 0
    assert "without a draft" not in out["why"] and "token count is unknown" not in out["why"]


def test_from_measurement_sets_the_servers_per_position_shares_beside_the_model():
    out = formula.from_measurement(10.0, 20.0, 40, 20, 10, None, [8.0, 4.0])
    assert out["accepted_by_position"] == pytest.approx([0.8, 0.4])  # of 10 steps
    a = _root(lambda x: x + x**2 + x**3 + x**4 - 2.0)  # α per position: Σ α^i = 20/10
    assert out["why"].startswith("α = ")  # the explanation first, the shares after it
    assert out["why"].endswith(
        f" The server's share of steps accepting position i: 0.80, 0.40; the model's α^i: {a:.2f}, {a * a:.2f}"
        " (where they part, acceptance is not one α at every position)."
    )


# -- from_result: a compared prompt's counts into from_measurement ------------------------------------------


def _measured(*, timings=None, predicted=None, tokens=51, metrics_steps=10.0, unit="tok/s", by_position=None):
    """A finished prompt: the baseline at 10 tok/s, the candidate at 20 with 40 drafted, 20 accepted over
    7 steps in its stream (10 by /metrics where given), `tokens` counted by spectui, `predicted` by the server."""
    b, c = SideRecorder("baseline"), SideRecorder("candidate")
    for rec in (b, c):
        rec.feed(StreamStarted(0, "p"))
        rec.feed(TokenEvent(0, 1, b"a", 1, "unknown"))
    b.feed(StreamFinished(9, "limit"))
    c.feed(StreamFinished(9, "limit", timings=timings or {}, tokens_predicted=predicted))
    b.figures.decode_tps, c.figures.decode_tps = 10.0, 20.0
    f = c.figures
    f.drafted, f.accepted, f.steps, f.metrics_steps, f.tokens, f.rate_unit = 40, 20, 7, metrics_steps, tokens, unit
    f.accepted_per_position = by_position
    return PromptResult(Prompt("p"), b, c)


def test_from_result_takes_the_servers_step_count_and_its_predicted_tokens():
    r = _measured(timings={"predicted_n": 31}, predicted=41, by_position=[8.0, 4.0])
    assert formula.from_result(r) == formula.from_measurement(10.0, 20.0, 40, 20, 10, 30, [8.0, 4.0])


def test_from_result_falls_back_to_the_servers_count_then_its_own():
    # no predicted_n in the timings: the final event's tokens_predicted; without it, the tokens spectui counted
    assert formula.from_result(_measured(predicted=41)) == formula.from_measurement(10.0, 20.0, 40, 20, 10, 40)
    assert formula.from_result(_measured()) == formula.from_measurement(10.0, 20.0, 40, 20, 10, 50)
    # no /metrics step count: the stream's
    assert formula.from_result(_measured(metrics_steps=None)) == formula.from_measurement(10.0, 20.0, 40, 20, 7, 50)


@pytest.mark.parametrize("n,tokens", [(1, None), (2, 1), (3, 2)])
def test_from_result_counts_the_tokens_after_the_first(n, tokens):
    r = _measured(timings={"predicted_n": n})
    assert formula.from_result(r) == formula.from_measurement(10.0, 20.0, 40, 20, 10, tokens)


def test_from_result_has_no_token_count_where_the_rate_is_in_chunks():
    r = _measured(timings={"predicted_n": 31}, unit="chunks/s")
    assert formula.from_result(r) == formula.from_measurement(10.0, 20.0, 40, 20, 10, None)


def test_from_result_of_a_failed_side_is_none():
    r = _measured()
    r.baseline.failed = StreamFailed(5, "boom")
    assert formula.from_result(r) is None
