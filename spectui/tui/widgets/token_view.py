"""The pane's token view: one side's output with each candidate token marked by its label, kept plain
with its marks as ranges and drawn a row at a time."""

from __future__ import annotations

import re
from array import array
from bisect import bisect_right
from typing import cast

from rich._wrap import divide_line
from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Span, Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from spectui.core.events import TokenEvent
from spectui.core.tokens import TokenLog

_TRAILING_SPACE = re.compile(r"\s+$")

# the candidate's inline marks, a key cycles them: every mark; the labels' colours only, no glyph
# written into the text (`✗7` before a line number read as part of it, and shifted indentation); none
MARK_MODES = ("full", "colour", "off")

DEFAULT_MARKS = {
    "accepted": "#5fd787",
    "target": "#87afff",
    "first": "#d0d0d0",
    "rejected": "#ff5f87",
    "diverge": "#ff3030",
}


class TokenView(ScrollView, can_focus=True):
    """The output of one side, with each candidate token marked by its label.

    The text is kept plain, as logical lines, with its marks as ranges (a style from each offset on),
    never as styled segments per token. Each logical line's display rows are counted once, with Rich's
    own word wrap (the open last line from its last row on), and only the rows on screen are rendered,
    from a cache of strips. The virtual height changes without a layout of the screen. So a frame costs
    the rows that changed, not the output's length, and both panes keep up with a fast stream.
    """

    DEFAULT_CSS = "TokenView { width: 1fr; height: 1fr; padding: 0 1; }"

    def __init__(self, marked: bool, **kw) -> None:
        super().__init__(**kw)
        self.marked = marked
        self.mark_mode = "full"  # MARK_MODES: what a marked view draws of its labels
        self.marks = dict(DEFAULT_MARKS)
        self.tokens: TokenLog = TokenLog()  # what is shown, packed (core.tokens)
        self.tail = b""
        self.boundaries = False
        self.diverge_token: int | None = None
        self.rejected_text: dict[int, str] = {}  # token index → the draft it replaced (the draft probe)
        self.show_rejected = False
        self._width = 0
        self._last_end = 0
        self._pad_style = Style()
        self._clear()

    # -- content -----------------------------------------------------------------------------
    def reset(self) -> None:
        self.tokens.clear()
        self.tail = b""
        self.diverge_token = None
        self.rejected_text = {}
        self._clear()
        self._relayout()

    def _clear(self) -> None:
        self._pending_bytes = b""  # bytes not yet decodable (a split UTF-8 sequence)
        self._lines: list[str] = []  # the complete logical lines
        self._parts: list[str] = []  # the open (last) line, in pieces
        self._line_at = array("q", [0])  # where each logical line starts in the whole text (a newline is 1)
        self._length = 0  # characters in the whole text
        self._mark_at = array("q")  # a style runs from each of these offsets to the next …
        self._mark_style = array("H")  # … this one (an index into _styles; 0: none)
        self._styles: list[str | None] = [None]
        self._style_ids: dict[str | None, int] = {None: 0}
        self._style_now = 0
        self._row_at = array("q", [0])  # first display row of each complete line, then of the open line
        self._counted = 0  # complete lines whose rows are counted at self._width
        self._open_breaks: list[int] = []  # wrap offsets of the open line, as far as counted
        self._open_rows: list[Text] | None = None  # the open line's rows where Rich wraps it (tabs)
        self._open_text = ""
        self._count = 0  # display rows in all
        self._strips: dict[int, Strip] = {}  # display row → its strip, padded to the width
        self._rich_styles: dict[int, Style] = {}  # style id → its parsed style
        self._layouts: dict[int, list[int] | list[Text]] = {}  # complete line → its breaks (or rows)

    def _emit_text(self, text: str, style: str | None) -> None:
        if not text:
            return
        sid = self._style_ids.get(style)
        if sid is None:
            sid = self._style_ids[style] = len(self._styles)
            self._styles.append(style)
        if sid != self._style_now:
            self._mark_at.append(self._length)
            self._mark_style.append(sid)
            self._style_now = sid
        if "\n" not in text:
            self._parts.append(text)
            self._length += len(text)
            return
        first, *rest = text.split("\n")
        self._parts.append(first)
        self._length += len(first)
        for part in rest:
            self._lines.append("".join(self._parts))
            self._length += 1
            self._line_at.append(self._length)
            self._parts = [part]
            self._length += len(part)

    def add(self, events: list[TokenEvent]) -> None:
        tokens = self.tokens
        if not self.labelled and not self.boundaries and self.diverge_token is None:
            for ev in events:  # one style for all: the frame's bytes decoded and added at once
                tokens.append(ev)
            self._emit_text(self._decode(b"".join([ev.data for ev in events])), None)
        else:
            for ev in events:
                tokens.append(ev)
                self._append(ev.index, ev.data, ev.label, ev.rejected)
        self._relayout()

    def add_tail(self, data: bytes) -> None:
        if data:
            self.tail += data
            self._emit_text(self._decode(data), self.marks["target"] if self.labelled else None)
            self._relayout()

    def _decode(self, data: bytes) -> str:
        if self._pending_bytes:
            data = self._pending_bytes + data
        try:
            s = data.decode("utf-8")
            self._pending_bytes = b""
            return s
        except UnicodeDecodeError as exc:
            if exc.start >= len(data) - 3 and exc.reason == "unexpected end of data":
                self._pending_bytes = data[exc.start :]
                return data[: exc.start].decode("utf-8", errors="replace")
            self._pending_bytes = b""
            return data.decode("utf-8", errors="replace")

    @property
    def labelled(self) -> bool:
        """Whether the labels are drawn (a marked view, its marks not switched off)."""
        return self.marked and self.mark_mode != "off"

    def _append(self, index: int, data: bytes, label: str, rejected: int) -> None:
        marked = self.labelled
        if marked and rejected and self.mark_mode == "full":
            self._emit_text(f"✗{rejected}", f"bold {self.marks['rejected']}")
            guessed = self.rejected_text.get(index) if self.show_rejected else None
            if guessed:  # what the draft proposed there, struck through: the target wrote what follows
                # one line, between brackets: a guess with newlines would break the output's own lines
                self._emit_text("⟨", "dim")
                self._emit_text(guessed.replace("\n", "⏎"), f"strike {self.marks['rejected']}")
                self._emit_text("⟩", "dim")
        if self.boundaries and index:
            self._emit_text("│", "dim")
        style = None
        if marked:
            style = self.marks.get(label, None) if label != "unknown" else "dim"
            if label == "accepted":
                style = f"{style} underline"
        text = self._decode(data)
        if self.diverge_token is not None and index == self.diverge_token:
            style = f"bold reverse {self.marks['diverge']}"
        elif marked and rejected and self.mark_mode == "colour":
            text = self._mark_rejection(text, style)
        self._emit_text(text, style)

    def _mark_rejection(self, text: str, style: str | None) -> str:
        """Colour only: the token's first character after its newlines (the draft went wrong there) drawn
        reversed in the rejected colour, nothing written into the text; the rest of the token to draw."""
        at = len(text) - len(text.lstrip("\n"))
        if at == len(text):  # only newlines: no cell to colour
            return text
        self._emit_text(text[:at], style)
        self._emit_text(text[at], f"reverse {self.marks['rejected']}")
        return text[at + 1 :]

    def rebuild(self) -> None:
        self._clear()
        tokens = self.tokens
        if isinstance(tokens, TokenLog):  # read packed, no event made per token
            columns = zip(
                tokens.column("index"), tokens.datas(), tokens.column("label"), tokens.column("rejected"), strict=True
            )
        else:
            columns = ((t.index, t.data, t.label, t.rejected) for t in tokens)
        for index, data, label, rejected in columns:
            self._append(index, data, label, rejected)
        if self.tail:
            self._emit_text(self._decode(self.tail), None)
        self._relayout()

    def mark_divergence(self, token: int | None) -> None:
        self.diverge_token = token
        if token is None:
            self._emit_text(" ◀ ends here", f"bold {self.marks['diverge']}")
            self._relayout()
        else:
            self.rebuild()

    def plain(self) -> str:
        return "\n".join([*self._lines, "".join(self._parts)])

    # -- layout: counting display rows -------------------------------------------------------------
    def on_resize(self, event) -> None:
        self._relayout()

    def _layout_of(self, text: str, at: int, width: int) -> list[int] | list[Text]:
        """A line's wrap (the line starts at offset `at`) as Rich's Text.wrap makes it: the offsets it
        breaks at, or (a line with tabs, which Rich expands) its rows."""
        if "\t" in text:
            return list(self._line_text(text, at).wrap(self.app.console, width))
        if len(text) <= width and (text.isascii() or cell_len(text) <= width):
            return []  # one row (most lines of code and prose)
        return divide_line(text, width, fold=True)

    @staticmethod
    def _rows_in(layout) -> int:
        return len(layout) if layout and isinstance(layout[0], Text) else len(layout) + 1

    def _relayout(self) -> None:
        if not self.is_attached:
            return
        width = max(1, self.scrollable_content_region.width or self.size.width or 80)
        # following the tail unless the reader scrolled up (compare with where we last put it: a
        # shrinking pane raises max_scroll_y without the reader moving)
        at_end = self.scroll_y >= min(self.max_scroll_y, self._last_end) - 1
        row_at = self._row_at
        pad_style = self.rich_style
        if pad_style != self._pad_style:  # a new theme: every row is drawn again
            self._pad_style = pad_style
            self._strips.clear()
        if width != self._width:  # everything rewraps
            self._width, self._counted = width, 0
            self._open_breaks, self._open_rows, self._open_text = [], None, ""
            del row_at[1:]
            self._strips.clear()
            self._layouts.clear()
        # rows from the first line that changed on are drawn again
        changed_from = row_at[self._counted]
        for row in [r for r in self._strips if r >= changed_from]:
            del self._strips[row]
        # lines completed since: the one that was open is counted on from where its wrap had got to
        for i in range(self._counted, len(self._lines)):
            text = self._lines[i]
            if i == self._counted and self._open_text and text.startswith(self._open_text):
                rows = self._rows_in(self._wrap_open(text, width))
            else:
                rows = self._rows_in(self._layout_of(text, self._line_at[i], width))
            self._open_breaks, self._open_rows, self._open_text = [], None, ""
            row_at.append(row_at[-1] + rows)
        self._counted = len(self._lines)
        del row_at[self._counted + 1 :]
        open_text = "".join(self._parts)
        self._parts = [open_text] if open_text else []
        if not open_text.startswith(self._open_text):  # a rebuild changed it: wrap from the start
            self._open_breaks, self._open_rows = [], None
        self._count = row_at[-1] + self._rows_in(self._wrap_open(open_text, width))
        self._set_virtual_height(self._count)
        if at_end:
            self.set_scroll(None, self.max_scroll_y)
            self._last_end = self.max_scroll_y
        self.refresh()

    def _wrap_open(self, text: str, width: int) -> list[int] | list[Text]:
        """The open line's wrap, from its last row on: rows before it cannot change as text is added
        (Rich wraps greedily, a row breaking at a word's start or inside a word too long for a row)."""
        if "\t" in text or self._open_rows is not None:
            self._open_rows = list(self._line_text(text, self._line_at[-1]).wrap(self.app.console, width))
            self._open_text = text
            return self._open_rows
        breaks = self._open_breaks
        while breaks and (breaks[-1] >= len(text) or text[breaks[-1]].isspace()):
            breaks.pop()  # restart at a row that begins with a word, never inside whitespace
        start = breaks[-1] if breaks else 0
        if len(text) - start > width or not text.isascii():
            breaks.extend(start + b for b in divide_line(text[start:], width, fold=True))
        self._open_text = text
        return breaks

    def _set_virtual_height(self, height: int) -> None:
        size = Size(self._width, height)
        if size == self.virtual_size:
            return
        try:
            # the virtual size is a layout reactive: setting it lays the whole screen out again, which
            # took half the time of a frame at 2 × 12,000 tokens/s (profiled). Only
            # the scrollbars need the new size (as Widget._size_updated gives it them without a layout);
            # a scrollbar appearing or going still lays out, through its own reactive.
            self.set_reactive(ScrollView.virtual_size, size)
            self._scroll_update(size)
        except AttributeError:  # a Textual without these: the plain way
            self.virtual_size = size

    # -- rendering: only the rows on screen -----------------------------------------------------------
    def _line_text(self, text: str, at: int) -> Text:
        """`text` (which starts at offset `at` of the whole text) with its marks as spans."""
        spans: list[Span] = []
        marks, ids, styles = self._mark_at, self._mark_style, self._styles
        end, start = at + len(text), at
        k = bisect_right(marks, at) - 1
        while start < end:
            stop = min(marks[k + 1] if k + 1 < len(marks) else end, end)
            style = styles[ids[k]] if k >= 0 else None
            if style is not None and stop > start:
                spans.append(Span(start - at, stop - at, style))
            start, k = stop, k + 1
        return Text(text, spans=spans)

    def _segments(self, text: str, at: int) -> list[Segment]:
        """`text` (at offset `at` of the whole text) as segments in the styles of its marks."""
        out: list[Segment] = []
        marks, ids, styles = self._mark_at, self._mark_style, self._rich_styles
        end, start = at + len(text), at
        k = bisect_right(marks, at) - 1
        while start < end:
            stop = min(marks[k + 1] if k + 1 < len(marks) else end, end)
            sid = ids[k] if k >= 0 else 0
            style = styles.get(sid) if sid else None
            if sid and style is None:
                style = styles[sid] = self.app.console.get_style(self._styles[sid] or "")
            out.append(Segment(text[start - at : stop - at], style))
            start, k = stop, k + 1
        return out

    def _row_strip(self, y: int) -> Strip:
        """Display row y, padded to the width in the view's own style: one strip, as Text.wrap and
        Strip.crop_extend would make it, without either."""
        width = self._width
        n = self._counted
        i = bisect_right(self._row_at, y, 0, n + 1) - 1
        r = y - self._row_at[i]
        text = self._lines[i] if i < n else self._open_text
        if i < n:
            layout = self._layouts.get(i)
            if layout is None:
                if len(self._layouts) > 256:
                    self._layouts.clear()
                layout = self._layouts[i] = self._layout_of(text, self._line_at[i], width)
        else:
            layout = self._open_rows if self._open_rows is not None else self._open_breaks
        if layout and isinstance(layout[0], Text):  # a line with tabs: Rich's own rows
            row = cast(Text, layout[r])
            segments, cells = list(row.render(self.app.console)), row.cell_len
        else:
            breaks = cast("list[int]", layout)
            a = breaks[r - 1] if r else 0
            b = breaks[r] if r < len(breaks) else len(text)
            part = text[a:b]
            if len(part) > width:  # Text.wrap's rstrip_end: whitespace beyond the width goes
                space = _TRAILING_SPACE.search(part)
                if space is not None:
                    part = part[: len(part) - min(len(space.group()), len(part) - width)]
            segments = self._segments(part, self._line_at[i] + a) if part else []
            cells = len(part) if part.isascii() else cell_len(part)
        if cells < width:
            segments.append(Segment(" " * (width - cells), self._pad_style))
            return Strip(segments, width)
        strip = Strip(segments, cells)
        return strip if cells == width else strip.crop(0, width)

    def render_line(self, y: int) -> Strip:
        row = self.scroll_offset.y + y
        width = self.scrollable_content_region.width
        if row < 0 or row >= self._count or width != self._width:
            return Strip.blank(width, self._pad_style)
        strip = self._strips.get(row)
        if strip is None:
            if len(self._strips) > 4 * max(self.size.height, 16):
                self._strips.clear()
            strip = self._strips[row] = self._row_strip(row)
        return strip
