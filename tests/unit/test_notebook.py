"""store/notebook: what one measurement holds, from recorded streams and the servers' own fields; how
entries are appended (byte for byte, the separator, the side file); what `notebook show` prints."""

from __future__ import annotations

import asyncio
import json
import tomllib
from pathlib import Path

import pytest

from spectui.backends.recorded import ReplayBackend
from spectui.core.errors import InputError
from spectui.core.runner import run_prompts
from spectui.core.types import GenerationParams, ServerInfo
from spectui.store import notebook, prompts
from tests.recordings import BASELINE, DRAFT, changed, payloads

DATA = Path(__file__).parent.parent / "data"
INFOS = {
    "baseline": ServerInfo("http://a", build="b11434-pypi", model="m.gguf"),
    "candidate": ServerInfo("http://b", build="b11434-x", model="m.gguf", speculative={"type": "draft-simple"}),
}


def timings(path) -> dict:
    return [json.loads(x[6:]) for x in path.read_text().splitlines() if x.startswith("data: ")][-1]["timings"]


def results(candidate=None, repeat: int = 1, fail_after: int | None = None):
    b = ReplayBackend("replay://b", payloads(BASELINE), INFOS["baseline"], virtual_ms_per_event=1)
    c = ReplayBackend(
        "replay://c", candidate or payloads(DRAFT), INFOS["candidate"], virtual_ms_per_event=1, fail_after=fail_after
    )
    return asyncio.run(run_prompts(b, c, [prompts.single("hi")], GenerationParams(max_tokens=64), repeat=repeat))


def test_one_measurement_holds_the_servers_figures():
    [r] = results()
    m = notebook.measurement(r, INFOS, "cpu-demo")
    tb, tc = timings(BASELINE), timings(DRAFT)
    rate_b = (tb["predicted_n"] - 1) / tb["predicted_ms"] * 1000
    rate_c = (tc["predicted_n"] - 1) / tc["predicted_ms"] * 1000
    want = {
        "profile": "cpu-demo",
        "prompt_id": "prompt",
        "baseline_build": "b11434-pypi",
        "candidate_build": "b11434-x",
        "baseline_model": "m.gguf",
        "candidate_model": "m.gguf",
        "acceptance_rate": round(45 / 119, 4),
        "drafted": 119,
        "accepted": 45,
        "mean_accepted_length": round(1 + 45 / 15, 4),
        "baseline_tokens_per_s": round(rate_b, 4),
        "candidate_tokens_per_s": round(rate_c, 4),
        "speedup": round(rate_c / rate_b, 4),
        "verdict": "identical",
        "compared": "text+ids",
        "identical": True,
        "prompt_cached": [0, 0],
    }
    assert {k: m[k] for k in want} == want
    assert m["baseline_config"] == INFOS["baseline"].describe_speedup() and "draft-simple" in m["candidate_config"]
    assert "first_divergence_byte" not in m and "cause" not in m and "verdict_reason" not in m  # none: left out
    assert m["date"].tzinfo is not None and m["date"].microsecond == 0


def test_a_difference_and_a_failed_side_are_recorded_as_such():
    [r] = results(changed(payloads(DRAFT), 12, " fizz"))
    m = notebook.measurement(r, INFOS)
    assert (m["verdict"], m["identical"], m["first_divergence_byte"]) == ("differs", False, 31)
    assert m["verdict_reason"].startswith("bytes differ from byte 31")
    [r] = results(fail_after=20)
    m = notebook.measurement(r, INFOS)
    assert m["verdict"] == "failed" and "identical" not in m and "compared" not in m
    for key in ("acceptance_rate", "drafted", "accepted", "mean_accepted_length", "candidate_tokens_per_s", "speedup"):
        assert key not in m, key  # a cut-off side measured none of them
    assert m["baseline_tokens_per_s"] > 0


def test_repeated_runs_become_one_entry_with_their_spread():
    rs = results(repeat=3)
    [m] = notebook.measurements(rs, INFOS)
    [single] = notebook.measurements(rs[:1], INFOS)
    assert single["runs"] == 1 and "speedup_low" not in single
    from spectui.core.runner import grouped

    [g] = grouped(rs)
    sp = g.speedup
    assert m["runs"] == 3 and m["speedup"] == round(sp.median, 4)
    assert (m.get("speedup_low"), m.get("speedup_high")) == (
        round(sp.low, 4) if sp.low is not None else None,
        round(sp.high, 4) if sp.high is not None else None,
    )
    assert m["speedup_verdict"] == g.verdict and m["identical"] is True
    assert "divergent_runs" not in m and "acceptance_moved" not in m  # none, and not moved: left out


def test_entries_are_flat_tables():
    text = notebook.entries_text([{"a": 1, "nested": {"x": 2, "y": None}, "none": None}, {"b": "t"}])
    assert text == '[[measurement]]\na = 1\nnested_x = 2\n\n[[measurement]]\nb = "t"\n'


@pytest.mark.parametrize(
    "existing,sep",
    [("", ""), ("# notes\n\n", ""), ("# notes\n", "\n"), ("# notes", "\n\n")],
)
def test_append_keeps_every_earlier_byte_and_separates_once(tmp_path, existing, sep):
    nb = tmp_path / "nb.toml"
    if existing:
        nb.write_text(existing)
    where, warning = notebook.append(nb, [{"prompt_id": "p"}])
    assert (where, warning) == (nb, None)
    assert nb.read_text() == existing + sep + '[[measurement]]\nprompt_id = "p"\n'


def test_a_notebook_that_would_not_parse_sends_the_entry_to_a_side_file(tmp_path):
    nb = tmp_path / "nb.toml"
    nb.write_text('measurement = "mine"\n')  # uses the key itself
    where, warning = notebook.append(nb, [{"prompt_id": "p"}])
    side = tmp_path / "nb.toml.pending.toml"
    assert where == side and nb.read_text() == 'measurement = "mine"\n'
    assert warning.startswith(f"notebook {nb} would not parse with the new entries (") and str(side) in warning
    notebook.append(nb, [{"prompt_id": "q"}])  # the side file grows the same way
    assert [r["prompt_id"] for r in tomllib.loads(side.read_text())["measurement"]] == ["p", "q"]
    broken = tmp_path / "b.toml"
    broken.write_text("[[x\n")
    where, warning = notebook.append(broken, [{"prompt_id": "p"}])
    assert "is not valid TOML" in warning and broken.read_text() == "[[x\n"


def test_a_symlinked_notebook_is_written_through_and_a_folder_refused(tmp_path):
    real = tmp_path / "real.toml"
    real.write_text("")
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    notebook.append(link, [{"prompt_id": "p"}])
    assert link.is_symlink() and "prompt_id" in real.read_text()
    assert (tmp_path / ".real.toml.lock").exists()  # the lock beside the target
    with pytest.raises(InputError, match="is a folder"):
        notebook.append(tmp_path, [{"prompt_id": "p"}])
    with pytest.raises(InputError, match="is a folder"):
        notebook.read(tmp_path)


def test_an_unwritable_notebook_is_one_error_and_nothing_changes(tmp_path, monkeypatch):
    import spectui.store.notebook as nbmod

    nb = tmp_path / "nb.toml"
    nb.write_text("# kept\n")

    def full_disk(path, text):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(nbmod, "atomic_write", full_disk)
    with pytest.raises(InputError) as exc:
        notebook.append(nb, [{"prompt_id": "p"}])
    assert exc.value.one_line() == (
        f"cannot write notebook {nb}: No space left on device — nothing was appended; it is as it was"
    )
    assert nb.read_text() == "# kept\n"


def test_read_takes_only_tables_and_names_a_broken_file(tmp_path):
    nb = tmp_path / "nb.toml"
    assert notebook.read(nb) == []
    nb.write_text("[[measurement]]\na = 1\n[[measurement]]\nb = 2\n")
    assert notebook.read(nb) == [{"a": 1}, {"b": 2}]
    nb.write_text('measurement = "x"\n')
    assert notebook.read(nb) == []
    nb.write_text("[[")
    with pytest.raises(InputError, match=f"notebook {nb} is not valid TOML"):
        notebook.read(nb)


def test_show_prints_a_line_per_entry(tmp_path):
    nb = tmp_path / "nb.toml"
    assert notebook.show_text(nb) == f"{nb}: no measurements yet (spectui compare --notebook appends one per prompt)"
    rows = [
        {
            "date": "2026-12-01T08:00:00",
            "prompt_id": "p1",
            "speedup": 0.2765,
            "acceptance_rate": 0.378,
            "mean_accepted_length": 4.0,
            "verdict": "identical",
            "candidate_config": "spec draft-simple",
            "candidate_build": "b1",
        },
        {"prompt_id": "p2", "speedup": float("nan"), "identical": False, "candidate_build": "b2"},
        {"prompt_id": "p3", "verdict": "failed"},
    ]
    notebook.append(nb, rows)
    lines = notebook.show_text(nb).splitlines()
    assert lines[0] == f"{nb}: 3 measurements" and lines[1] == ""
    assert (
        lines[2] == f"{'date':<20} {'prompt':<16} {'speed-up':>8} {'accept':>7} {'mean len':>8} {'same':<9} candidate"
    )
    assert (
        lines[3]
        == f"{'2026-12-01T08:00:00':<20} {'p1':<16} {'0.28×':>8} {'38%':>7} {'4.00':>8} {'identical':<9} spec draft-simple (b1)"
    )
    assert lines[4] == f"{'?':<20} {'p2':<16} {'?':>8} {'—':>7} {'—':>8} {'DIFFERS':<9}  (b2)"
    assert lines[5] == f"{'?':<20} {'p3':<16} {'—':>8} {'—':>7} {'—':>8} {'FAILED':<9}  (?)"


def test_a_certificate_entry_carries_its_verdict_and_headline_figures():
    doc = {
        "_path": "/c/cert.json",
        "inputs": {"prompt_set": {"name": "quick", "sha256": "ab" * 32}},
        "verdict": {"status": "identical", "line": "IDENTICAL on 3 of 3 prompts"},
        "derived": {
            "greedy": {"prompts": 3, "identical": 3},
            "speedup": {"overall": {"value": 0.27654, "low": 0.25, "high": 0.3}},
            "acceptance": {"acceptance_rate": 0.378, "mean_accepted_length": {"value": 4.0}, "alpha": {"value": 0.61}},
        },
        "measured_on": {
            "servers": {
                "baseline": {"build": "b1"},
                "candidate": {"build": "b2", "speculative": {"type": "draft", "n_max": 8}},
            }
        },
    }
    e = notebook.certificate_entry(doc)
    assert {k: v for k, v in e.items() if k != "date"} == {
        "kind": "certificate",
        "prompt_id": "(quick)",
        "certificate": "/c/cert.json",
        "verdict": "identical",
        "verdict_line": "IDENTICAL on 3 of 3 prompts",
        "prompt_set_sha256": "ab" * 32,
        "prompts": 3,
        "identical_prompts": 3,
        "speedup": 0.2765,
        "speedup_low": 0.25,
        "speedup_high": 0.3,
        "acceptance_rate": 0.378,
        "mean_accepted_length": 4.0,
        "alpha": 0.61,
        "baseline_build": "b1",
        "candidate_build": "b2",
        "candidate_config": "spec draft n_max=8",  # in compare's words (ServerInfo.describe_speedup)
    }
    doc["verdict"]["status"] = "different"
    assert notebook.certificate_entry(doc)["verdict"] == "differs"
    doc["verdict"]["status"] = "unknown"
    assert notebook.certificate_entry(doc)["verdict"] == "incomplete"


def test_the_notebook_path_order(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECTUI_NOTEBOOK", str(tmp_path / "env.toml"))
    assert notebook.notebook_path(str(tmp_path / "given.toml")) == tmp_path / "given.toml"
    assert notebook.notebook_path() == tmp_path / "env.toml"
    monkeypatch.delenv("SPECTUI_NOTEBOOK")
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path / "data"))
    assert notebook.notebook_path() == tmp_path / "data" / "notebook.toml"
