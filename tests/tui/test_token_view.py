"""The pane's token view (text kept plain with its marks as ranges, rows counted once and only
the rows on screen rendered) draws exactly what Rich draws for the same marked text: the same rows,
the same characters in the same styles, as tokens stream in, after a rebuild and on a resize."""

from __future__ import annotations

import codecs
import random

import pytest
from rich.style import Style
from rich.text import Text
from textual.app import App

from spectui.core.events import TokenEvent
from spectui.tui.widgets.panes import TokenView
from tests.pilot import until

WORDS = ["def", "fizz", "buzz", " ", "  ", "\n", "\n\n", "    return", "\t", "x\ty", "é", "日本語", "🙂",
         "a" * 57, "-" * 23, "word, ", "(i)", " \n ", "ü" * 9, "   " * 9, " " * 50, "b" * 120]  # fmt: skip


def _tokens(n: int, seed: int) -> list[TokenEvent]:
    rng = random.Random(seed)
    labels = ["first", "accepted", "target", "unknown"]
    out = []
    for i in range(n):
        text = "".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 4)))
        data = text.encode()
        if out and out[-1].data.endswith("€".encode()[:2]):
            data = "€".encode()[2:] + data
        elif rng.random() < 0.05:  # a character split across two tokens (llama.cpp withholds it)
            data = data + "€".encode()[:2]
        label = "first" if i == 0 else rng.choice(labels[1:])
        out.append(TokenEvent(i, i, data, i, label, None, rng.choice([0, 0, 0, 3]) if label == "target" else 0))  # type: ignore[arg-type]
    return out


def _reference(view: TokenView, tokens: list[TokenEvent], width: int) -> list[list[tuple[str, Style | None]]]:
    """What Rich makes of the same text, each token appended with its own style, wrapped at `width`."""
    text, decoder = Text(), codecs.getincrementaldecoder("utf-8")()
    console = view.app.console
    for ev in tokens:
        s = decoder.decode(ev.data)  # a character split across tokens shows with the token that ends it
        if view.marked and ev.rejected:
            text.append(f"✗{ev.rejected}", f"bold {view.marks['rejected']}")
        if view.boundaries and ev.index:
            text.append("│", "dim")
        style = None
        if view.marked:
            style = view.marks.get(ev.label) if ev.label != "unknown" else "dim"
            if ev.label == "accepted":
                style = f"{style} underline"
        if view.diverge_token == ev.index:
            style = f"bold reverse {view.marks['diverge']}"
        text.append(s, style)
    rows = []
    for line in text.wrap(console, width):
        strip_cells = []
        for seg in line.render(console):
            strip_cells += [(ch, seg.style or None) for ch in seg.text]
        rows.append(strip_cells)
    return rows


def _shown(view: TokenView) -> list[list[tuple[str, Style | None]]]:
    rows = []
    for y in range(view._count):
        cells = [(ch, seg.style or None) for seg in view._row_strip(y) for ch in seg.text]
        while cells and cells[-1] == (" ", view._pad_style or None):
            cells.pop()  # the padding to the width
        rows.append(cells)
    return rows


def _trimmed(rows):
    out = []
    for cells in rows:
        cells = list(cells)
        while cells and cells[-1][0] == " " and cells[-1][1] is None:
            cells.pop()
        out.append(cells)
    return out


class ViewApp(App):
    def __init__(self, marked: bool) -> None:
        super().__init__()
        self.marked = marked

    def compose(self):
        yield TokenView(marked=self.marked)


@pytest.mark.parametrize("marked", [True, False])
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_rows_and_styles_are_richs_own(marked, seed):
    tokens = _tokens(400, seed)
    app = ViewApp(marked)
    async with app.run_test(size=(47, 20)) as pilot:
        view = app.query_one(TokenView)
        rng = random.Random(seed)
        at = 0
        while at < len(tokens):
            step = rng.randrange(1, 40)
            view.add(tokens[at : at + step])
            at += step
            await pilot.pause()
            width = view._width
            assert _trimmed(_shown(view)) == _trimmed(_reference(view, tokens[:at], width)), at
        if not marked:
            assert view.plain() == b"".join(t.data for t in tokens).decode(errors="replace")
        view.boundaries = True
        view.rebuild()
        assert _trimmed(_shown(view)) == _trimmed(_reference(view, tokens, view._width))
        view.mark_divergence(tokens[len(tokens) // 2].index)
        assert _trimmed(_shown(view)) == _trimmed(_reference(view, tokens, view._width))
        await pilot.resize_terminal(33, 20)
        # the resize reaches the view after the app and the screen laid out again: wait for it
        await until(pilot, lambda: view._width < width, 10, "the view to get its new width")
        assert view._width < width
        assert _trimmed(_shown(view)) == _trimmed(_reference(view, tokens, view._width))


async def test_the_view_follows_the_tail_and_stays_where_the_reader_scrolled():
    tokens = _tokens(600, 7)
    app = ViewApp(True)
    async with app.run_test(size=(60, 16)) as pilot:
        view = app.query_one(TokenView)
        view.add(tokens[:300])
        await until(pilot, lambda: view.scroll_y == view.max_scroll_y > 0, 10, "the tail on screen")
        assert view.scroll_y == view.max_scroll_y > 0  # the tail is on screen
        view.scroll_to(y=0, animate=False)
        await pilot.pause()
        view.add(tokens[300:])
        await pilot.pause()
        assert view.scroll_y == 0 and view.max_scroll_y > 0  # the reader's place is kept
        top = [s.text for s in (view.render_line(y) for y in range(3))]
        assert top == [s.text for s in (view._row_strip(y) for y in range(3))]
