"""The caching lab and the concurrency sweep as TUI screens, on the two connected servers; the sweep also
one server at a time (labs.sweep.levels.sweep_alone through the supervisor's open_alone), as `spectui sweep
--one-at-a-time` runs it."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static
from textual_plotext import PlotextPlot

from spectui.core.errors import describe
from spectui.core.report import cache_text
from spectui.core.runner import PromptResult, render_prompt
from spectui.core.types import GenerationParams
from spectui.labs.memory.kv import kv_text
from spectui.labs.prefix import FOLLOW_UPS, run_prefix, turn_triage, why_reuse_differs
from spectui.labs.sweep import levels as sweep_lab
from spectui.run import triage as run_triage
from spectui.tui.context import LabContext
from spectui.tui.screens.diff import DiffScreen
from spectui.tui.widgets.fit_table import FitTable
from spectui.tui.widgets.footer import KeysFooter


def _fmt(v, spec=".0f"):
    return "—" if v is None else format(v, spec)


class PrefixScreen(Screen):
    """Cold (cache off) vs warm (cache on) turns; save/restore/erase the candidate's conversation cache."""

    BINDINGS = [
        Binding("enter", "run", "Run 3 turns", id="prefix_run", priority=True),
        Binding("s", "slot('save')", "Save slot", id="prefix_save"),
        Binding("r", "slot('restore')", "Restore slot", id="prefix_restore"),
        Binding("e", "slot('erase')", "Erase slot", id="prefix_erase"),
        Binding("ctrl+d", "diff", "Diff", id="prefix_diff"),
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
        self.turns: list = []  # the turns shown (labs.prefix.Turn), one per table row

    @classmethod
    def open(cls, context: LabContext) -> PrefixScreen | str:
        """ctrl+f: on the two connected servers (where they are not both up: why not)."""
        return context.refusal or cls(context.backends, context.params)

    def compose(self) -> ComposeResult:
        yield Static(
            "prefix caching: the baseline recomputes every turn (cache_prompt off), the candidate reuses "
            "the conversation (cache on). Enter runs 3 turns; s/r/e save, restore, erase the candidate's "
            "slot 0 (needs --slot-save-path).",
            id="status",
        )
        yield FitTable(id="turns")
        yield Static("", id="kv")
        yield KeysFooter()  # its own keys and the app's few that work here (SpectuiApp.BINDINGS)

    def on_mount(self) -> None:
        t = self.query_one(DataTable)
        t.add_columns(
            "turn", "TTFT cold ms", "TTFT warm ms", "processed cold/warm", "reused warm", "TTFT speed-up", "output"
        )
        self._show_kv()

    def _show_kv(self) -> None:
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
        table = self.query_one(DataTable)
        table.clear()
        self.turns = []

        def add(turn) -> None:
            self.turns.append(turn)
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

        kind = self.backends["candidate"].info.backend if self.backends["candidate"].info else None
        note = (
            " A cache hit changed the output: Ctrl+D (or a click on its row) opens the diff and the cause."
            f"\nwhy: {why_reuse_differs(kind)}."
            if any(t.divergence for t in turns)
            else ""
        )
        self.query_one("#status", Static).update(
            f"done. before the run: baseline {cleared['baseline']}; candidate {cleared['candidate']}.{note}"
        )

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_diff(event.cursor_row)

    def action_diff(self, row: int | None = None) -> None:
        """The diff and the cause of the turn under the cursor (the first that differs where none is)."""
        turn = pick_differing(self.turns, self.query_one(DataTable).cursor_row if row is None else row)
        if turn is None:
            self.notify("no turn differs: nothing to diff (Enter runs the turns)")
            return
        kind = self.backends["candidate"].info.backend if self.backends["candidate"].info else None
        which = f"cache lab, turn {turn.n}: cold (baseline, cache off) against warm (candidate, cache on)"
        screen = DiffScreen(turn.baseline.output(), turn.candidate.output(), turn.verdict, which=which)
        screen.triage = turn_triage(turn, kind)
        self.app.push_screen(screen)

    @work(exclusive=True, group="slot", exit_on_error=False)
    async def action_slot(self, action: str) -> None:
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


def pick_differing(items: list, row: int, differs=lambda item: item.verdict.status == "differs"):
    """The item at `row` where it differs, else the first that differs (a table's DIFFERS rows), else None."""
    if 0 <= row < len(items) and differs(items[row]):
        return items[row]
    return next((x for x in items if differs(x)), None)


class SweepScreen(Screen):
    """Aggregate throughput and speed-up against concurrency, with the byte comparison at each level."""

    BINDINGS = [
        Binding("enter", "run", "Run 1,2,4", id="sweep_run", priority=True),
        Binding("ctrl+d", "diff", "Diff", id="sweep_diff"),
        Binding("escape", "app.pop_screen", "Back", id="sweep_back"),
    ]
    DEFAULT_CSS = (
        "SweepScreen DataTable { height: auto; max-height: 10; } SweepScreen PlotextPlot { height: 1fr; } "
        "SweepScreen #status, SweepScreen #sweep-alone { padding: 0 1; height: auto; } "
        "SweepScreen #sweep-alone { color: $text-muted; }"
    )
    LEVELS = [1, 2, 4]

    def __init__(
        self,
        backends: dict,
        prompts: list,
        params: GenerationParams,
        *,
        open_alone: Callable | None = None,
        alone_why: str = "",
    ) -> None:
        """`open_alone` (the supervisor's): one server at a time, each side started alone for all its levels
        and stopped after; `backends` is then not used (its servers are not up)."""
        super().__init__()
        self.backends, self.prompts, self.params = backends, prompts, params
        self.open_alone, self.alone_why = open_alone, alone_why
        self.levels: list = []  # the levels shown, once the sweep is done
        self.finished = False

    @classmethod
    def open(cls, context: LabContext) -> SweepScreen | str:
        """alt+s: one server at a time where the app runs so (each side started alone), else on the two
        connected servers (where they are not both up: why not, said in a notice)."""
        if context.open_alone is not None:
            return cls({}, context.prompts, context.params, open_alone=context.open_alone, alone_why=context.alone_why)
        return context.refusal or cls(context.backends, context.prompts, context.params)

    @staticmethod
    def few_slots(infos) -> str:
        slots = [i.slots if i is not None else None for i in infos]
        if all(s and s >= 4 for s in slots):
            return ""
        return " (the servers have fewer than 4 slots: requests will queue; start them with -np 4)"

    def compose(self) -> ComposeResult:
        warn = "" if self.open_alone else self.few_slots([b.info for b in self.backends.values()])
        cache = cache_text(self.params)
        yield Static(
            f"concurrency sweep at 1, 2, 4 over the prompt set · prompt cache {cache}; Enter to run{warn}", id="status"
        )
        yield Static(
            (
                f"one server at a time ({self.alone_why}): each side is started alone, runs every level, and is "
                "stopped after, never both up; each level's outputs are judged against the other side's; the "
                "batch-time prediction needs both servers up: not made"
            )
            if self.open_alone
            else "",
            id="sweep-alone",
        )
        yield FitTable(id="levels")
        yield PlotextPlot(id="sweep-plot")
        yield KeysFooter()  # its own keys and the app's few that work here (SpectuiApp.BINDINGS)

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
        self.query_one(DataTable).clear()
        self.levels, self.finished = [], False
        # the prompt cache as the main screen asks (off unless asked, as `spectui sweep`), said in the status
        cache = self.params.cache_prompt
        params = GenerationParams(min(self.params.max_tokens, 64), self.params.temperature, self.params.seed, cache)
        warn = ""
        try:
            if self.open_alone is not None:
                warn = await self._sweep_alone(params)
            else:
                base, cand = self.backends["baseline"], self.backends["candidate"]
                await sweep_lab.sweep(base, cand, self.prompts, self.LEVELS, params, self._add_level)
        except Exception as exc:
            self.query_one("#status", Static).update(Text(f"failed: {describe(exc)}", style="bold red"))
            self.finished = True
            return
        self.query_one("#status", Static).update(
            f"done (prompt cache {cache_text(params)}): where the speed-up line falls, batching has eaten the "
            f"payoff{warn}"
        )
        self.finished = True  # last: a test that waits for it reads the status above

    async def _sweep_alone(self, params: GenerationParams) -> str:
        """The levels one server at a time (each side started alone for all its levels); the slots warning."""

        def say(line: str) -> None:
            self.query_one("#sweep-alone", Static).update(f"one server at a time · {line}")

        done, infos = await sweep_lab.sweep_alone(self.open_alone, self.prompts, self.LEVELS, params, 1, say)
        for lv in done:
            self._add_level(lv)
        return self.few_slots([infos.get("baseline"), infos.get("candidate")])

    def _add_level(self, lv) -> None:
        """A finished level: its row in the table and its point on the plot."""
        self.levels.append(lv)
        acc = lv.candidate.acceptance_rate
        sp = (
            f"{lv.speedup:.2f}× at {acc:.0%}"
            if lv.speedup and acc is not None
            else (f"{lv.speedup:.2f}×" if lv.speedup else "—")
        )
        same = lv.outputs_text()  # from the level's carried verdicts
        self.query_one(DataTable).add_row(
            str(lv.concurrency),
            _fmt(lv.baseline.aggregate_tps, ".1f"),
            _fmt(lv.candidate.aggregate_tps, ".1f"),
            f"{_fmt(lv.baseline.per_request_tps, '.1f')} / {_fmt(lv.candidate.per_request_tps, '.1f')}",
            f"{_fmt(lv.baseline.ttft_ms)} / {_fmt(lv.candidate.ttft_ms)}",
            sp,
            same,
        )
        self._plot(self.levels)

    def action_diff(self) -> None:
        """The diff of the first request that differs at the level under the cursor, then triage's cause."""
        row = self.query_one(DataTable).cursor_row
        level = pick_differing(self.levels, row, lambda lv: lv.differing > 0)
        if level is None:
            self.notify("no level differs: nothing to diff (Enter runs the sweep)")
            return
        j = next(i for i, v in enumerate(level.verdicts) if v.status == "differs")
        req = level.divergence_at[j][1]
        rb, rc = level.baseline.recorders[req], level.candidate.recorders[req]
        prompt = self.prompts[req % len(self.prompts)]
        n = level.concurrency
        which = f"sweep at concurrency {n}: request {req + 1} of {n} ({prompt.id}), {n} requests at once on each side"
        screen = DiffScreen(rb.output(), rc.output(), level.verdicts[j], which=which)
        self.app.push_screen(screen)
        self.triage_request(screen, prompt, rb, rc, level.verdicts[j])

    @work(exclusive=True, group="sweep-triage", exit_on_error=False)
    async def triage_request(self, screen, prompt, rb, rc, verdict) -> None:
        """run.triage on the one request, as compare --triage does: its reruns say the cause."""
        if self.open_alone is not None or not self.backends:
            screen.show_triage(None, "triage needs both servers up: not run one at a time")
            return

        base, cand = self.backends["baseline"], self.backends["candidate"]
        params = GenerationParams(
            min(self.params.max_tokens, 64), self.params.temperature, self.params.seed, self.params.cache_prompt
        )
        screen.show_triage(None, "triage: rerunning this request on each side to find the cause…")
        try:
            rendered = {"baseline": await render_prompt(base, prompt), "candidate": await render_prompt(cand, prompt)}
            found = await run_triage.triage(
                base, cand, PromptResult(prompt, rb, rc, verdict, rendered=rendered), params
            )
        except Exception as exc:  # a server gone: the diff stays, with why there is no cause
            screen.show_triage(None, f"triage stopped: {describe(exc)}")
            return
        screen.show_triage(found, None if found is not None else "triage found no cause")

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
