"""The theory screen shows the weight-formats table `spectui formats` kept (tui.screens.formats_screen): the
table and its recommendation where one is kept, one line saying how to make it where none is, one line for a
damaged file."""

from __future__ import annotations

from textual.app import App
from textual.widgets import Static

from spectui.labs.formats.table import FormatRow, FormatsLesson, SpecOutcome, recommend
from spectui.run.formats import default_path
from spectui.store.locations import atomic_write
from spectui.tui.screens.formats_screen import formats_text
from spectui.tui.screens.theory_screen import TheoryScreen
from tests.pilot import until


def kept(path):
    rows = [
        FormatRow("Q4_1", plain_tps=45.0, verify=[1.0, 1.9, 2.9, 3.8], spec=[SpecOutcome("a", 3, 3, 3, 1.0)]),
        FormatRow("Q4_0", plain_tps=50.0, verify=[1.0, 1.2, 1.3, 1.4], spec=[SpecOutcome("a", 3, 3, 3, 1.1)]),
    ]
    return atomic_write(
        path, FormatsLesson("/m/x.Q4_1.gguf", rows, {"date": "D", "threads": 1}, recommend(rows)).dumps()
    )


def test_the_text_says_the_table_or_how_to_make_it(tmp_path):
    assert "not measured on this machine yet" in formats_text(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{}")
    assert formats_text(tmp_path / "bad.json").startswith("weight formats: ") and "\n" not in formats_text(
        tmp_path / "bad.json"
    )
    text = formats_text(kept(tmp_path / "t.json"))
    assert text.startswith("weight formats of x.Q4_1.gguf") and "recommendation: Q4_0" in text


async def test_the_theory_screen_shows_the_kept_table(tmp_path, monkeypatch):
    model = tmp_path / "m.Q4_1.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("SPECTUI_MODEL", str(model))
    kept(default_path(model))

    class One(App):
        def on_mount(self) -> None:
            self.push_screen(TheoryScreen.for_results([]))

    app = One()
    async with app.run_test(size=(140, 50)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, TheoryScreen), 20, "the theory screen")
        panel = app.screen.query_one("#formats", Static)
        await until(pilot, lambda: "recommendation: Q4_0" in str(panel.render()), 20, "the formats table")
