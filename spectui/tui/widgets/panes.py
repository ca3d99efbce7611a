"""Widgets of the two-pane view; they render engine dataclasses and never talk HTTP or NVML."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Label, Sparkline, Static

from spectui.core.compare import Divergence
from spectui.core.errors import redact
from spectui.core.events import TokenEvent
from spectui.core.figures import SideRecorder
from spectui.core.types import ServerInfo
from spectui.machine.probes import GPUSample, HostSample, ProcessSample

DEFAULT_MARKS = {
    "accepted": "#5fd787",
    "target": "#87afff",
    "first": "#d0d0d0",
    "rejected": "#ff5f87",
    "diverge": "#ff3030",
}


class TokenView(ScrollView, can_focus=True):
    """The output of one side, with each candidate token marked by its label.

    Line-based: text is kept as logical lines and only the lines that change are re-wrapped, so a
    100,000-token output costs no more per frame than a short one; it follows the tail while the
    view is scrolled to the end.
    """

    DEFAULT_CSS = "TokenView { width: 1fr; height: 1fr; padding: 0 1; }"

    def __init__(self, marked: bool, **kw) -> None:
        super().__init__(**kw)
        self.marked = marked
        self.marks = dict(DEFAULT_MARKS)
        self.tokens: list[TokenEvent] = []
        self.tail = b""
        self.boundaries = False
        self.diverge_token: int | None = None
        self.rejected_text: dict[int, str] = {}  # token index → the draft it replaced (the draft probe)
        self.show_rejected = False
        self._pending_bytes = b""  # bytes not yet decodable (a split UTF-8 sequence)
        self._lines: list[Text] = [Text()]
        self._wrapped: list[list[Strip]] = [[]]  # display lines of each logical line
        self._dirty_from = 0  # logical lines from here on need wrapping
        self._width = 0
        self._count = 0
        self._stable = (0, 0)  # (logical lines counted, their display lines)
        self._last_end = 0

    # -- content -----------------------------------------------------------------------------
    def reset(self) -> None:
        self.tokens.clear()
        self.tail = b""
        self.diverge_token = None
        self.rejected_text = {}
        self._clear()

    def _clear(self) -> None:
        self._pending_bytes = b""
        self._lines = [Text()]
        self._wrapped = [[]]
        self._dirty_from = 0
        self._relayout()

    def _emit_text(self, text: str, style) -> None:
        parts = text.split("\n")
        self._dirty_from = min(self._dirty_from, len(self._lines) - 1)
        self._lines[-1].append(parts[0], style=style)
        for part in parts[1:]:
            self._lines.append(Text(part, style=style or ""))
            self._wrapped.append([])

    def add(self, events: list[TokenEvent]) -> None:
        for ev in events:
            self.tokens.append(ev)
            self._append(ev)
        self._relayout()

    def add_tail(self, data: bytes) -> None:
        if data:
            self.tail += data
            self._emit_text(self._decode(data), self.marks["target"] if self.marked else None)
            self._relayout()

    def _decode(self, data: bytes) -> str:
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

    def _append(self, ev: TokenEvent) -> None:
        if self.marked and ev.rejected:
            self._emit_text(f"✗{ev.rejected}", f"bold {self.marks['rejected']}")
            guessed = self.rejected_text.get(ev.index) if self.show_rejected else None
            if guessed:  # what the draft proposed there, struck through: the target wrote what follows
                # one line, between brackets: a guess with newlines would break the output's own lines
                self._emit_text("⟨", "dim")
                self._emit_text(guessed.replace("\n", "⏎"), f"strike {self.marks['rejected']}")
                self._emit_text("⟩", "dim")
        if self.boundaries and ev.index:
            self._emit_text("│", "dim")
        style = None
        if self.marked:
            style = self.marks.get(ev.label, None) if ev.label != "unknown" else "dim"
            if ev.label == "accepted":
                style = f"{style} underline"
        if self.diverge_token is not None and ev.index == self.diverge_token:
            style = f"bold reverse {self.marks['diverge']}"
        self._emit_text(self._decode(ev.data), style)

    def rebuild(self) -> None:
        self._pending_bytes = b""
        self._lines = [Text()]
        self._wrapped = [[]]
        self._dirty_from = 0
        for ev in self.tokens:
            self._append(ev)
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
        return "\n".join(line.plain for line in self._lines)

    # -- layout and rendering ----------------------------------------------------------------------
    def on_resize(self, event) -> None:
        self._relayout()

    def _relayout(self) -> None:
        width = max(1, self.scrollable_content_region.width or self.size.width or 80)
        if width != self._width:
            self._width = width
            self._dirty_from = 0
        # following the tail unless the reader scrolled up (compare with where we last put it: a
        # shrinking pane raises max_scroll_y without the reader moving)
        at_end = self.scroll_y >= min(self.max_scroll_y, self._last_end) - 1
        console = self.app.console if self.is_attached else None
        if console is None:
            return
        if self._dirty_from == 0:
            self._stable = (0, 0)
        for i in range(self._dirty_from, len(self._lines)):
            lines = self._lines[i].wrap(console, width) if self._lines[i].plain else [Text()]
            self._wrapped[i] = [Strip(list(line.render(console)), line.cell_len) for line in lines]
        self._dirty_from = len(self._lines) - 1
        self._count = self._count_lines()
        self.virtual_size = Size(width, self._count)
        if at_end:
            self.set_scroll(None, self.max_scroll_y)
            self._last_end = self.max_scroll_y
        self.refresh()

    def _count_lines(self) -> int:
        # cumulative counts of the stable lines are cached; only the last logical line changes
        upto, total = self._stable
        last = len(self._wrapped) - 1
        while upto < last:
            total += len(self._wrapped[upto])
            upto += 1
        self._stable = (upto, total)
        return total + len(self._wrapped[last])

    def _strip_at(self, y: int) -> Strip | None:
        # walk back from the end: the view is usually near the tail
        if y < 0 or y >= self._count:
            return None
        acc = self._count
        for i in range(len(self._wrapped) - 1, -1, -1):
            n = len(self._wrapped[i])
            acc -= n
            if y >= acc:
                return self._wrapped[i][y - acc]
        return None

    def render_line(self, y: int) -> Strip:
        strip = self._strip_at(self.scroll_offset.y + y)
        width = self.scrollable_content_region.width
        if strip is None:
            return Strip.blank(width, self.rich_style)
        return strip.crop_extend(0, width, self.rich_style)


def _rows(text: str, width: int) -> int:
    """Screen rows a text takes when wrapped at `width` (close enough to tell a change of height)."""
    return sum(max(1, -(-len(line) // width)) for line in text.split("\n")) if text else 0


class SidePane(Vertical):
    """One server: header, state, figures strip and the output."""

    DEFAULT_CSS = """
    SidePane { border: round $primary; height: 1fr; width: 1fr; }
    SidePane .header { height: auto; color: $text-muted; padding: 0 1; }
    SidePane .state { height: 1; padding: 0 1; }
    SidePane .figures { height: auto; padding: 0 1; background: $panel; }
    SidePane TokenView { height: 1fr; }
    SidePane.-failed { border: round $error; }
    SidePane.-diverged { border: round $warning; }
    """

    state: reactive[str] = reactive("connecting")

    def __init__(self, side: str, url: str, **kw) -> None:
        super().__init__(id=f"pane-{side}", **kw)
        self.side = side
        self.url = url
        self.info: ServerInfo | None = None
        self.cause = ""
        self.launch_note = ""
        self.border_title = f"{side} · {redact(url)}"  # a URL's user:password is never drawn
        self._figures_plain = ""
        self._figures_spans: list = []

    def compose(self) -> ComposeResult:
        yield Static(redact(self.url), classes="header", id=f"header-{self.side}")
        yield Static("", classes="state", id=f"state-{self.side}")
        yield Static("", classes="figures", id=f"figures-{self.side}")
        yield TokenView(marked=self.side == "candidate", id=f"tokens-{self.side}")

    @property
    def view(self) -> TokenView:
        return self.query_one(TokenView)

    def set_info(self, info: ServerInfo) -> None:
        self.info = info
        self.border_title = f"{self.side} · {redact(info.url)}"
        note = f" · {self.launch_note}" if self.launch_note else ""
        self.query_one(".header", Static).update(
            f"{info.model or '?'} · build {info.build or '?'}\n{info.describe_speedup()}{note}"
        )

    def set_state(self, state: str, cause: str = "") -> None:
        self.state = state
        self.cause = cause
        icons = {
            "connecting": "… connecting",
            "loading": "… loading model",
            "ready": "● ready",
            "streaming": "▶ streaming",
            "done": "✓ done",
            "failed": "✗ failed",
            "cancelled": "■ cancelled",
            "waiting": "… waiting for the other side",
        }
        text = Text(icons.get(state, state))
        if cause:
            text.append(f": {cause}", style="bold")
        self.query_one(".state", Static).update(text)
        self.set_class(state == "failed", "-failed")

    def figures_text(self) -> str:
        """The figures the pane shows now, as plain text."""
        return self._figures_plain

    def show_figures(self, rec: SideRecorder, speedup_line: str | None = None) -> None:
        f = rec.figures
        cut = rec.failed is not None  # a failed side measured no rate and no acceptance: none is shown
        t = Text()
        t.append("TTFT ", style="dim")
        t.append(f"{f.ttft_ms:.0f} ms" if f.ttft_ms is not None else "—")
        t.append(f"  {f.rate_unit} ", style="dim")
        t.append(f"{f.decode_tps:.1f}" if f.decode_tps and not cut else "—")
        if cut:
            t.append(" not measured (the side failed)", style="dim")
        elif f.decode_source == "server timings":
            t.append(" server-timed" + (f" · {f.observed_tps:.1f} seen" if f.observed_tps else ""), style="dim")
        elif f.decode_source == "observed":
            t.append(" seen", style="dim")
        t.append("  tokens ", style="dim")
        t.append(str(f.tokens))
        if f.prompt_cached is not None:
            t.append("  cached ", style="dim")
            t.append(str(f.prompt_cached))
        if self.side == "candidate":
            t.append("\naccept ", style="dim")
            if cut:
                t.append("—")
            elif f.drafted:
                t.append(f"{f.acceptance_rate:.0%} ({f.accepted}/{f.drafted})")
                t.append("  mean len ", style="dim")
                t.append(f"{f.mean_accepted_length:.2f}")
                t.append("  steps ", style="dim")
                t.append(str(f.steps))
            else:
                t.append("no drafts")
            if f.metrics_check:
                ok = f.metrics_check == "ok"
                t.append("  /metrics ", style="dim")
                t.append("✓" if ok else f.metrics_check, style="green" if ok else "yellow")
            if f.labels:
                exact = f.labels.startswith("exact") and "disagreed" not in f.labels and "inferred" not in f.labels
                t.append("\nlabels ", style="dim")
                t.append(f.labels, style="green" if exact else "yellow")
            if speedup_line:
                t.append("\n")
                t.append(speedup_line, style="bold")
        fig = self.query_one(".figures", Static)
        if t.plain == self._figures_plain and t.spans == self._figures_spans:
            return  # nothing new: no relayout of the pane each frame
        width = max(1, fig.content_size.width)
        grew = _rows(t.plain, width) != _rows(self._figures_plain, width)
        self._figures_plain, self._figures_spans = t.plain, list(t.spans)
        fig.update(t)
        if grew:
            # the header gained or lost lines: lay the whole pane out again, or the figures keep the
            # height measured for the old text when the update lands mid-layout (seen under load)
            fig.clear_cached_dimensions()
            self.refresh(layout=True)


class Banner(Static):
    """Identical / diverged / running status of the comparison."""

    DEFAULT_CSS = """
    Banner { height: auto; padding: 0 1; background: $panel; }
    Banner.-identical { background: $success 30%; }
    Banner.-diverged { background: $error 40%; }
    """

    def show_running(self, text: str = "comparing bytes as they arrive…") -> None:
        self.set_classes("")
        self.update(text)

    def show_identical(self, n_bytes: int, cached: tuple, compared: str = "text") -> None:
        """The run's verdict was IDENTICAL (core.verdict): never decided here."""
        self.set_classes("-identical")
        note = f" · prompt tokens reused from cache: {cached[0]} / {cached[1]}" if any(c for c in cached if c) else ""
        what = "bytes and token ids" if compared == "text+ids" else "byte for byte"
        self.update(Text(f"✓ IDENTICAL — {n_bytes} bytes, {what}{note}", style="bold"))

    def show_diverged(self, d: Divergence, cached: tuple, note: str = "") -> None:
        self.set_classes("-diverged")
        bt = "end" if d.baseline_token is None else d.baseline_token
        ct = "end" if d.candidate_token is None else d.candidate_token
        t = Text(f"≠ DIVERGED at byte {d.byte} (token {bt} baseline / {ct} candidate)", style="bold")
        if d.kind != "bytes" and d.detail:
            t.append(f": {d.detail}")
        if None not in cached and cached[0] != cached[1]:
            t.append(f" · prompt tokens reused from cache differ: {cached[0]} vs {cached[1]}")
        if note:
            t.append(f" · {note}")
        t.append("  — press ctrl+d for the diff view")
        self._diverged = t
        self.update(t)

    def show_cause(self, line: str) -> None:
        """Triage's finding, under the divergence it explains."""
        t = getattr(self, "_diverged", None) or Text("")
        t = t.copy()
        t.append("\n" + line, style="bold")
        self.update(t)


def fmt_bytes(n: int | None) -> str:
    if n is None:
        return "N/A"
    gib = 1024**3
    return f"{n / gib:.1f} GiB" if n >= gib else f"{n / 1024**2:.0f} MiB"


class LivePanel(Vertical):
    """GPU memory and utilisation, KV-cache use, host RAM and each local server's RSS and CPU."""

    DEFAULT_CSS = """
    LivePanel { height: auto; max-height: 12; border: round $secondary; padding: 0 1; }
    LivePanel Sparkline { height: 1; width: 40; }
    LivePanel .spark-row { height: 1; }
    LivePanel .spark-row Label { width: 24; color: $text-muted; }
    LivePanel Static { height: auto; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(id="live", **kw)
        self.border_title = "live"
        self.history: dict[str, list[float]] = {"host": [], "gpu": []}

    def compose(self) -> ComposeResult:
        yield Static("sampling…", id="live-text")
        with Horizontal(classes="spark-row"):
            yield Label("host RAM, last 60 s", id="spark-host-label")
            yield Sparkline([], id="spark-host")
        with Horizontal(classes="spark-row", id="gpu-spark-row"):
            yield Label("GPU0 memory, last 60 s")
            yield Sparkline([], id="spark-gpu")

    def show(
        self,
        gpus: list[GPUSample],
        host: HostSample | None,
        procs: dict[str, ProcessSample],
        kv: dict[str, tuple[int, int] | None],
        gpu_note: str | None,
    ) -> None:
        t = Text()
        if gpus:
            for g in gpus:
                util = f"{g.utilisation}%" if g.utilisation is not None else "N/A"
                t.append(f"GPU{g.index} {g.name}: {fmt_bytes(g.memory_used)}/{fmt_bytes(g.memory_total)} util {util}\n")
        else:
            t.append(f"GPU: none ({gpu_note or 'no NVIDIA GPU'})\n", style="dim")
        if host:
            t.append(
                f"host RAM {fmt_bytes(host.memory_used)}/{fmt_bytes(host.memory_total)} "
                f"CPU {host.cpu_percent:.0f}% of {host.cpu_count}"
            )
        for side in ("baseline", "candidate"):
            t.append(f"\n{side}: ")
            k = kv.get(side)
            t.append(f"KV {k[0]}/{k[1]} tok ({k[0] / k[1]:.0%})" if k and k[1] else "KV N/A")
            p = procs.get(side)
            if p is not None:
                if p.alive:
                    cpu = f"{p.cpu_percent:.0f}%" if p.cpu_percent is not None else "N/A"
                    t.append(f" · RSS {fmt_bytes(p.rss)} CPU {cpu}")
                else:
                    t.append(" · process gone", style="red")
            else:
                t.append(" · not a local process", style="dim")
        self.query_one("#live-text", Static).update(t)
        if host:
            self._push("host", host.memory_used / max(host.memory_total, 1) * 100, "#spark-host")
        self.query_one("#gpu-spark-row").display = bool(gpus)
        if gpus and gpus[0].memory_total:
            self._push("gpu", (gpus[0].memory_used or 0) / gpus[0].memory_total * 100, "#spark-gpu")

    def _push(self, key: str, value: float, sel: str) -> None:
        h = self.history[key]
        h.append(value)
        del h[:-60]
        self.query_one(sel, Sparkline).data = list(h)


class ServerLogs(Static):
    """The last lines of each launched server's log; shown with ctrl+w, and by itself on an early exit."""

    DEFAULT_CSS = "ServerLogs { height: auto; max-height: 16; border: round $warning; padding: 0 1; display: none; }"

    def on_mount(self) -> None:
        self.border_title = "server logs"

    def show(self, tails: dict[str, list[str]], exits: dict[str, int | None]) -> None:
        if not tails:
            self.update("no servers launched by spectui (servers you started yourself keep their own logs)")
            return
        t = Text()
        for side, lines in tails.items():
            code = exits.get(side)
            t.append(f"{side}" + (f" — exited with status {code}" if code is not None else "") + "\n", style="bold")
            for line in lines:
                t.append(f"  {line[:200]}\n", style="dim")
        self.update(t)
