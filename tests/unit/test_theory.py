import pytest

from spectui.core.errors import InputError
from spectui.labs import theory


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
