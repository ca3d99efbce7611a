"""NVIDIA Model-Optimizer's speculation_profile.json (store.spec_profile): written from verification steps,
conditional and marginal per position as its PR 2247 defines them, read back by theory."""

from __future__ import annotations

import json

import pytest

from spectui.core.errors import InputError
from spectui.store import spec_profile as sp


def test_vectors_follow_the_definition():
    # lengths 1 (nothing accepted) ×2, 2 ×1, 4 ×1: P(L≥2)=2/4, P(L≥3)=1/4, P(L≥4)=1/4
    hist = sp.histogram_of([0, 0, 1, 3])
    assert hist == {1: 2, 2: 1, 4: 1}
    conditional, marginal = sp.vectors(hist, 4)
    assert marginal == [0.5, 0.25, 0.25, 0.0]
    assert conditional == [0.5, 0.5, 1.0, 0.0]


def test_the_profile_is_consistent_with_its_mean_and_round_trips(tmp_path):
    hist = sp.histogram_of([0, 1, 2, 3, 3, 3])
    prof = sp.build(hist, 3, "ngram-mod", target_model="m.gguf")
    assert prof["schema_version"] == "1.0" and prof["measured"] is True
    assert prof["validation"]["mean_consistency"]["passed"]  # mean = 1 + Σ marginal when K covers every length
    assert prof["validation"]["marginal_monotonicity"]["passed"]
    assert prof["accept_length_model"] == "measured_per_k"
    path = sp.write(prof, tmp_path)
    assert path.name == "speculation_profile.json"
    back = sp.read(path)
    assert back.marginal == prof["marginal_accept_rates"] and back.conditional == prof["conditional_accept_rates"]
    assert back.method == "ngram-mod" and back.k == 3


def test_a_cut_vector_fails_its_own_consistency_check():
    prof = sp.build(sp.histogram_of([5, 5]), 2, "draft-simple")
    assert not prof["validation"]["mean_consistency"]["passed"]


@pytest.mark.parametrize(
    "content, words",
    [
        ("not json", "not JSON"),
        ("{}", "not a speculation profile"),
        (json.dumps({"schema_version": "2.0", "marginal_accept_rates": []}), "spectui reads 1.x"),
        (
            json.dumps({"schema_version": "1.0", "marginal_accept_rates": [1.5], "conditional_accept_rates": [1]}),
            "between 0 and 1",
        ),
    ],
)
def test_a_bad_profile_is_one_line_naming_the_file(tmp_path, content, words):
    p = tmp_path / "p.json"
    p.write_text(content)
    with pytest.raises(InputError) as e:
        sp.read(p)
    assert words in str(e.value) and str(p) in str(e.value)
    with pytest.raises(InputError, match="no such file"):
        sp.read(tmp_path / "missing.json")


def test_theory_reads_a_profile(tmp_path, capsys):
    from spectui.cli.main import main

    path = sp.write(sp.build(sp.histogram_of([0, 1, 2, 2]), 2, "draft-simple"), tmp_path)
    assert main(["theory", "--profile", str(path), "--cost", "0.1"]) == 0
    out = capsys.readouterr().out
    # E(1) = 1 + P(L≥2) = 1.75, E(2) = 1.75 + P(L≥3) = 2.25
    assert "1.75" in out and "2.25" in out and "best γ: 2" in out
    assert main(["theory", "--profile", str(path), "--alpha", "0.5", "--cost", "0.1"]) == 2
    assert "leave out --alpha" in capsys.readouterr().err
