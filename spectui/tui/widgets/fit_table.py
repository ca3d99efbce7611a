"""A table that fits the terminal's width: first its headings shorten, then columns go by priority, the
verdict and the speed-up last (never). Below ~120 columns the cache lab and the sweep lost their outputs and
speed-up columns off the right edge, and the session browser cut its verdict to one letter.

The rows are kept whole; only what is shown changes with the width, so a wider terminal shows them all again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import DataTable


@dataclass(frozen=True)
class Plan:
    drop: tuple[str, ...] = ()  # columns that go first, in this order; the others stay
    short: dict[str, str] = field(default_factory=dict)  # heading → shorter heading


# each table by its id: what goes first; the verdict ("output", "outputs") and the speed-up are never dropped
PLANS = {
    "turns": Plan(
        drop=("processed cold/warm", "TTFT cold ms", "TTFT warm ms", "reused warm"),
        short={
            "TTFT cold ms": "cold ms",
            "TTFT warm ms": "warm ms",
            "processed cold/warm": "proc c/w",
            "reused warm": "reused",
            "TTFT speed-up": "speed-up",
        },
    ),
    "levels": Plan(
        drop=("per-request b/c", "TTFT ms b/c", "baseline tok/s", "candidate tok/s"),
        short={
            "concurrency": "conc",
            "baseline tok/s": "b tok/s",
            "candidate tok/s": "c tok/s",
            "per-request b/c": "per-req b/c",
            "TTFT ms b/c": "TTFT b/c",
            "speed-up (acceptance)": "speed-up",
        },
    ),
    "sessions": Plan(
        drop=("candidate", "file", "prompts", "date"),
        short={"speed-up (acceptance)": "speed-up", "prompts": "n"},
    ),
}

PADDING = 2  # a DataTable cell's padding, one each side


def choose(labels: list[str], rows: list[tuple], width: int, plan: Plan) -> tuple[list[int], bool]:
    """The columns to show (indexes) and whether with short headings, for `width` cells."""

    def need(shown: list[int], short: bool) -> int:
        total = 0
        for i in shown:
            head = plan.short.get(labels[i], labels[i]) if short else labels[i]
            cells = [c.cell_len if isinstance(c, Text) else cell_len(str(c)) for c in (r[i] for r in rows)]
            total += max([len(head), *cells]) + PADDING
        return total

    shown = list(range(len(labels)))
    if need(shown, False) <= width:
        return shown, False
    for label in plan.drop:
        if need(shown, True) <= width:
            break
        if label in labels and labels.index(label) in shown:
            shown.remove(labels.index(label))
    return shown, True


class FitTable(DataTable):
    """A DataTable whose columns fit its width by the plan of its id (PLANS)."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self._labels: list[str] = []
        self._rows: list[tuple[tuple, dict]] = []
        self._shown: tuple[list[int], bool] = ([], False)

    @property
    def plan(self) -> Plan:
        return PLANS.get(self.id or "", Plan())

    @property
    def shown_labels(self) -> list[str]:
        shown, short = self._shown
        return [self.plan.short.get(self._labels[i], self._labels[i]) if short else self._labels[i] for i in shown]

    def add_columns(self, *labels):
        self._labels += [str(x) for x in labels]
        self._refit(force=True)
        return []

    def add_row(self, *cells, **kw):
        self._rows.append((cells, kw))
        if self._refit():
            return None
        shown, _ = self._shown
        return super().add_row(*(cells[i] for i in shown), **kw)

    def clear(self, columns: bool = False):
        self._rows.clear()
        if columns:
            self._labels.clear()
            self._shown = ([], False)
        return super().clear(columns)

    def on_resize(self) -> None:
        self._refit()

    def _width(self) -> int:
        return (self.size.width or self.app.size.width) - 2  # room for a vertical scrollbar

    def _refit(self, force: bool = False) -> bool:
        """Choose the columns again; rebuild the table when the choice changed. True when rebuilt."""
        chosen = choose(self._labels, [c for c, _ in self._rows], self._width(), self.plan)
        if chosen == self._shown and not force:
            return False
        self._shown = chosen
        cursor = self.cursor_row
        super().clear(columns=True)
        for label in self.shown_labels:
            super().add_column(label)
        for cells, kw in self._rows:
            super().add_row(*(cells[i] for i in chosen[0]), **kw)
        if self._rows and cursor < len(self._rows):
            self.move_cursor(row=cursor)
        return True
