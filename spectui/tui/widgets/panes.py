"""Widgets of the two-pane view; they render engine dataclasses and never talk HTTP or NVML."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widgets import Label, Sparkline, Static

from spectui.core.compare import Divergence
from spectui.core.errors import redact
from spectui.core.figures import SideRecorder
from spectui.core.headline import Headline
from spectui.core.types import ServerInfo
from spectui.machine.probes import GPUSample, HostSample, ProcessSample
from spectui.tui.widgets.token_view import DEFAULT_MARKS, TokenView

__all__ = ["DEFAULT_MARKS", "Banner", "LivePanel", "ServerLogs", "SidePane", "TokenView", "fmt_bytes"]


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
    SidePane.-compact .header { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    SidePane.-compact .state { display: none; }
    SidePane.-compact .figures { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """
    MIN_TEXT_ROWS = 6  # the output keeps at least these rows; below, the header and figures fold to a line each

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
        self._full_figures = ""  # the figures as the full layout shows them: what figures_text() returns
        self._header = (redact(url), redact(url))  # (full, one line)
        self._state_text = Text("")
        self._pad: int | None = None  # the figures' rows, the other pane's height kept (_align)

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
        model, build, spec = info.model or "?", info.build or "?", info.describe_speedup()
        self._header = (f"{model} · build {build}\n{spec}{note}", f"{spec} · {model} · build {build}{note}")
        self._fit()
        self._align()
        self.query_one(".header", Static).update(self._header[self.compact])

    @property
    def compact(self) -> bool:
        return self.has_class("-compact")

    def on_resize(self) -> None:
        self._fit()
        self._align()

    def _top_rows(self, width: int) -> int:
        """Rows of the header and the figures, as drawn in full (the state row is one in both panes)."""
        return _rows(self._header[0], width) + max(1, _rows(self._full_figures, width))

    def _align(self) -> None:
        """Side by side, both panes' outputs start on the same row: the pane whose header and figures are
        shorter (the baseline has no acceptance, labels or speed-up lines) keeps blank rows under its
        figures. Set only when the rows change, never each frame; stacked or folded, nothing is added."""
        parent = self.parent
        if parent is None or not self.size.width:
            return
        panes = list(parent.query_children(SidePane))
        side_by_side = parent.styles.layout is not None and parent.styles.layout.name == "horizontal"
        width = max(1, self.size.width - 4)
        top = max(p._top_rows(width) for p in panes)
        for p in panes:
            fig = p.query_one(".figures", Static)
            pad = None
            if side_by_side and not p.compact and len(panes) > 1:
                pad = top - _rows(p._header[0], width)
            if pad != p._pad:  # a style set lays the screen out: only when it changes
                p._pad = pad
                fig.styles.min_height = pad

    def too_tall(self) -> bool:
        """Whether the full header, state and figures would leave the output fewer than MIN_TEXT_ROWS."""
        height, width = self.size.height, max(1, self.size.width - 4)  # the border and the padding
        full = _rows(self._header[0], width) + 1 + _rows(self._full_figures, width)
        return bool(height) and height - 2 - full < self.MIN_TEXT_ROWS

    def _fit(self) -> None:
        """Fold the header, state and figures to one line each where the full ones would leave the output
        fewer than MIN_TEXT_ROWS rows. The pane's height comes from the screen, never from its content,
        so the choice cannot swing back and forth."""
        if not self.size.height:
            return
        # both panes fold together, so their outputs start on the same row
        panes = list(self.parent.query_children(SidePane)) if self.parent is not None else [self]
        compact = any(p.too_tall() for p in panes)
        if compact == self.compact:
            return
        for other in panes:
            if other is not self:
                other.call_later(other._fit)
        self.set_class(compact, "-compact")
        self.border_subtitle = self._state_text.markup if compact else ""
        self.query_one(".header", Static).update(self._header[compact])
        self._figures_plain = ""  # drawn again in the other form by the next show_figures
        if hasattr(self, "_last_figures"):
            self.show_figures(*self._last_figures)
        self._align()

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
        self._state_text = text
        self.query_one(".state", Static).update(text, layout=False)  # one row, whatever it says
        if self.compact:
            self.border_subtitle = text.markup
        self.set_class(state == "failed", "-failed")

    def figures_text(self) -> str:
        """The figures of the pane, as plain text (in full, also while they are folded to one line)."""
        return self._full_figures

    def show_figures(self, rec: SideRecorder, speedup_line: str | None = None) -> None:
        f = rec.figures
        cut = rec.failed is not None  # a failed side measured no rate and no acceptance: none is shown
        live = rec.rate_so_far() if not rec.done and not f.decode_tps else None  # the final one replaces it
        t = Text()
        t.append("TTFT ", style="dim")
        t.append(f"{f.ttft_ms:.0f} ms" if f.ttft_ms is not None else "—")
        t.append(f"  {f.rate_unit} ", style="dim")
        t.append(f"{f.decode_tps:.1f}" if f.decode_tps and not cut else (f"{live:.1f}" if live else "—"))
        if live:
            t.append(" so far", style="dim")
        elif cut:
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
            else:  # while it streams, none yet is not none at all (vLLM and SGLang count at the end)
                t.append("no drafts" if rec.done else "—")
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
        self._last_figures = (rec, speedup_line)
        if t.plain != self._full_figures:
            width = max(1, self.size.width - 4)
            refit = _rows(t.plain, width) != _rows(self._full_figures, width)
            self._full_figures = t.plain
            if refit:  # the live figures change each frame, their rows seldom: no fit of both panes a frame
                self._fit()
                self._align()
        if self.compact:
            t = one_line_figures(rec, self.side == "candidate")
        fig = self.query_one(".figures", Static)
        if t.plain == self._figures_plain and t.spans == self._figures_spans:
            return  # nothing new: no relayout of the pane each frame
        width = max(1, fig.content_size.width)
        grew = _rows(t.plain, width) != _rows(self._figures_plain, width)
        self._figures_plain, self._figures_spans = t.plain, list(t.spans)
        fig.update(t, layout=grew)  # the same rows: no layout of the screen each frame
        if grew:
            # the header gained or lost lines: lay the whole pane out again, or the figures keep the
            # height measured for the old text when the update lands mid-layout (seen under load)
            fig.clear_cached_dimensions()
            self.refresh(layout=True)


def one_line_figures(rec: SideRecorder, candidate: bool) -> Text:
    """A pane's figures on one line, the rate and the acceptance first (a pane folded on a small screen)."""
    f = rec.figures
    cut = rec.failed is not None
    live = rec.rate_so_far() if not rec.done and not f.decode_tps else None
    t = Text()
    t.append(f"{f.decode_tps:.1f}" if f.decode_tps and not cut else (f"{live:.1f}" if live else "—"))
    t.append(f" {f.rate_unit}" + (" so far" if live else ""), style="dim")
    if candidate:
        t.append(" · acc ", style="dim")
        none = "no drafts" if rec.done else "—"  # none yet while it streams
        t.append("—" if cut else (f"{f.acceptance_rate:.0%} ({f.accepted}/{f.drafted})" if f.drafted else none))
    t.append(" · TTFT ", style="dim")
    t.append(f"{f.ttft_ms:.0f} ms" if f.ttft_ms is not None else "—")
    t.append(" · ", style="dim")
    t.append(str(f.tokens))
    t.append(" tok", style="dim")
    if f.prompt_cached is not None:
        t.append(" · cached ", style="dim")
        t.append(str(f.prompt_cached))
    return t


class Banner(Static):
    """Identical / diverged / running status of the comparison."""

    DEFAULT_CSS = """
    Banner { height: auto; padding: 0 1; background: $panel; }
    Banner.-identical { border-left: outer $success; }
    Banner.-diverged { border-left: outer $error; }
    """
    # each half of the headline in the colour of its own answer (yes, no, not known)
    SAME_STYLES = {True: "bold green", False: "bold red", None: "bold"}
    FASTER_STYLES = {True: "bold green", False: "bold yellow", None: "bold"}
    _headline: Text | None = None
    _verdict: Text | None = None

    def show_running(self, text: str = "comparing bytes as they arrive…") -> None:
        self.set_classes("")
        self._headline = None
        self._verdict = None
        self._show(Text(text))

    def show_headline(self, h: Headline) -> None:
        """Both halves of the answer (core.headline), on the banner's first line; what it said stays under it."""
        t = Text()
        t.append(h.same_text, style=self.SAME_STYLES[h.same])
        t.append(" · ", style="dim")
        t.append(h.faster_text, style=self.FASTER_STYLES[h.faster])
        self._headline = t
        self._show(getattr(self, "_shown", None) or Text(""))

    def headline_text(self) -> str:
        return self._headline.plain if self._headline is not None else ""

    def show_identical(self, n_bytes: int, cached: tuple, compared: str = "text") -> None:
        """The run's verdict was IDENTICAL (core.verdict): never decided here."""
        self.set_classes("-identical")
        note = f" · prompt tokens reused from cache: {cached[0]} / {cached[1]}" if any(c for c in cached if c) else ""
        what = "bytes and token ids" if compared == "text+ids" else "byte for byte"
        self._verdict = Text(f"✓ IDENTICAL — {n_bytes} bytes, {what}{note}", style="bold")
        self._show(self._verdict)

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
        self._verdict = t
        self._show(t)

    def show_cause(self, line: str) -> None:
        """Triage's finding or the draft probe's summary, under the verdict it explains (never over it)."""
        t = self._verdict.copy() if self._verdict is not None else Text("")
        t.append(("\n" if t.plain else "") + line, style="bold")
        self._show(t)

    def add_line(self, line: str) -> None:
        """A line under what the banner says (the whole set's figure after a run over several prompts)."""
        t = getattr(self, "_shown", None) or Text("")
        t = t.copy()
        t.append("\n" + line)
        self._show(t)

    def _show(self, t: Text) -> None:
        self._shown = t
        head = self._headline
        self.update(Text("\n").join([head, t]) if head is not None and t.plain else (head or t))


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
    LivePanel #live-line { display: none; height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    LivePanel.-folded { height: 1; border: none; padding: 0 1; background: $panel; }
    LivePanel.-folded > * { display: none; }
    LivePanel.-folded > #live-line { display: block; }
    """
    FOLD_BELOW_ROWS = 30  # on a terminal with fewer rows the panel starts folded to one line

    def __init__(self, **kw) -> None:
        super().__init__(id="live", **kw)
        self.border_title = "live"
        self.history: dict[str, list[float]] = {"host": [], "gpu": []}
        self._live_plain = ""
        self.chosen: bool | None = None  # folded by the user's key (None: by the terminal's height)
        self.toggle_key = "alt+m"

    @property
    def folded(self) -> bool:
        return self.has_class("-folded")

    def fold_for(self, rows: int) -> None:
        """Fold on a short terminal unless the user chose otherwise with the key."""
        self.set_class(self.chosen if self.chosen is not None else rows < self.FOLD_BELOW_ROWS, "-folded")

    def toggle(self) -> None:
        self.chosen = not self.folded
        self.set_class(self.chosen, "-folded")

    def compose(self) -> ComposeResult:
        yield Static(f"live · sampling… · {self.toggle_key} unfolds", id="live-line")
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
                    gpu = f" GPU {fmt_bytes(p.gpu_memory)}" if p.gpu_memory is not None else ""
                    t.append(f" · PID {p.pid}{' (by port)' if p.by_port else ''} RSS {fmt_bytes(p.rss)} CPU {cpu}{gpu}")
                else:
                    t.append(" · process gone", style="red")
            else:
                t.append(" · not a local process", style="dim")
        self.query_one("#live-line", Static).update(self.one_line(gpus, host, procs, kv))
        live = self.query_one("#live-text", Static)
        width = max(1, live.content_size.width)
        same_rows = _rows(t.plain, width) == _rows(self._live_plain, width)
        self._live_plain = t.plain
        live.update(t, layout=not same_rows)  # each second: a layout of the screen only if its height changes
        if host:
            self._push("host", host.memory_used / max(host.memory_total, 1) * 100, "#spark-host")
        row = self.query_one("#gpu-spark-row")
        if row.display != bool(gpus):  # setting it lays the screen out, even to the same value
            row.display = bool(gpus)
        if gpus and gpus[0].memory_total:
            self._push("gpu", (gpus[0].memory_used or 0) / gpus[0].memory_total * 100, "#spark-gpu")

    def one_line(
        self,
        gpus: list[GPUSample],
        host: HostSample | None,
        procs: dict[str, ProcessSample],
        kv: dict[str, tuple[int, int] | None],
    ) -> Text:
        """The panel folded: GPU and host memory, then each side's KV use and RSS, and the key that unfolds."""
        t = Text("live ", style="bold")
        for g in gpus[:1]:
            t.append(f"· GPU {fmt_bytes(g.memory_used)}/{fmt_bytes(g.memory_total)} ")
        if host:
            t.append(f"· RAM {fmt_bytes(host.memory_used)}/{fmt_bytes(host.memory_total)} CPU {host.cpu_percent:.0f}% ")
        for side in ("baseline", "candidate"):
            k, p = kv.get(side), procs.get(side)
            kv_use = f"KV {k[0] / k[1]:.0%}" if k and k[1] else "KV N/A"
            rss = f" {fmt_bytes(p.rss)}" if p is not None and p.alive else ""
            t.append(f"· {side[0]}: {kv_use}{rss} ")
        t.append(f"· {self.toggle_key} unfolds", style="dim")
        return t

    def _push(self, key: str, value: float, sel: str) -> None:
        h = self.history[key]
        h.append(value)
        del h[:-60]
        self.query_one(sel, Sparkline).data = list(h)


class ServerLogs(Static):
    """The last lines of each launched server's log; shown with alt+l, and by itself on an early exit."""

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
