"""Sessions (record, truncate, foreign files) and the lab notebook (append keeps every earlier byte)."""

from __future__ import annotations

import json
import tomllib

import pytest

from spectui.cli.main import main
from spectui.core.errors import InputError
from spectui.store import notebook
from spectui.store.session import load_session, recorders_for


def _whole_token_lines(data: bytes, side: str) -> int:
    """Token events of one side in the whole lines of a (cut) session file, read straight from its bytes."""
    whole = data[: data.rfind(b"\n") + 1]
    recs = [json.loads(line) for line in whole.splitlines()[1:] if line.strip()]
    return sum(1 for r in recs if r.get("type") == "event" and r.get("side") == side and r.get("ev") == "token")


def test_truncated_session_replays_up_to_the_last_whole_event(tmp_path, capsys):
    from tests.recordings import write_session

    path = write_session(tmp_path / "run.jsonl")
    data = path.read_bytes()
    lines = data.split(b"\n")
    # cut in the middle of the 40th line: inside the prompt's events, long before its result line
    cut_at = sum(len(x) + 1 for x in lines[:39]) + len(lines[39]) // 2
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[:cut_at])
    s = load_session(cut)
    assert len(s.warnings) == 1 and "incomplete" in s.warnings[0]
    b, c = recorders_for(s.prompts[0])
    assert len(b.tokens) == _whole_token_lines(cut.read_bytes(), "baseline") > 0  # whatever was whole is there
    assert len(c.tokens) == _whole_token_lines(cut.read_bytes(), "candidate")
    code = main(["replay", str(cut), "--no-tui"])
    err = capsys.readouterr().err
    assert "warning" in err and "incomplete" in err
    assert code == 1  # README: a prompt cut inside gives no verdict, exit 1
    whole = main(["replay", str(path), "--no-tui"])  # the same session, whole: the recorded streams agree
    assert whole == 0 and "incomplete" not in capsys.readouterr().err


def test_a_session_cut_after_a_whole_prompt_keeps_that_prompts_verdict(tmp_path, capsys):
    from tests.recordings import write_session

    path = write_session(tmp_path / "run.jsonl", n_prompts=2)
    data = path.read_bytes()
    second = data.index(b'"type":"prompt"', data.index(b'"type":"result"'))
    for _ in range(5):  # five whole lines into the second prompt's events, then half of the sixth
        second = data.index(b"\n", second) + 1
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: second + 30])
    assert main(["replay", str(cut), "--no-tui", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["prompts"][0]["identical"] is True  # the whole prompt keeps its verdict
    assert len(doc["prompts"]) == 2 and doc["prompts"][1]["identical"] is None  # the cut one has none


def test_foreign_and_future_files(tmp_path):
    foreign = tmp_path / "notes.txt"
    foreign.write_text("hello\n")
    with pytest.raises(InputError, match="not a spectui session"):
        load_session(foreign)
    future = tmp_path / "future.jsonl"
    future.write_text('{"format": "spectui-session", "version": 99}\n')
    with pytest.raises(InputError, match="version 99"):
        load_session(future)
    with pytest.raises(InputError, match="does not exist"):
        load_session(tmp_path / "missing.jsonl")
    assert main(["replay", str(foreign), "--no-tui"]) == 2


class _R:  # the parts of a PromptResult that a measurement reads
    def __init__(self):
        from spectui.core.figures import SideRecorder
        from spectui.core.types import Prompt

        self.prompt = Prompt("p1", "code", [{"role": "user", "content": "x"}])
        self.triage = None
        self.baseline, self.candidate = SideRecorder("baseline"), SideRecorder("candidate")
        self.baseline.figures.decode_tps, self.candidate.figures.decode_tps = 80.0, 24.0
        self.candidate.figures.drafted, self.candidate.figures.accepted, self.candidate.figures.steps = 120, 45, 15
        from spectui.core.events import StreamFinished
        from spectui.core.verdict import Verdict

        for side in (self.baseline, self.candidate):
            side.finished = StreamFinished(1, "limit")
        self.speedup, self.identical, self.divergence = 0.3, True, None
        self.verdict = Verdict("identical", "text+ids")


def _infos():
    from spectui.core.types import ServerInfo

    return {
        "baseline": ServerInfo("http://a", build="b11434-pypi", model="m.gguf"),
        "candidate": ServerInfo("http://b", build="b11434-pypi", model="m.gguf", speculative={"type": "draft-simple"}),
    }


def test_notebook_append_keeps_earlier_entries_byte_for_byte(tmp_path):
    nb = tmp_path / "lab.toml"
    original = '# my course notebook\n[[measurement]]\nprompt_id = "old"   # a comment kept as is\nspeedup = 1.5\n'
    nb.write_text(original)
    where, warning = notebook.append(nb, [notebook.measurement(_R(), _infos(), "cpu-demo")])
    assert where == nb and warning is None
    text = nb.read_text()
    assert text.startswith(original)
    rows = tomllib.loads(text)["measurement"]
    assert [r["prompt_id"] for r in rows] == ["old", "p1"]
    new = rows[1]
    assert new["acceptance_rate"] == pytest.approx(0.375) and new["mean_accepted_length"] == 4.0
    assert new["candidate_build"] == "b11434-pypi" and new["profile"] == "cpu-demo" and new["identical"] is True
    assert "spec draft-simple" in new["candidate_config"]
    assert not list(tmp_path.glob(".lab.toml.*.tmp"))  # no temporary left behind (the .lock file stays)


def test_invalid_notebook_is_never_overwritten_and_the_measurement_is_kept(tmp_path):
    nb = tmp_path / "lab.toml"
    broken = "[[measurement]\nthis is = not toml\n"
    nb.write_text(broken)
    where, warning = notebook.append(nb, [notebook.measurement(_R(), _infos())])
    assert nb.read_text() == broken
    assert where != nb and where.exists() and str(where) in warning
    assert tomllib.loads(where.read_text())["measurement"][0]["prompt_id"] == "p1"


def test_notebook_path_from_environment(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("SPECTUI_NOTEBOOK", str(tmp_path / "course.toml"))
    assert notebook.notebook_path() == tmp_path / "course.toml"
    assert main(["notebook", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "course.toml")


def test_probe_samples_round_trip_through_a_session(tmp_path):
    from spectui.core.types import GenerationParams, ServerInfo
    from spectui.machine.probes import GPUSample, HostSample
    from spectui.store.prompts import single
    from spectui.store.session_writer import SessionWriter

    w = SessionWriter(tmp_path / "s.jsonl")
    w.servers({"baseline": ServerInfo("http://a"), "candidate": ServerInfo("http://b")})
    w.prompt(single("hi"), GenerationParams(), "sequential")
    w.probe([GPUSample(0, "RTX 4090", 6 * 2**30, 24 * 2**30, 37)], HostSample(2, 10.0, 2**30, 2**34, "x86_64", "Linux"))
    w.close()
    s = load_session(tmp_path / "s.jsonl")
    [(t, gpus, host)] = s.prompts[0].probes
    assert t >= 0 and gpus[0].name == "RTX 4090" and gpus[0].utilisation == 37 and host.memory_total == 2**34


def test_end_of_request_spec_report_survives_a_session_round_trip():
    from spectui.core.events import SpecReport, StreamFinished
    from spectui.store.session import event_from_json, event_to_json

    ev = StreamFinished(1_000, "limit", {"prompt_n": 27}, 27, b"", {}, SpecReport("vLLM", [3, 4], [4, 4], 2, 7, 8, 10))
    back = event_from_json(event_to_json(ev, 0))
    assert back.spec == ev.spec and back.timings == ev.timings


def test_a_prompt_orjson_declines_still_writes_a_whole_line(tmp_path):
    """A prompt file's "\\ud800" escape gives a lone surrogate: the line is still written, whole."""
    from spectui.core.types import GenerationParams, ServerInfo
    from spectui.store.prompts import single
    from spectui.store.session_writer import SessionWriter

    w = SessionWriter(tmp_path / "s.jsonl")
    w.servers({"baseline": ServerInfo("http://a"), "candidate": ServerInfo("http://b")})
    w.prompt(single(json.loads('"half \\ud800 a pair"')), GenerationParams(), "sequential")
    w.prompt(single("next"), GenerationParams(), "sequential")
    w.close()
    lines = (tmp_path / "s.jsonl").read_text().splitlines()
    prompts = [line for line in lines if json.loads(line).get("type") == "prompt"]  # every line parses
    assert len(prompts) == 2 and "\\ud800" in prompts[0]  # escaped, not a broken UTF-8 file
    assert load_session(tmp_path / "s.jsonl").prompts[-1].prompt.preview == "next"


def test_a_difference_only_in_the_final_tail_survives_the_round_trip(tmp_path, capsys):
    """Text held back for a stop string arrives in the final event (the tail): a candidate that differs
    only there is different live, and its replay rebuilds the same bytes, with no disagreement to report."""
    from tests.recordings import BASELINE, DRAFT, payloads, write_session

    cand = payloads(DRAFT)
    cand[-1] = dict(cand[-1], content="!")  # the final event's text: the tail
    path = write_session(tmp_path / "tail.jsonl", payloads(BASELINE), cand)
    s = load_session(path)
    b, c = recorders_for(s.prompts[0])
    assert c.tail == b"!" and c.output() == b.output() + b"!"
    assert main(["replay", str(path), "--no-tui", "--json"]) == 3
    out = capsys.readouterr()
    p = json.loads(out.out)["prompts"][0]
    assert p["identical"] is False and p["first_divergence"]["byte"] == len(b.output())
    assert p["candidate"]["output"].endswith("!") and "judged again" not in out.err
