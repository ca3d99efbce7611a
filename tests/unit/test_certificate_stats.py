"""Statistics a reader can act on: a certificate whose sampled part is only "consistent" says
so in its first words; intervals stay in their quantity's range (mean accepted length in [1, 1 + γ] ⊆
[1, n-max + 1], acceptance in [0, 1]); a figure every run gave alike is shown as exact, not as a
zero-width interval; below 3 runs (2 degrees of freedom) or 3 prompts no verdict word is drawn."""

from __future__ import annotations

import copy

import pytest

from spectui.run.prove.derive import verdict_of
from spectui.run.prove.setstats import interval_text, ratio_interval, set_ratio, set_speedup, speed_word
from tests.unit.test_certificate import prove


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return prove(tmp_path_factory.mktemp("stats") / "c", sampled=1, samples=4)


def test_a_sampled_part_only_consistent_is_named_in_the_first_words(made):
    derived = copy.deepcopy(made["derived"])
    s = derived["sampled"]
    s["counts"] = {"identical": 0, "consistent": 1, "different": 0, "undecided": 0, "failed": 0}
    s["passed"], s["detectable_tvd"] = 1, 0.31
    line = verdict_of(derived, made["measured_on"])["line"]
    assert line.startswith("IDENTICAL (greedy) on 3/3 · CONSISTENT (sampled, could detect TVD ≥ 0.31) on 1/1"), line
    # all seeds byte-identical: no distribution test, plain IDENTICAL as before
    assert made["verdict"]["line"].startswith("IDENTICAL on 3/3 (greedy) and 1/1 (sampled, seeded bytes identical)")


def test_intervals_stay_in_their_quantitys_range(made):
    # three prompts, one accepting nearly every draft: the linear interval over prompts ran past n-max + 1
    per = [{"accepted": a, "drafted": 80, "steps": 10, "accepted_per_position": None} for a in (1, 1, 79)]
    gamma = sum(a["drafted"] for a in per) / sum(a["steps"] for a in per)
    mal = set_ratio(per, [], lambda a: a["accepted"], cap=gamma, shift=1.0)
    over = mal["over_prompts"]
    assert 1.0 <= over["low"] <= over["value"] <= over["high"] <= 1.0 + gamma, over
    uncapped = ratio_interval([1, 1, 79], [10, 10, 10])
    assert uncapped["high"] + 1 > 1 + gamma  # what it said without the cap
    acc = made["derived"]["acceptance"]
    g = acc["alpha"]["gamma"]
    for d in (acc["mean_accepted_length"], acc["mean_accepted_length"]["over_prompts"]):
        assert all(1.0 <= d[k] <= 1.0 + g for k in ("value", "low", "high") if d[k] is not None), d


def test_a_figure_every_run_gave_alike_is_shown_as_exact():
    assert interval_text({"value": 0.637, "low": 0.637, "high": 0.637}, ".1%") == "63.7% (exact)"
    assert interval_text({"value": 0.637, "low": 0.6, "high": 0.7}, ".1%") == "63.7% [60.0%–70.0%]"


def test_too_few_runs_or_prompts_draw_no_verdict_word():
    one = set_speedup([[1.30, 1.50]])  # one prompt, two runs: 1 degree of freedom
    assert one is not None and one["low"] is not None and speed_word(one) == "too few runs to judge"
    three = set_speedup([[1.30, 1.50, 1.40]])
    assert three is not None and speed_word(three) == "faster"
    two = ratio_interval([3, 4], [10, 10])
    assert two["low"] is None and "too few prompts to judge" in two["reason"]
