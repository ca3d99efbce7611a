"""The main screen fitted to the terminal: on a short one the prompt row, the legend and the live panel give
their rows to the two outputs (btop and nvitop fold their panels the same way)."""

from __future__ import annotations

from textual.css.query import NoMatches
from textual.dom import DOMNode
from textual.widgets import Input, Label, Select

from spectui.tui.widgets.panes import LivePanel

SHORT_BELOW_ROWS = 30  # fewer rows: the prompt row is one line, the legend hides, the live panel folds
NARROW_BELOW_COLUMNS = 100  # fewer columns: the prompt row's pickers are narrower
PANE_ROWS = 10  # a folded pane: its border, one line of header, one of figures and 6 of output
STACK_FROM_ROWS = 48  # a narrow terminal stacks the panes only with the rows for two outputs of 6+ rows each


def fit_main_screen(screen: DOMNode, width: int, height: int) -> None:
    """Lay the main screen out for a terminal of `width` x `height` cells."""
    try:
        panes, row = screen.query_one("#panes"), screen.query_one("#prompt-row")
    except NoMatches:  # not composed yet, or closing
        return
    narrow, short = width < NARROW_BELOW_COLUMNS, height < SHORT_BELOW_ROWS
    panes.set_class(narrow and height >= STACK_FROM_ROWS, "-narrow")
    row.set_class(narrow, "-narrow")
    row.styles.height = 1 if short else 3
    for widget in row.query("Input, Select"):
        if isinstance(widget, Input | Select) and widget.compact != short:
            widget.compact = short
    for legend in screen.query("#legend").results(Label):
        legend.display = not short
    folded = True
    for live in screen.query(LivePanel):
        live.fold_for(height)
        folded = live.folded
    # the banner grows with causes and probe lines: never past the rows the outputs keep (6 + 4 of frame each)
    stacked = panes.has_class("-narrow")
    fixed = 1 + (1 if short else 3) + 1 + (0 if short else 1) + (1 if folded else 8) + 1
    for banner in screen.query("#banner"):
        banner.styles.max_height = max(2, height - fixed - PANE_ROWS * (2 if stacked else 1))
