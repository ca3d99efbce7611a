"""`spectui drafts lesson`: the n_max a measured draft pays for (labs.theory.draft_length) against values worked
out by hand here, the draft's cost from its own run, the lesson record's round trip, and the command's
one-line errors where the environment is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spectui.cli.main import main
from spectui.core.errors import InputError
from spectui.labs.drafts.lesson import Lesson, Phase, ThreeWay, read_lesson, write_lesson
from spectui.labs.theory.draft_length import RunCost, choose_n_max, draft_cost
from spectui.labs.theory.terms import StepCosts
from spectui.run.lesson_serving import LessonOptions, resolve_tools

SHARES = [0.5, 0.25, 0.05]  # position i accepted in this share of verification steps


def costs(c: float, verify: tuple[float, ...]) -> StepCosts:
    return StepCosts(c, verify, (), {})


def test_n_max_where_verification_is_nearly_free_is_the_middle_length():
    # F32-like: V(k) = 1 + 0.05 (k - 1); c = 0.1. By hand:
    # S(1) = 1.50 / (0.1 + 1.05) = 1.3043;  S(2) = 1.75 / (0.2 + 1.10) = 1.3462;  S(3) = 1.80 / (0.3 + 1.15) = 1.2414
    ch = choose_n_max(SHARES, costs(0.1, (1.0, 1.05, 1.10, 1.15)))
    assert ch.n_max == 2 and ch.pays
    assert ch.speedups == pytest.approx((1.5 / 1.15, 1.75 / 1.30, 1.80 / 1.45))
    assert ch.tokens_per_step == pytest.approx((1.5, 1.75, 1.8))
    assert "position 3's 5.0% does not pay" in ch.why


def test_n_max_where_verification_costs_nearly_k_steps_pays_nowhere():
    # Q4_1-like: V(k) = 1 + 0.5 (k - 1). S(1) = 1.5 / 1.6 = 0.9375, S(2) = 1.75 / 2.2, S(3) = 1.8 / 2.8
    ch = choose_n_max(SHARES, costs(0.1, (1.0, 1.5, 2.0, 2.5)))
    assert ch.n_max == 1 and not ch.pays
    assert ch.speedups[0] == pytest.approx(0.9375)
    assert "no length beats plain decoding" in ch.why


def test_a_free_draft_with_free_verification_takes_every_measured_position():
    ch = choose_n_max(SHARES, costs(0.0, (1.0,)))  # V(k) = 1 everywhere: each position adds tokens for nothing
    assert ch.n_max == 3 and ch.speedups[-1] == pytest.approx(1.8)
    assert "no position beyond 3 was measured" in ch.why


def test_an_empty_or_impossible_share_is_refused():
    with pytest.raises(ValueError, match="no per-position acceptance"):
        choose_n_max([], costs(0.0, (1.0,)))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        choose_n_max([1.2], costs(0.0, (1.0,)))


def test_the_drafts_cost_comes_out_of_its_own_run():
    # 100 tokens at half the plain rate = 200 plain steps of time; 40 steps drafting 3 each (120 drafted) and
    # accepting 50 → 100 - 40 - 50 = 10 undrafted steps; V(4) = 1.15 → 200 - 10 - 46 = 144 over 120 = 1.2
    rc = RunCost()
    rc.add(100, 5.0, 10.0, 40, 120, 50)
    c, how = draft_cost(rc, costs(0.0, (1.0, 1.05, 1.10, 1.15)))
    assert c == pytest.approx(1.2)
    assert "120 drafted tokens" in how
    rc.add(0, 5.0, 10.0, 1, 1, 1)  # a run without tokens adds nothing
    assert rc.tokens == 100
    assert draft_cost(RunCost(), costs(0.0, (1.0,)))[0] is None


def test_a_negative_cost_is_clipped_and_said():
    rc = RunCost()
    rc.add(100, 20.0, 10.0, 40, 120, 50)  # faster than V allows: 50 steps of time
    c, how = draft_cost(rc, costs(0.0, (1.0, 1.05, 1.10, 1.15)))
    assert c == 0.0 and "< 0" in how


def test_the_lesson_record_round_trips_and_says_the_three_way_table(tmp_path):
    les = Lesson("eagle3", "/m/SmolLM2.Q4_1.gguf", "/m/SmolLM2.F32.gguf")
    les.record(Phase("train", 187.0, 1530.0, 10070, "head", "the trainer"))
    les.record(Phase("data", 50.0, 300.0, 10070, "139 records", "llama-server"))
    les.per_position, les.probe_n_max = [0.33, 0.13, 0.06], 5
    les.choice = choose_n_max(les.per_position, costs(0.1, (1.0, 1.05, 1.10, 1.15)))
    les.three_way = ThreeWay("Q4_1.gguf", "F32.gguf", 10.0, 4.0, 5.0, 0.4, 1.25)
    les.verdict = "IDENTICAL on 16/16 (greedy) · 1.25× [1.1–1.4]"
    les.done["prove"] = {"n_max": 1, "speedup": 1.25}
    write_lesson(tmp_path, les)
    back = read_lesson(tmp_path)
    assert back == les
    assert [p.name for p in back.phases] == ["data", "train"]  # in the lesson's order
    assert back.three_way is not None and back.three_way.spec_over_quantised == pytest.approx(0.5)
    text = back.text()
    assert "plain Q4_1.gguf 10.0 tok/s" in text and "0.50× plain quantised — still slower" in text
    assert f"predicted S(1) {1.33 / 1.15:.2f}× from the draft's own c, V(k) and acceptance" in text
    assert "beside the certificate's measured 1.25×" in text
    assert "--spec-draft-n-max 1" in text and "1: 33%" in text  # S(1) = 1.33 / 1.15 > S(2) = 1.46 / 1.30


def test_a_damaged_lesson_record_is_one_line(tmp_path):
    (tmp_path / "lesson.json").write_text("{not json")
    with pytest.raises(InputError, match="not a lesson record"):
        read_lesson(tmp_path)
    assert read_lesson(tmp_path / "nothing") is None


@pytest.mark.parametrize(
    "doc",
    [
        "[]",  # JSON, not an object (it raised AttributeError, a traceback, before)
        "1",
    ],
)
def test_a_lesson_record_of_the_wrong_shape_is_one_line(tmp_path, doc):
    from spectui.labs.drafts.lesson import measured_text

    (tmp_path / "lesson.json").write_text(doc)
    with pytest.raises(InputError, match="not a lesson record"):
        read_lesson(tmp_path)
    assert "not a lesson record" in measured_text(tmp_path)


def test_a_lesson_record_missing_a_figure_is_one_line_on_the_drafts_screen_and_drafts_cost(tmp_path):
    from spectui.labs.drafts.lesson import measured_text

    (tmp_path / "lesson.json").write_text('{"draft": "eagle3", "target": "a", "served": "b", "cost": {"x": 1}}')
    text = measured_text(tmp_path)
    assert text.startswith(f"lesson {tmp_path}: ") and "not a lesson record" in text and "\n" not in text


def _fake_assets(monkeypatch, tmp_path: Path, torch: bool):
    from spectui.machine import assets

    server = tmp_path / "llama-server"
    server.write_text("#!/bin/sh\n")
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    found = assets.Assets(server, None, model, None, None, None)
    monkeypatch.setattr(assets, "find_all", lambda: found)
    monkeypatch.setattr(assets, "find_vllm_python", lambda: (tmp_path / "python") if torch else None)
    monkeypatch.setattr(assets, "find_convert_script", lambda: None)


def test_lesson_without_the_torch_environment_says_run_setup_vllm(monkeypatch, tmp_path, capsys):
    _fake_assets(monkeypatch, tmp_path, torch=False)
    code = main(["drafts", "lesson", "-o", str(tmp_path / "les"), "--prompts", "default"])
    err = capsys.readouterr().err
    assert code != 0
    assert "torch environment" in err and "spectui setup --vllm" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2
    assert not (tmp_path / "les").exists()  # checked before anything is made or started


def test_lesson_without_llama_server_or_converter_or_quantize(monkeypatch, tmp_path, capsys):
    _fake_assets(monkeypatch, tmp_path, torch=True)
    assert main(["drafts", "lesson", "-o", str(tmp_path / "les")]) != 0
    assert "convert_hf_to_gguf.py is missing" in capsys.readouterr().err
    assert main(["drafts", "lesson", "-o", str(tmp_path / "les"), "--draft", "lookup", "--f32"]) != 0
    assert "llama-quantize is missing" in capsys.readouterr().err  # said before building anything


def test_lesson_bad_folder_and_bad_target(monkeypatch, tmp_path, capsys):
    _fake_assets(monkeypatch, tmp_path, torch=False)
    f = tmp_path / "a-file"
    f.write_text("x")
    assert main(["drafts", "lesson", "-o", str(f)]) != 0
    assert "is a file" in capsys.readouterr().err
    assert main(["drafts", "lesson", "-o", str(tmp_path / "x"), "--target", str(tmp_path / "none.gguf")]) != 0
    assert "does not exist" in capsys.readouterr().err


def test_lesson_in_a_folder_of_another_draft_is_refused(monkeypatch, tmp_path, capsys):
    _fake_assets(monkeypatch, tmp_path, torch=True)
    from spectui.machine import assets

    monkeypatch.setattr(assets, "find_convert_script", lambda: tmp_path / "convert.py")
    out = tmp_path / "les"
    out.mkdir()
    (out / "lesson.json").write_text(json.dumps(Lesson("lookup", str(tmp_path / "m.gguf"), "x").to_json()))
    assert main(["drafts", "lesson", "-o", str(out)]) != 0
    err = capsys.readouterr().err
    assert "holds a lesson of a lookup draft" in err and "Traceback" not in err


def test_the_three_way_table_finds_the_quantised_model_behind_spectuis_f32_copy(tmp_path):
    from spectui.run.three_way import applies, quantised_sibling, table_text

    q4 = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    f32 = tmp_path / "SmolLM2-135M-Instruct.F32.gguf"
    draft = tmp_path / "SmolLM2-135M-Instruct.Q2_K-draft.gguf"  # named like a copy, but not the target's
    q40 = tmp_path / "SmolLM2-135M-Instruct.Q4_0.gguf"  # the demo's format beside it: not the bundled model
    for p in (q4, f32, draft, q40):
        p.write_bytes(b"GGUF")
    assert quantised_sibling(str(f32)) == q4
    assert quantised_sibling(str(q4)) is None and quantised_sibling(None) is None
    assert quantised_sibling(str(tmp_path / "Other.F32.gguf")) is None

    def doc(cand: str | None, base: str | None = "none") -> dict:
        return {
            "measured_on": {
                "servers": {"baseline": {"speculative": {"type": base}}, "candidate": {"speculative": {"type": cand}}}
            }
        }

    assert applies(doc("ngram-simple"), str(f32)) == q4
    assert applies(doc("none"), str(f32)) is None  # nothing speculated: no "faster" to qualify
    assert applies(doc("ngram-simple", "draft-simple"), str(f32)) is None  # both speculate: not this lesson
    assert applies(doc("ngram-simple"), str(q4)) is None  # the quantised weights themselves
    tw = ThreeWay(q4.name, f32.name, 10.5, 3.6, 6.2, 0.343, 1.71)
    text = table_text(tw)
    assert "plain SmolLM2-135M-Instruct.Q4_1.gguf" in text and "10.5 tok/s" in text
    assert f"{0.343 * 1.71:.2f}× plain quantised — still slower than plain quantised" in text


def test_drafts_cost_prints_what_the_lesson_measured_after_the_estimate(tmp_path, capsys):
    from tests.unit.test_drafts_cost import LLAMA31_8B

    target = tmp_path / "llama"
    target.mkdir()
    (target / "config.json").write_text(json.dumps(LLAMA31_8B))
    folder = tmp_path / "lesson"
    folder.mkdir()
    les = Lesson("eagle3", "/m/a.Q4_1.gguf", "/m/a.F32.gguf", per_position=[0.3, 0.1], probe_n_max=5)
    les.record(Phase("train", 187.0, 1530.0, 10070, "head", "the trainer"))
    les.verdict = "IDENTICAL on 16/16 (greedy) · SLOWER 0.90× [0.89–0.91]"
    write_lesson(folder, les)
    assert main(["drafts", "cost", "--target", str(target), "--lesson", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.index("EAGLE-3") < out.index(f"measured by `spectui drafts lesson -o {folder}`")
    assert "certificate: IDENTICAL on 16/16" in out and "187 s, peak 1,530 MiB (the trainer)" in out
    assert main(["drafts", "cost", "--target", str(target), "--lesson", str(folder), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["lesson"]["per_position"] == [0.3, 0.1] and doc["target"] and doc["inputs"]  # one document
    assert main(["drafts", "cost", "--target", str(target), "--lesson", str(tmp_path / "none")]) != 0
    assert "is not a folder" in capsys.readouterr().err


def test_where_no_length_pays_the_cheapest_is_named_even_if_a_longer_one_is_less_slow():
    # V(2) = 1.6, V(3) = 1.8, c = 0: S(1) = 1.4 / 1.6 = 0.875 < S(2) = 1.7 / 1.8 = 0.944 < 1
    ch = choose_n_max([0.4, 0.3], costs(0.0, (1.0, 1.6, 1.8)))
    assert not ch.pays
    assert ch.speedups == pytest.approx((1.4 / 1.6, 1.7 / 1.8))
    assert ch.n_max == 1 and ch.why.startswith("S(1) = 1.400")
    assert "no length beats plain decoding: 1, the cheapest, named" in ch.why


def test_a_lookup_lesson_with_one_run_is_refused_before_anything_runs(tmp_path):
    """The lookup draft is served as ngram-cache, whose drafter keeps its context cache from one request to the
    next: its proof needs a warm run of each prompt, so --runs 1 is refused up front, not after training."""
    opts = LessonOptions(out=tmp_path / "l", prompts="default", draft="lookup", runs=1)
    with pytest.raises(InputError, match="keeps state between requests"):
        resolve_tools(opts)
    assert not (tmp_path / "l").exists()
