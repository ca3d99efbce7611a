"""The n-way table under a certificate (labs.formats.nway): the speculative configuration against the fastest
plain format, both paired with the proof's baseline; the gap said in numbers, never a win it did not measure."""

from __future__ import annotations

import pytest

from spectui.cli.main import main
from spectui.labs.formats.nway import NWay, NWayRow


def table(spec: float, spec_low=None, spec_high=None) -> NWay:
    plain = [
        NWayRow("plain Q4_1 (the baseline)", 45.0, 1.0),
        NWayRow("plain Q4_0", 51.0, 1.12, 1.08, 1.16, 6),
        NWayRow("plain Q8_0", 40.0, 0.9, 0.85, 0.95, 6),
    ]
    return NWay("m.Q4_1.gguf", plain, NWayRow("speculative (the candidate)", 45.0 * spec, spec, spec_low, spec_high, 6))


def test_short_of_the_fastest_plain_format_says_by_how_much():
    t = table(1.05, 1.0, 1.1)
    assert t.fastest_plain().label == "plain Q4_0"
    assert t.gap() == pytest.approx(1.05 / 1.12)
    assert "6 % short of it" in t.line() and "plain Q4_0" in t.line()


def test_above_every_plain_format_says_whether_the_intervals_part():
    assert "above every plain format (the intervals apart)" in table(1.4, 1.3, 1.5).line()
    overlapping = table(1.15, 1.1, 1.2).line()  # a point above the fastest, the intervals not apart
    assert "no measurable difference (its interval and the fastest's overlap)" in overlapping
    assert "above every" not in overlapping


def test_the_text_has_a_row_for_each_configuration_and_the_line():
    text = table(1.05).text().splitlines()
    assert text[0].startswith("n-way") and len(text) == 1 + 1 + 4 + 1
    assert any(r.strip().startswith("speculative (the candidate)") and "1.05×" in r for r in text)


def test_without_a_ratio_nothing_is_claimed():
    t = NWay("b", [NWayRow("plain Q4_0", None, None, note="not here")], NWayRow("speculative", 50.0, 1.1))
    assert t.gap() is None and "could not be set beside" in t.line()


def test_prove_refuses_a_bad_formats_table_before_any_server_starts(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text("[]")
    code = main(
        ["prove", "--baseline", "http://127.0.0.1:9", "--candidate", "http://127.0.0.1:9"]
        + ["--formats-table", str(bad)]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "not a spectui formats table" in err[0]
