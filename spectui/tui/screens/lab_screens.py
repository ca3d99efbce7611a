"""The caching lab and the concurrency sweep as TUI screens, on the two connected servers."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static
from textual_plotext import PlotextPlot

from spectui.core.types import GenerationParams


def _fmt(v, spec=".0f"):
    return "—" if v is None else format(v, spec)


class PrefixScreen(Screen):
    """Cold (cache off) vs warm (cache on) turns; save/restore/erase the candidate's conversation cache."""

    BINDINGS = [
        Binding("enter", "run", "Run 3 turns", id="prefix_run", priority=True),
        Binding("s", "slot('save')", "Save slot", id="prefix_save"),
        Binding("r", "slot('restore')", "Restore slot", id="prefix_restore"),
        Binding("e", "slot('erase')", "Erase slot", id="prefix_erase"),
        Binding("escape", "app.pop_screen", "Back", id="prefix_back"),
    ]
    DEFAULT_CSS = """
    PrefixScreen DataTable { height: auto; max-height: 12; }
    PrefixScreen #status, PrefixScreen #kv { padding: 0 1; height: auto; }
    PrefixScreen #kv { color: $text-muted; }
    """

    def __init__(self, backends: dict, params: GenerationParams) -> None:
        super().__init__()
        self.backends = backends
        self.params = params

    def compose(self) -> ComposeResult:
        yield Static(
            "prefix caching: the baseline recomputes every turn (cache_prompt off), the candidate reuses "
            "the conversation (cache on). Enter runs 3 turns; s/r/e save, restore, erase the candidate's "
            "slot 0 (needs --slot-save-path).",
            id="status",
        )
        yield DataTable(id="turns")
        yield Static("", id="kv")
        yield Footer()

    def on_mount(self) -> None:
        t = self.query_one(DataTable)
        t.add_columns(
            "turn", "TTFT cold ms", "TTFT warm ms", "processed cold/warm", "reused warm", "TTFT speed-up", "output"
        )
        self._show_kv()

    def _show_kv(self) -> None:
        from spectui.labs.kvcache import kv_text

        info = self.backends["candidate"].info
        path = getattr(info, "model_path", None) if info else None
        if path and Path(path).is_file():
            try:
                self.query_one("#kv", Static).update(kv_text(path, info.n_ctx or 4096))
                return
            except Exception as exc:
                self.query_one("#kv", Static).update(f"KV sizes unavailable: {exc}")
                return
        self.query_one("#kv", Static).update(
            "KV sizes: the model file is not on this machine (spectui kv --model PATH)"
        )

    def action_run(self) -> None:
        self.query_one("#status", Static).update("running 3 turns on both servers…")
        self.run_turns()

    @work(exclusive=True, group="prefix", exit_on_error=False)
    async def run_turns(self) -> None:
        from spectui.labs.prefix import FOLLOW_UPS, run_prefix

        table = self.query_one(DataTable)
        table.clear()

        def add(turn) -> None:
            b, c = turn.baseline.figures, turn.candidate.figures
            v = turn.verdict
            same = (
                "identical"
                if v.status == "identical"
                else (f"DIFFERS at byte {v.divergence.byte}" if v.divergence else f"not compared: {v.reason}")
            )
            table.add_row(
                str(turn.n),
                _fmt(b.ttft_ms),
                _fmt(c.ttft_ms),
                f"{_fmt(b.prompt_tokens, 'd')} / {_fmt(c.prompt_tokens, 'd')}",
                _fmt(c.prompt_cached, "d"),
                f"{turn.ttft_speedup:.2f}×" if turn.ttft_speedup else "—",
                same,
            )

        try:
            turns, cleared = await run_prefix(
                self.backends["baseline"],
                self.backends["candidate"],
                FOLLOW_UPS[:3],
                GenerationParams(min(self.params.max_tokens, 64), self.params.temperature, self.params.seed),
                add,
            )
        except Exception as exc:
            self.query_one("#status", Static).update(Text(f"failed: {exc}", style="bold red"))
            return
        note = " A cache hit changed the output (see the last column)." if any(t.divergence for t in turns) else ""
        self.query_one("#status", Static).update(
            f"done. before the run: baseline {cleared['baseline']}; candidate {cleared['candidate']}.{note}"
        )

    @work(exclusive=True, group="slot", exit_on_error=False)
    async def action_slot(self, action: str) -> None:
        import time

        from spectui.core.errors import describe

        b = self.backends["candidate"]
        if not b.capabilities.slots:
            self.query_one("#status", Static).update(
                Text(f"the candidate ({b.kind}) has no slot caches to {action}", style="bold red")
            )
            return
        t0 = time.perf_counter()
        try:
            body = await b.slot_action(action, 0, None if action == "erase" else "spectui-conversation.bin")
        except Exception as exc:
            self.query_one("#status", Static).update(Text(describe(exc), style="bold red"))
            return
        ms = (time.perf_counter() - t0) * 1000
        tokens = "?" if body.tokens is None else body.tokens
        self.query_one("#status", Static).update(
            f"{action}: {tokens} tokens"
            + (f", {body.file_bytes / 1e6:.1f} MB" if body.file_bytes else "")
            + f", {body.ms if body.ms is not None else ms:.1f} ms. Enter runs the next turns."
        )


class SweepScreen(Screen):
    """Aggregate throughput and speed-up against concurrency, with the byte comparison at each level."""

    BINDINGS = [
        Binding("enter", "run", "Run 1,2,4", id="sweep_run", priority=True),
        Binding("escape", "app.pop_screen", "Back", id="sweep_back"),
    ]
    DEFAULT_CSS = "SweepScreen DataTable { height: auto; max-height: 10; } SweepScreen PlotextPlot { height: 1fr; } SweepScreen #status { padding: 0 1; }"

    def __init__(self, backends: dict, prompts: list, params: GenerationParams) -> None:
        super().__init__()
        self.backends, self.prompts, self.params = backends, prompts, params

    def compose(self) -> ComposeResult:
        slots = [b.info.slots if b.info is not None else None for b in self.backends.values()]
        warn = (
            ""
            if all(s and s >= 4 for s in slots)
            else " (the servers have fewer than 4 slots: requests will queue; start them with -np 4)"
        )
        yield Static(f"concurrency sweep at 1, 2, 4 over the prompt set; Enter to run{warn}", id="status")
        yield DataTable(id="levels")
        yield PlotextPlot(id="sweep-plot")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(
            "concurrency",
            "baseline tok/s",
            "candidate tok/s",
            "per-request b/c",
            "TTFT ms b/c",
            "speed-up (acceptance)",
            "outputs",
        )

    def action_run(self) -> None:
        self.query_one("#status", Static).update("running…")
        self.run_sweep()

    @work(exclusive=True, group="sweep", exit_on_error=False)
    async def run_sweep(self) -> None:
        from spectui.labs.sweep import sweep

        table = self.query_one(DataTable)
        table.clear()
        levels = []

        def add(lv) -> None:
            levels.append(lv)
            acc = lv.candidate.acceptance_rate
            sp = (
                f"{lv.speedup:.2f}× at {acc:.0%}"
                if lv.speedup and acc is not None
                else (f"{lv.speedup:.2f}×" if lv.speedup else "—")
            )
            same = lv.outputs_text()  # from the level's carried verdicts
            table.add_row(
                str(lv.concurrency),
                _fmt(lv.baseline.aggregate_tps, ".1f"),
                _fmt(lv.candidate.aggregate_tps, ".1f"),
                f"{_fmt(lv.baseline.per_request_tps, '.1f')} / {_fmt(lv.candidate.per_request_tps, '.1f')}",
                f"{_fmt(lv.baseline.ttft_ms)} / {_fmt(lv.candidate.ttft_ms)}",
                sp,
                same,
            )
            self._plot(levels)

        try:
            await sweep(
                self.backends["baseline"],
                self.backends["candidate"],
                self.prompts,
                [1, 2, 4],
                GenerationParams(min(self.params.max_tokens, 64), self.params.temperature, self.params.seed),
                add,
            )
        except Exception as exc:
            self.query_one("#status", Static).update(Text(f"failed: {exc}", style="bold red"))
            return
        self.query_one("#status", Static).update("done: where the speed-up line falls, batching has eaten the payoff")

    def _plot(self, levels) -> None:
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        xs = [lv.concurrency for lv in levels]
        plt.plot(xs, [lv.baseline.aggregate_tps or 0 for lv in levels], label="baseline tok/s")
        plt.plot(xs, [lv.candidate.aggregate_tps or 0 for lv in levels], label="candidate tok/s")
        plt.xlabel("concurrent requests")
        plt.title("aggregate throughput against concurrency")
        plot.refresh()
