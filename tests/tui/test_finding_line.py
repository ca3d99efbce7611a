"""The comparison screen's closing lines show the finding core.findings states (how often a drafting candidate
changed the greedy output, and the causes): the view shows it, it never decides it."""

from __future__ import annotations

from spectui.tui import repeats


def test_the_closing_lines_carry_the_runs_finding(monkeypatch):
    said = (
        "finding: speculation changed the greedy output in 2 of 3 runs where the candidate drafted (causes: near-tie 2)"
    )
    monkeypatch.setattr(repeats, "finding_lines", lambda results: [said, "  why: a verification batch …"])
    assert repeats.whole_set_line([]) == said


def test_no_finding_no_line():
    assert repeats.whole_set_line([]) is None
