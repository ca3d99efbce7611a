"""F3 at 80 columns: the method table keeps one line a method (the title cut with "…", then disk a sample and
training memory dropped, as tui/widgets/fit_table.py drops a table's columns), where each row wrapped onto two;
wide, the table is the CLI's. The bundled SmolLM2 GGUF (`make setup`) is the target, as F3 opens it."""

from __future__ import annotations

import pytest
from rich.cells import cell_len
from textual.app import App
from textual.widgets import Static

from spectui.machine.assets import find_model
from spectui.tui.screens.drafts_screen import DraftsScreen, cost_text
from tests.pilot import until

MODEL = find_model()


def _table(report: str) -> list[str]:
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("method"))
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    return lines[start:end]


@pytest.mark.skipif(MODEL is None, reason="no bundled model: run `make setup`")
@pytest.mark.parametrize("width", [80, 60])
async def test_the_method_table_fits_the_terminal_one_line_a_method(width):
    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(DraftsScreen(str(MODEL), None))

    app = Host()
    async with app.run_test(size=(width, 30)) as pilot:
        await until(
            pilot,
            lambda: isinstance(app.screen, DraftsScreen) and "method" in str(app.screen.query_one("#report").render()),
            what="the drafts screen's report",
        )
        report = app.screen.query_one("#report", Static)
        await until(pilot, lambda: report.content_size.width > 0, what="the report laid out")
        table = _table(str(report.render()))
        assert len(table) == 6  # the heading and five methods
        assert max(cell_len(line) for line in table) <= report.content_size.width, table
        assert table[0].split()[:2] == ["method", "trainable"]  # trainable stays, whatever goes
        titles = [line[:20] for line in table[1:]]
        assert len(set(titles)) == len(titles) and "EAGLE-3 (SpecForge" in table[3], table
        full = _table(cost_text(str(MODEL), None, 2048, 5000))
        assert max(cell_len(line) for line in full) > report.content_size.width  # it did not fit whole
