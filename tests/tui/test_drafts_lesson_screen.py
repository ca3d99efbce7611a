"""F3 (the drafts screen) shows what a trained draft measured: the newest `spectui drafts lesson` folder under
the data folder's lessons/ — each phase's time, memory and tokens, acceptance per position, the n_max
chosen, the certificate's verdict line and the three-way table — above the cost estimate; another folder
typed in is read when Enter is pressed, a damaged one is one line."""

from __future__ import annotations

from textual.widgets import Input, Static

from spectui.labs.drafts.lesson import Lesson, Phase, ThreeWay, write_lesson
from spectui.labs.theory.draft_length import choose_n_max
from spectui.labs.theory.terms import StepCosts
from spectui.tui.screens.drafts_screen import DraftsScreen
from tests.pilot import until
from tests.tui.test_snapshots import make, run_and_wait

VERDICT = "IDENTICAL on 8/8 (greedy) · SLOWER 0.90× [0.89–0.91] at α 0.20 (mean accepted length 1.52)"


def lesson_fixture(folder) -> Lesson:
    les = Lesson("eagle3", "/models/SmolLM2-135M-Instruct.Q4_1.gguf", "/models/SmolLM2-135M-Instruct.F32.gguf")
    les.record(Phase("data", 41.0, 312.0, 5602, "46 training prompts answered", "llama-server"))
    les.record(Phase("train", 187.0, 1530.0, 5602, "5,089,536 parameters", "the trainer"))
    les.record(Phase("convert", 9.0, None, None, "head.gguf, 66,800,000 bytes", "the converter"))
    les.per_position, les.probe_n_max = [0.33, 0.13, 0.06], 5
    les.acceptance = {"accepted": 512, "drafted": 2662, "steps": 900}
    les.cost = {"c": 0.21, "c_source": "measured from the candidate's run", "verify": [1.0, 1.1, 1.2, 1.3]}
    les.choice = choose_n_max(les.per_position, StepCosts(0.21, (1.0, 1.1, 1.2, 1.3), (), {}))
    les.verdict = VERDICT
    les.certificate = str(folder / "certificate-nmax1" / "certificate.json")
    les.three_way = ThreeWay("Q4_1.gguf", "F32.gguf", 10.5, 3.6, 3.2, 0.34, 0.90)
    write_lesson(folder, les)
    return les


async def test_f3_shows_the_newest_lesson_above_the_estimate(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path / "data"))
    older = tmp_path / "data" / "lessons" / "lookup-old"
    older.mkdir(parents=True)
    write_lesson(older, Lesson("lookup", "/m/old.gguf", "/m/old.gguf"))
    folder = tmp_path / "data" / "lessons" / "eagle3-SmolLM2-135M-Instruct.Q4_1-f32"
    folder.mkdir(parents=True)
    les = lesson_fixture(folder)
    app = make()
    async with app.run_test(size=(160, 60)) as pilot:
        await run_and_wait(pilot)
        await pilot.press("f3")
        await until(pilot, lambda: isinstance(app.screen, DraftsScreen), 20, "the drafts screen")
        shown = app.screen.query_one("#lesson-report", Static)
        await until(pilot, lambda: "measured by" in str(shown.render()), 20, "the lesson's figures")
        text = str(shown.render())
        assert app.screen.query_one("#lesson", Input).value == str(folder)  # the newest, not lookup-old
        for phase in ("data", "train", "convert"):
            assert phase in text
        assert "187 s, peak 1,530 MiB (the trainer), 5,602 tokens" in text
        assert "acceptance per position at n_max 5: 1: 33%, 2: 13%, 3: 6%" in text
        assert f"--spec-draft-n-max {les.choice.n_max}" in text and "predicted S(k)" in text
        assert f"certificate: {VERDICT}" in text
        assert "plain Q4_1.gguf 10.5 tok/s" in text and "still slower than plain quantised" in text
        assert "EAGLE-3" in str(app.screen.query_one("#report", Static).render())  # the estimate still below

        (tmp_path / "broken").mkdir()
        (tmp_path / "broken" / "lesson.json").write_text("[1, 2")
        app.screen.query_one("#lesson", Input).value = str(tmp_path / "broken")
        app.screen.query_one("#lesson", Input).focus()
        await pilot.press("enter")
        await until(pilot, lambda: "not a lesson record" in str(shown.render()), 20, "the damaged folder's line")
        assert len(str(shown.render()).splitlines()) == 1


async def test_f3_without_a_lesson_says_how_to_make_one(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path / "empty"))
    app = make()
    async with app.run_test(size=(120, 40)) as pilot:
        await run_and_wait(pilot)
        await pilot.press("f3")
        await until(pilot, lambda: isinstance(app.screen, DraftsScreen), 20, "the drafts screen")
        shown = app.screen.query_one("#lesson-report", Static)
        await until(pilot, lambda: "spectui drafts lesson" in str(shown.render()), 20, "the hint")
