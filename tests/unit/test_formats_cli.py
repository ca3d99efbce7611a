"""`spectui formats`: bad input is one line and exit 2; a kept table is printed again with --show (text,
Markdown, JSON); the command is in the table `spectui --help` reads."""

from __future__ import annotations

import json

from spectui.cli.main import COMMANDS, main
from spectui.labs.formats.table import FormatRow, FormatsLesson, SpecOutcome, recommend
from spectui.store.locations import atomic_write


def kept(tmp_path):
    rows = [
        FormatRow("Q4_1", plain_tps=45.0, verify=[1.0, 1.9, 2.9, 3.8], spec=[SpecOutcome("a", 3, 3, 3, 1.0)]),
        FormatRow("Q4_0", plain_tps=50.0, verify=[1.0, 1.2, 1.3, 1.4], spec=[SpecOutcome("a", 3, 3, 3, 1.1)]),
    ]
    les = FormatsLesson("/m/SmolLM2.Q4_1.gguf", rows, {"date": "2026-12-07 03:30 UTC", "threads": 1}, recommend(rows))
    return atomic_write(tmp_path / "formats.json", les.dumps())


def test_formats_is_a_command_of_the_labs():
    assert COMMANDS["formats"][0] == "formats" and COMMANDS["formats"][2] == "labs"


def test_an_unknown_format_is_one_line_naming_the_known_ones(capsys):
    assert main(["formats", "--formats", "Q4_0,Q9_9", "--no-verify"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown weight format 'Q9_9'" in err[0] and "Q4_K_M" in err[0]


def test_a_missing_or_foreign_table_is_one_line(tmp_path, capsys):
    assert main(["formats", "--show", str(tmp_path / "none.json")]) == 2
    assert "does not exist — run `spectui formats` first" in capsys.readouterr().err
    (tmp_path / "cert.json").write_text(json.dumps({"kind": "spectui-certificate"}))
    assert main(["formats", "--show", str(tmp_path / "cert.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a spectui formats table" in err[0]
    (tmp_path / "bad.json").write_text("{")
    assert main(["formats", "--show", str(tmp_path / "bad.json")]) == 2


def test_a_kept_table_is_shown_with_its_recommendation(tmp_path, capsys):
    path = kept(tmp_path)
    assert main(["formats", "--show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "measured 2026-12-07 03:30 UTC" in out and "recommendation: Q4_0 — speculation pays" in out
    assert main(["formats", "--show", str(path), "--markdown"]) == 0
    assert "| Q4_0 |" in capsys.readouterr().out
    assert main(["formats", "--show", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["recommendation"]["format"] == "Q4_0"


def test_the_drafts_lesson_trains_for_the_recommended_format_of_a_kept_table(tmp_path, capsys):
    import argparse

    from spectui.cli.drafts_lesson import _recommended_target

    q40 = tmp_path / "m.Q4_0.gguf"
    q40.write_bytes(b"GGUF")
    rows = [
        FormatRow("Q4_1", file=str(tmp_path / "m.Q4_1.gguf"), plain_tps=45.0, verify=[1.0, 1.9, 2.9, 3.8]),
        FormatRow("Q4_0", file=str(q40), plain_tps=50.0, verify=[1.0, 1.2, 1.3, 1.4]),
    ]
    path = atomic_write(tmp_path / "t.json", FormatsLesson("m", rows, {}, recommend(rows)).dumps())
    args = argparse.Namespace(for_format=str(path), f32=False, target=None)
    assert _recommended_target(args) == (q40, path)
    assert "training for Q4_0" in capsys.readouterr().err
    q40.unlink()  # the recommended file is gone: one line, rerun the lesson
    assert main(["drafts", "lesson", "--for-format", str(path), "-o", str(tmp_path / "l")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "recommends no format whose file is here" in err[0]


def test_o_never_overwrites_a_file_that_is_not_a_formats_table(tmp_path, capsys, stand_in_assets, monkeypatch):
    monkeypatch.setenv("SPECTUI_LLAMA_SERVER", str(stand_in_assets))
    quantize = stand_in_assets.parent / "llama-quantize"
    quantize.write_text("#!/bin/sh\nexit 1\n")
    quantize.chmod(0o755)
    mine = tmp_path / "notes.txt"
    mine.write_text("my notes")
    assert main(["formats", "--no-verify", "-o", str(mine)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a formats table spectui wrote" in err[0]
    assert mine.read_text() == "my notes"
