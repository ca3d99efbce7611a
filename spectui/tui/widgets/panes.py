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
        self.query_one(".state", Static).update(text, layout=False)  # one row, whatever it says
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
        fig.update(t, layout=grew)  # the same rows: no layout of the screen each frame
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
        self._show(Text(text))

    def show_identical(self, n_bytes: int, cached: tuple, compared: str = "text") -> None:
        """The run's verdict was IDENTICAL (core.verdict): never decided here."""
        self.set_classes("-identical")
        note = f" · prompt tokens reused from cache: {cached[0]} / {cached[1]}" if any(c for c in cached if c) else ""
        what = "bytes and token ids" if compared == "text+ids" else "byte for byte"
        self._show(Text(f"✓ IDENTICAL — {n_bytes} bytes, {what}{note}", style="bold"))

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
        self._show(t)

    def show_cause(self, line: str) -> None:
        """Triage's finding, under the divergence it explains."""
        t = getattr(self, "_diverged", None) or Text("")
        t = t.copy()
        t.append("\n" + line, style="bold")
        self._show(t)

    def add_line(self, line: str) -> None:
        """A line under what the banner says (the whole set's figure after a run over several prompts)."""
        t = getattr(self, "_shown", None) or Text("")
        t = t.copy()
        t.append("\n" + line)
        self._show(t)

    def _show(self, t: Text) -> None:
        self._shown = t
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
        self._live_plain = ""

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
