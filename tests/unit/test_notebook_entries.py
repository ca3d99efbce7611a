"""store/notebook, value by value: a repeated prompt's entry from a group whose figures are written here,
the side file's separators byte for byte, the errors' hints, and every kind of line `notebook show`
prints (an import's, a long value, a date, each verdict word). Expected values are worked by hand."""

from __future__ import annotations

import dataclasses
import datetime as dt
from types import SimpleNamespace

import pytest

import spectui.core.runner as runner
from spectui.core.errors import InputError
from spectui.core.findings import Triage
from spectui.store import notebook
from tests.unit.test_notebook import INFOS, results


def _group(runs, **kw):
    spread = SimpleNamespace(median=1.23456789, low=1.111111, high=1.444444)
    fields = dict(
        runs=runs,
        failed_runs=[],
        speedup=spread,
        verdict="faster",
        divergent_runs=0,
        acceptance_moved=False,
        decode=lambda side: SimpleNamespace(median={"baseline": 10.123456, "candidate": 12.987654}[side]),
    )
    fields.update(kw)
    return SimpleNamespace(**fields)


def _patched(monkeypatch, groups):
    monkeypatch.setattr(runner, "grouped", lambda rs: groups)


def test_a_repeated_prompts_entry_takes_each_figure_from_its_group(monkeypatch):
    [r] = results()
    others = [SimpleNamespace(identical=True), SimpleNamespace(identical=True)]
    g = _group([r, *others], failed_runs=["x"], divergent_runs=2, acceptance_moved=True)
    _patched(monkeypatch, [g])
    [m] = notebook.measurements([r], INFOS, "lab")
    assert m["profile"] == "lab" and m["prompt_id"] == "prompt"
    assert {k: m[k] for k in ("runs", "failed_runs", "speedup", "speedup_low", "speedup_high")} == {
        "runs": 3,
        "failed_runs": 1,
        "speedup": 1.2346,
        "speedup_low": 1.1111,
        "speedup_high": 1.4444,
    }
    assert (m["speedup_verdict"], m["identical"], m["divergent_runs"], m["acceptance_moved"]) == (
        "faster",
        True,
        2,
        True,
    )
    assert (m["baseline_tokens_per_s"], m["candidate_tokens_per_s"]) == (10.1235, 12.9877)


def test_a_repeated_prompt_without_spreads_keeps_the_first_runs_figures(monkeypatch):
    [r] = results()
    [single] = notebook.measurements([r], INFOS)  # the first run's own figures
    g = _group([r, SimpleNamespace(identical=None)], speedup=None, decode=lambda side: None)
    _patched(monkeypatch, [g])
    [m] = notebook.measurements([r], INFOS)
    assert m["runs"] == 2 and "failed_runs" not in m and "divergent_runs" not in m
    assert "speedup_low" not in m and "speedup_high" not in m
    for key in ("speedup", "baseline_tokens_per_s", "candidate_tokens_per_s", "identical"):
        assert m[key] == single[key], key  # a run without a verdict: "identical" is the first run's
    g = _group([r, SimpleNamespace(identical=False)])
    _patched(monkeypatch, [g])
    [m] = notebook.measurements([r], INFOS)
    assert m["identical"] is False


def test_one_run_is_one_entry_whatever_its_group_could_say(monkeypatch):
    [r] = results()
    [want] = notebook.measurements([r], INFOS)
    _patched(monkeypatch, [_group([r])])
    [m] = notebook.measurements([r], INFOS)
    assert m["runs"] == 1 and "speedup_verdict" not in m and "speedup_low" not in m
    assert {k: v for k, v in m.items() if k != "date"} == {k: v for k, v in want.items() if k != "date"}


def test_a_measurement_without_a_verdict_a_finished_baseline_or_one_cache_count():
    [r] = results()
    r = dataclasses.replace(r, verdict=None, triage=Triage("cache", "a prompt-cache hit"))
    m = notebook.measurement(r, INFOS)
    assert "verdict" not in m and "verdict_reason" not in m and "compared" not in m
    assert m["cause"] == "cache"
    r.candidate.figures.prompt_cached = None
    assert "prompt_cached" not in notebook.measurement(r, INFOS)
    r.baseline.finished = None
    assert "baseline_tokens_per_s" not in notebook.measurement(r, INFOS)


def test_the_side_file_is_separated_once_byte_for_byte(tmp_path):
    nb = tmp_path / "nb.toml"
    nb.write_text('measurement = "mine"\n')
    side = tmp_path / "nb.toml.pending.toml"
    entry = '[[measurement]]\nprompt_id = "p"\n'
    notebook.append(nb, [{"prompt_id": "p"}])
    assert side.read_text() == entry  # nothing before the first
    notebook.append(nb, [{"prompt_id": "p"}])
    assert side.read_text() == entry + "\n" + entry  # one blank line between
    side.write_text("# kept\n\n")
    notebook.append(nb, [{"prompt_id": "p"}])
    assert side.read_text() == "# kept\n\n" + entry  # already a blank line: none added


def test_no_entries_for_a_new_notebook_go_to_the_side_file_and_say_why(tmp_path):
    nb = tmp_path / "nb.toml"
    where, warning = notebook.append(nb, [])
    side = tmp_path / "nb.toml.pending.toml"
    assert where == side and not nb.exists()
    assert warning == (
        f"notebook {nb} would not parse with the new entries (measurement is not a list of tables; "
        f"does it use the key 'measurement' itself?); left it untouched and wrote the measurement to {side}"
    )


def test_a_folder_is_refused_with_what_to_do(tmp_path):
    for call in (lambda: notebook.append(tmp_path, []), lambda: notebook.read(tmp_path)):
        with pytest.raises(InputError) as exc:
            call()
        assert exc.value.one_line() == f"notebook {tmp_path} is a folder — give --notebook a file name"


def test_read_takes_no_rows_from_a_measurement_that_is_a_number(tmp_path):
    nb = tmp_path / "nb.toml"
    nb.write_text("measurement = 3\n")
    assert notebook.read(nb) == []


def test_show_prints_an_imports_line_and_goes_on(tmp_path):
    nb = tmp_path / "nb.toml"
    rows = [
        {
            "kind": "import",
            "source_tool": "vllm bench",
            "output_tokens_per_s": 123.456,
            "ttft_ms_mean": 45.6,
            "itl_ms_mean": 7.89,
            "acceptance_rate": 0.625,
            "source_version": "0.32.0",
            "source_file": "run.json",
        },
        {"kind": "import", "output_tokens_per_s": 5.0},
        {"prompt_id": "after", "verdict": "differs"},
    ]
    notebook.append(nb, rows)
    lines = notebook.show_text(nb).splitlines()[3:]
    assert lines[0] == (
        f"{'?':<20} {'(vllm bench)':<16} out 123.5 tok/s  TTFT 46 ms  ITL 7.9 ms  accept 62%  0.32.0 run.json"
    )
    assert lines[1] == f"{'?':<20} {'(?)':<16} out 5.0 tok/s  TTFT — ms  ITL — ms   "
    assert lines[2] == f"{'?':<20} {'after':<16} {'—':>8} {'—':>7} {'—':>8} {'DIFFERS':<9}  (?)"
    assert len(lines) == 3


def test_show_words_for_each_verdict_and_a_date_and_long_value_cut(tmp_path):
    nb = tmp_path / "nb.toml"
    when = dt.datetime(2026, 12, 1, 8, 0, 0, tzinfo=dt.UTC)
    long = "spec " + "x" * 70
    rows = [
        {"date": when, "prompt_id": "a", "verdict": "incomplete", "candidate_config": long},
        {"identical": True, "speedup": True, "acceptance_rate": "high"},
        {"prompt_id": "c"},
    ]
    notebook.append(nb, rows)
    lines = notebook.show_text(nb).splitlines()[3:]
    # TOML gives the date back as a datetime: "2026-12-01 08:00:00+00:00", its first 19 characters shown
    assert lines[0] == (
        f"{'2026-12-01 08:00:00':<20} {'a':<16} {'—':>8} {'—':>7} {'—':>8} {'incomplete':<9} {long[:60]} (?)"
    )
    # a boolean or a word where a number belongs is '?'; identical without a verdict word is "identical"
    assert lines[1] == f"{'?':<20} {'?':<16} {'?':>8} {'?':>7} {'—':>8} {'identical':<9}  (?)"
    assert lines[2] == f"{'?':<20} {'c':<16} {'—':>8} {'—':>7} {'—':>8} {'—':<9}  (?)"


def test_a_certificate_entry_without_servers_and_its_date():
    doc = {
        "inputs": {"prompt_set": {"name": "quick", "sha256": "cd" * 32}},
        "verdict": {"status": "identical", "line": "IDENTICAL"},
        "derived": {"greedy": {"prompts": 1, "identical": 1}, "speedup": {"overall": None}},
        "measured_on": {},
    }
    e = notebook.certificate_entry(doc)
    assert "baseline_build" not in e and "candidate_build" not in e and "candidate_config" not in e
    assert e["date"].tzinfo == dt.UTC and e["date"].microsecond == 0
    doc["measured_on"] = {"servers": {"baseline": {"build": "b1"}}}
    e = notebook.certificate_entry(doc)
    assert e["baseline_build"] == "b1" and "candidate_build" not in e
    doc["measured_on"] = {"servers": {"candidate": {}}}
    assert "candidate_config" not in notebook.certificate_entry(doc)  # an empty record names no configuration


def test_the_notebook_is_utf8_whatever_the_locale_says(tmp_path, monkeypatch):
    import io

    # a locale whose encoding is Latin-1: a file opened without naming its encoding would be read in it
    real = io.text_encoding
    monkeypatch.setattr(io, "text_encoding", lambda enc, stacklevel=2: "latin-1" if enc is None else real(enc))
    nb = tmp_path / "nb.toml"
    kept = "# café\n".encode()  # b"# caf\xc3\xa9\n"
    nb.write_bytes(kept)
    notebook.append(nb, [{"prompt_id": "é"}])
    assert nb.read_bytes() == kept + '\n[[measurement]]\nprompt_id = "é"\n'.encode()
    assert notebook.read(nb) == [{"prompt_id": "é"}]
    bad = tmp_path / "bad.toml"
    bad.write_text('measurement = "mine"\n')
    (tmp_path / "bad.toml.pending.toml").write_bytes(kept)
    notebook.append(bad, [{"prompt_id": "é"}])
    assert (tmp_path / "bad.toml.pending.toml").read_bytes() == kept + '\n[[measurement]]\nprompt_id = "é"\n'.encode()
