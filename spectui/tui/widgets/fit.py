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
# the settings row's cells before its order/cache label, with the long and the short words (tui/app.py's CSS:
# the row's padding 2; each label its words + 3; max tokens, temperature and seed inputs 8 cells, runs 4)
SETTINGS_CELLS = {False: 2 + 13 + 8 + 14 + 8 + 7 + 8 + 7 + 4, True: 2 + 6 + 8 + 7 + 8 + 7 + 8 + 7 + 4}


class FitLabel(Label):
    """A label with long and short words: the settings row says all it holds at 80 columns in the short ones."""

    def __init__(self, long: str, short: str, tooltip: str | None = None, **kwargs) -> None:
        super().__init__(long, **kwargs)
        self.words, self.short = (long, short), False
        self.tooltip = tooltip

    def say(self, long: str, short: str) -> None:
        self.words = (long, short)
        self.update(short if self.short else long)

    def fit(self, short: bool) -> None:
        if short != self.short:
            self.short = short
            self.update(self.words[short])


def order_cache_words(order: str, cache_prompt: bool | None) -> tuple[str, str]:
    """The settings row's last label, long and short: `order: sequential · prompt cache off`, `seq · cache off`
    (the prompt cache as the requests ask for it: `spectui tui --cache-prompt off|on|server`, off by default)."""
    cache = "server default" if cache_prompt is None else ("on" if cache_prompt else "off")
    short = "cache: server" if cache_prompt is None else f"cache {cache}"
    return f"order: {order} · prompt cache {cache}", f"{'seq' if order == 'sequential' else 'conc'} · {short}"


def fit_settings(screen: DOMNode, width: int) -> None:
    """The settings row in its long words where they fit the width, else in its short ones."""
    labels = list(screen.query("#settings FitLabel").results(FitLabel))
    last = max((len(label.words[0]) for label in labels if label.id == "order"), default=0) + 3
    short = SETTINGS_CELLS[False] + last > width
    for label in labels:
        label.fit(short)


def fit_main_screen(screen: DOMNode, width: int, height: int) -> None:
    """Lay the main screen out for a terminal of `width` x `height` cells."""
    try:
        panes, row = screen.query_one("#panes"), screen.query_one("#prompt-row")
    except NoMatches:  # not composed yet, or closing
        return
    narrow, short = width < NARROW_BELOW_COLUMNS, height < SHORT_BELOW_ROWS
    fit_settings(screen, width)
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
