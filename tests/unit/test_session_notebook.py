"""Sessions (record, truncate, foreign files) and the lab notebook (append keeps every earlier byte)."""

from __future__ import annotations

import json
import tomllib

import pytest

from spectui.cli.main import main
from spectui.core.errors import InputError
from spectui.store import notebook
from spectui.store.session import load_session, recorders_for
from tests.pilot import ready, until


@pytest.fixture(scope="module")
def recorded(llama_servers, tmp_path_factory):
    """A live run against real servers, saved; the compare JSON kept to check the replay against."""
    import contextlib
    import io

    path = tmp_path_factory.mktemp("s") / "run.jsonl"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(
            [
                "compare",
                "--baseline",
                llama_servers["baseline"],
                "--candidate",
                llama_servers["draft"],
                "--prompts",
                "quick",
                "--max-tokens",
                "48",
                "--save",
                str(path),
                "--json",
            ]
        )
    assert code == 0
    return path, json.loads(out.getvalue())


@pytest.mark.server
def test_replay_gives_the_same_labels_figures_and_verdict(recorded, capsys):
    path, live = recorded
    assert main(["replay", str(path), "--no-tui", "--json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    for a, b in zip(live["prompts"], replayed["prompts"], strict=True):
        assert a["identical"] == b["identical"] and a["first_divergence"] == b["first_divergence"]
        for side in ("baseline", "candidate"):
            for key in (
                "tokens",
                "label_counts",
                "drafted",
                "accepted",
                "steps",
                "ttft_ms",
                "decode_tps",
                "acceptance_rate",
                "mean_accepted_length",
                "output",
                "metrics_check",
            ):
                assert a[side][key] == b[side][key], (side, key)
        assert a["speedup"] == b["speedup"]
    assert replayed["candidate"]["build"] == live["candidate"]["build"]


@pytest.mark.server
def test_truncated_session_replays_up_to_the_last_whole_event(recorded, tmp_path, capsys):
    path, _ = recorded
    data = path.read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: len(data) // 2 + 7])  # stops mid-line
    s = load_session(cut)
    assert s.warnings and "incomplete" in s.warnings[0]
    b, c, _ = recorders_for(s.prompts[0])
    assert b.tokens  # whatever was whole is there
    code = main(["replay", str(cut), "--no-tui"])
    err = capsys.readouterr().err
    assert "warning" in err and "incomplete" in err
    assert code in (0, 1, 3)


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
        self.speedup, self.identical, self.divergence = 0.3, True, None


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


@pytest.mark.server
async def test_replay_in_the_tui_matches_the_live_run(recorded):
    """Replay is another event source for the same UI: same labels, figures and verdict as the live run."""
    from spectui.machine.probes import GPUProbe
    from spectui.store.replay import ReplayControl, SessionBackend
    from spectui.tui.app import AppConfig, make_app
    from tests.fakes import FakeNVML

    path, live = recorded
    session = load_session(path)
    control = ReplayControl(None)
    cfg = AppConfig(
        session.infos["baseline"].url,
        session.infos["candidate"].url,
        prompts=[p.prompt for p in session.prompts],
        backends={s: SessionBackend(s, session, None, control) for s in ("baseline", "candidate")},
        replay_control=control,
        autorun_all=True,
        gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
        autosave=False,
    )
    app = make_app(cfg)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: len(app.results) == len(live["prompts"]) and app.run_done.is_set(), timeout=20)
        assert len(app.results) == len(live["prompts"])
        for r, want in zip(app.results, live["prompts"]):
            assert r.identical == want["identical"]
            for side in ("baseline", "candidate"):
                f = getattr(r, side).figures
                assert f.label_counts == want[side]["label_counts"]
                assert (f.tokens, f.drafted, f.accepted, f.steps) == tuple(
                    want[side][k] for k in ("tokens", "drafted", "accepted", "steps")
                )
                assert f.ttft_ms == pytest.approx(want[side]["ttft_ms"]) and f.decode_tps == pytest.approx(
                    want[side]["decode_tps"]
                )
        banner = str(app.q("#banner").render())
        assert "IDENTICAL" in banner


@pytest.mark.server
async def test_tui_autosaves_and_appends_to_the_notebook(llama_servers, tmp_path):
    from spectui.core.types import GenerationParams
    from spectui.machine.probes import GPUProbe
    from spectui.tui.app import AppConfig, make_app
    from tests.fakes import FakeNVML

    nb = tmp_path / "lab.toml"
    cfg = AppConfig(
        llama_servers["baseline"],
        llama_servers["ngram"],
        params=GenerationParams(max_tokens=24, cache_prompt=False),
        gpu_probe=GPUProbe(FakeNVML()),
        session_dir=str(tmp_path / "sessions"),
        notebook=str(nb),
        initial_prompt="Name three colours.",
    )
    app = make_app(cfg)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot, app)
        app.action_run()
        await until(pilot, lambda: app.results and app.run_done.is_set(), timeout=30)
        await pilot.press("ctrl+n")
        await pilot.press("ctrl+e")
        await pilot.pause()
    [saved] = list((tmp_path / "sessions").glob("*.jsonl"))
    s = load_session(saved)
    b, c, div = recorders_for(s.prompts[0])
    assert b.output() == app.results[0].baseline.output() and div is None
    rows = tomllib.loads(nb.read_text())["measurement"]
    assert rows[0]["identical"] is True and rows[0]["candidate_build"].startswith("b11434")
    assert list((tmp_path / "sessions").glob("*.md")) and list((tmp_path / "sessions").glob("*.json"))


def test_probe_samples_round_trip_through_a_session(tmp_path):
    from spectui.core.types import GenerationParams, ServerInfo
    from spectui.machine.probes import GPUSample, HostSample
    from spectui.store.prompts import single
    from spectui.store.session import SessionWriter

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
    from spectui.store.session import SessionWriter

    w = SessionWriter(tmp_path / "s.jsonl")
    w.servers({"baseline": ServerInfo("http://a"), "candidate": ServerInfo("http://b")})
    w.prompt(single(json.loads('"half \\ud800 a pair"')), GenerationParams(), "sequential")
    w.prompt(single("next"), GenerationParams(), "sequential")
    w.close()
    lines = (tmp_path / "s.jsonl").read_text().splitlines()
    assert len(lines) == 4 and "\\ud800" in lines[2]  # escaped, not a broken UTF-8 file
    assert load_session(tmp_path / "s.jsonl").prompts[-1].prompt.preview == "next"
