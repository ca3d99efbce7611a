"""The weight-formats lesson's table (labs.formats.table): the recommendation is the format where speculation
pays (read from the measured V(k)) and the bytes stay; the kernels named beside it; the kept JSON."""

from __future__ import annotations

import json

import pytest

from spectui.labs.formats.kernels import kernel_words, kernels, main_type
from spectui.labs.formats.table import FormatRow, FormatsLesson, SpecOutcome, recommend, table_markdown, table_text


def row(fmt: str, tps: float, per_token: float, identical: int = 4, compared: int = 4, acc: float = 0.5) -> FormatRow:
    """A measured row whose k-token batch costs 1 + (k − 1)·per_token steps."""
    verify = [1 + (k - 1) * per_token for k in range(1, 9)]
    spec = [SpecOutcome("p", compared, identical, compared, 1.0)]
    return FormatRow(
        fmt, file=f"m.{fmt}.gguf", size_bytes=90 << 20, plain_tps=tps, verify=verify, spec=spec, acceptance=acc
    )


def test_the_batched_format_whose_bytes_stay_is_recommended_over_a_faster_row_by_row_one():
    rows = [row("Q4_1", 60.0, 0.95), row("Q4_0", 50.0, 0.25)]
    rec = recommend(rows)
    assert rec.format == "Q4_0" and rec.speculation_pays
    assert rec.speedup is not None and rec.speedup > 1 and rec.projected_tps == pytest.approx(50.0 * rec.speedup)
    assert any(w.startswith("Q4_1:") and "no batched CPU kernel" in w for w in rec.why)


def test_a_format_whose_bytes_change_is_never_recommended_however_cheap_its_batches():
    rows = [row("IQ4_NL", 52.0, 0.1, identical=3, compared=6), row("Q4_0", 50.0, 0.3)]
    rec = recommend(rows)
    assert rec.format == "Q4_0"
    assert any(w.startswith("IQ4_NL:") and "3/6 runs differ" in w for w in rec.why)


def test_where_nothing_pays_the_fastest_plain_format_with_its_bytes_kept_is_named_as_plain():
    rows = [row("Q4_1", 45.0, 1.0), row("Q8_0", 40.0, 1.05), row("Q4_0", 55.0, 1.0, identical=1, compared=4)]
    rec = recommend(rows)
    assert rec.format == "Q4_1" and not rec.speculation_pays and rec.projected_tps is None
    assert "does not pay" in table_text(rows, rec)


def test_the_projection_follows_the_acceptance_a_low_one_pays_nowhere():
    rows = [row("Q4_0", 50.0, 0.5)]
    assert recommend(rows, alpha=0.05).speculation_pays is False
    assert recommend(rows, alpha=0.8).speculation_pays is True


def test_refused_and_failed_formats_are_said_and_never_recommended():
    rows = [
        FormatRow("IQ2_XXS", refused="llama-quantize cannot make IQ2_XXS: needs an importance matrix"),
        row("Q4_0", 50.0, 0.3),
    ]
    rows.append(FormatRow("Q8_0", file="x", failed="server exited"))
    rec = recommend(rows)
    assert rec.format == "Q4_0"
    assert any("not made" in w for w in rec.why) and any("not measured" in w for w in rec.why)
    text = table_text(rows, rec)
    assert "needs an importance matrix" in text and "recommendation: Q4_0" in text
    assert table_markdown(rows).count("\n") == 2 + len(rows)


def test_nothing_measured_recommends_nothing():
    rec = recommend([FormatRow("Q4_0", failed="no server")])
    assert rec.format is None and "no format" in rec.why[0]


def test_the_kernel_read_comes_from_v_k():
    assert row("X", 1.0, 0.1).kernel_read() == "batched"
    assert row("X", 1.0, 1.0).kernel_read() == "row by row"
    assert row("X", 1.0, 0.7).kernel_read() == "partly batched"
    assert FormatRow("X").kernel_read() == "not measured"


@pytest.mark.parametrize(
    ("fmt", "found"),
    [
        ("Q4_1", []),
        ("Q4_0", ["sgemm", "repack"]),
        ("Q4_K_M", ["repack"]),
        ("Q8_0", ["sgemm"]),
        ("IQ4_NL", ["sgemm", "repack"]),
    ],
)
def test_the_kernels_of_b11434_per_format(fmt, found):
    assert kernels(fmt) == found
    assert ("no batched CPU kernel" in kernel_words(fmt)) is (not found)


def test_main_type_of_a_k_quant_mix():
    assert main_type("Q4_K_M") == "Q4_K" and main_type("Q5_K_S") == "Q5_K" and main_type("Q8_0") == "Q8_0"


def test_the_kept_json_round_trips_and_a_foreign_file_is_refused():
    rows = [row("Q4_1", 45.0, 1.0), row("Q4_0", 50.0, 0.3)]
    rows[1].spec[0].margin, rows[1].spec[0].parted_at = 0.01, 120
    les = FormatsLesson("m.gguf", rows, {"date": "today"}, recommend(rows))
    back = FormatsLesson.from_json(json.loads(les.dumps()))
    assert back.rows[1].verify == rows[1].verify and back.rows[1].spec[0].margin == 0.01
    assert back.recommendation == les.recommendation
    with pytest.raises(ValueError, match="not a spectui formats table"):
        FormatsLesson.from_json({"kind": "spectui-certificate"})
    with pytest.raises(ValueError, match="damaged"):
        FormatsLesson.from_json({"kind": "spectui-formats"})
