"""The arithmetic screen: speed-up against acceptance rate, the break-even point, a measured run beside it,
and (Enter, with live servers) the formula's terms measured and the formula checked against the run."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Input, Label, Static
from textual_plotext import PlotextPlot

from spectui.backends.launchspec import LaunchSpec
from spectui.core.errors import InputError, describe
from spectui.core.runner import grouped
from spectui.core.terms_table import outside_note, predicted_words
from spectui.labs.theory import formula as theory
from spectui.labs.theory.costs import check_prompt
from spectui.labs.theory.terms import TheoryCheck
from spectui.tui.context import LabContext
from spectui.tui.screens.formats_screen import FormatsPanel
from spectui.tui.widgets.footer import KeysFooter


class TheoryScreen(Screen):
    BINDINGS = [
        # Enter, as the lab screens run theirs: a printable key would go to the focused α/γ/c input
        Binding("enter", "measure", "Measure terms", id="theory_measure", priority=True),
        Binding("escape", "app.pop_screen", "Back", id="theory_back"),
    ]
    DEFAULT_CSS = """
    TheoryScreen #inputs { height: 3; }
    TheoryScreen #inputs Input { width: 14; }
    TheoryScreen #inputs Label { padding: 1 1 0 2; }
    TheoryScreen #body { height: 1fr; }
    TheoryScreen PlotextPlot { width: 2fr; }
    TheoryScreen #table { width: 1fr; padding: 0 1; }
    TheoryScreen #measured { height: auto; max-height: 16; padding: 0 1; background: $panel; }
    """

    @classmethod
    def open(cls, context: LabContext) -> TheoryScreen:
        """ctrl+y: the runs on screen as the measured point; Enter measures the terms where both servers are up."""
        launched = context.launched.get("candidate")
        draft = LaunchSpec.from_argv(launched.argv).draft_model if launched is not None else None
        screen = cls.for_results(context.results, context.live_backends(), draft)
        # each launched side's command line: the draft timed at the candidate's threads and offload
        screen.launched = {side: LaunchSpec.from_argv(p.argv) for side, p in context.launched.items()}
        return screen

    @classmethod
    def for_results(cls, results, backends: dict | None = None, draft_model=None) -> TheoryScreen:
        """The screen with the last run as its measured point (α per position and γ from the server's
        counters, labs.theory.formula.from_result), and the interval of its speed-up where the prompt ran several
        times. With live `backends`, Enter measures the terms on them (labs.theory.costs)."""
        measured = None
        runs = None
        if results:
            measured = theory.from_result(results[-1])
            group = grouped(results)[-1]
            runs = group.runs
            spread = group.speedup
            if measured and spread is not None and spread.measured:
                measured |= {
                    "speedup_median": spread.median,
                    "speedup_low": spread.low,
                    "speedup_high": spread.high,
                    "runs": spread.n,
                }
        if not measured:
            return cls(backends=backends, draft_model=draft_model)
        return cls(
            min(measured["alpha"], 0.999),
            max(1, round(measured["gamma"])),
            round(measured["implied_cost"], 3),
            measured,
            runs=runs,
            backends=backends,
            draft_model=draft_model,
        )

    def __init__(
        self,
        alpha: float = 0.8,
        gamma: int = 4,
        cost: float = 0.05,
        measured: dict | None = None,
        runs: list | None = None,
        backends: dict | None = None,
        draft_model=None,
    ) -> None:
        super().__init__()
        self.alpha, self.gamma, self.cost = alpha, gamma, cost
        self.measured = measured
        self.runs = runs
        self.backends = backends
        self.draft_model = draft_model
        self.launched: dict | None = None  # each side's LaunchSpec, where spectui launched it
        self.check: TheoryCheck | None = None
        self.status = ""

    def compose(self) -> ComposeResult:
        with Horizontal(id="inputs"):
            yield Label("α (acceptance)")
            yield Input(f"{self.alpha:.3f}", id="alpha")
            yield Label("γ (drafts/step)")
            yield Input(str(self.gamma), id="gamma")
            yield Label("c (draft cost)")
            yield Input(f"{self.cost:.3f}", id="cost")
        with Horizontal(id="body"):
            yield PlotextPlot(id="plot")
            yield Static("", id="table")
        yield Static("", id="measured")
        yield FormatsPanel()  # V(k) per weight format, as `spectui formats` kept it
        yield KeysFooter()  # its own keys and the app's few that work here (SpectuiApp.BINDINGS)

    def on_mount(self) -> None:
        self.redraw()

    def on_input_changed(self, event: Input.Changed) -> None:
        try:
            self.alpha = float(self.query_one("#alpha", Input).value)
            self.gamma = int(self.query_one("#gamma", Input).value)
            self.cost = float(self.query_one("#cost", Input).value)
        except ValueError:
            return
        self.redraw()

    def action_measure(self) -> None:
        if not self.runs or not self.measured:
            self.notify("run a comparison with speculation first: the terms are measured for its last prompt")
            return
        if not self.backends:
            self.notify("measuring the terms needs both servers live (not a replay)", severity="warning")
            return
        self.status = "measuring the terms on the servers (after the run, separate requests) …"
        self.redraw()
        self.measure_terms()

    @work(exclusive=True, group="theory-terms", exit_on_error=False)
    async def measure_terms(self) -> None:
        assert self.backends is not None and self.runs is not None  # action_measure checked both

        def say(line: str) -> None:
            self.status = line
            self.redraw()

        try:
            chk, _curve = await check_prompt(
                None,
                self.backends["baseline"],
                self.backends["candidate"],
                self.runs,
                self.draft_model,
                3,
                say,
                launched=self.launched,
            )
        except Exception as exc:  # a server gone, no draft model: one line on the screen, never a traceback
            self.status = f"terms not measured: {describe(exc)}"
            self.redraw()
            return
        self.check = chk
        self.status = "" if chk else "the candidate drafted nothing: no terms to measure"
        if chk is not None:
            self.cost = round(chk.costs.c, 3)
            self.query_one("#cost", Input).value = f"{self.cost:.3f}"  # redraws through on_input_changed
        self.redraw()

    def redraw(self) -> None:
        table = self.query_one("#table", Static)
        try:
            t = theory.analyse(self.alpha, self.gamma, self.cost)
        except InputError as exc:
            table.update(Text(exc.one_line(), style="bold red"))
            return
        chk = self.check
        be = t["break_even_alpha"]
        text = Text()
        text.append("E = (1−α^(γ+1))/(1−α)\nS = E/(γc+1)\n\n", style="dim")
        text.append(f"tokens per step E  {t['tokens_per_step']:.2f}\n")
        text.append(f"speed-up S         {t['speedup']:.2f}×\n", style="bold")
        text.append("break-even α       " + (f"{be:.3f}\n" if be is not None else "none (never pays)\n"))
        text.append(f"best γ at this α,c {t['best_gamma']} (S {t['best_speedup']:.2f}×)\n\n")
        if chk is None:
            text.append("  α     S\n", style="dim")
            for row in t["table"]:
                text.append(
                    f"  {row['alpha']:.1f}  {row['speedup']:5.2f}\n", style="green" if row["speedup"] >= 1 else "red"
                )
            text.append(
                "\nassumes verifying γ+1 tokens costs one target step:\ntrue while decoding is memory-bound, false on\n"
                "a CPU and under concurrency (see spectui sweep)"
                + ("\n\nEnter: measure c and V(k) on the servers" if self.backends and self.runs else ""),
                style="dim",
            )
        else:
            text.append("terms (target steps)\n", style="bold")
            for term in chk.terms:
                text.append(f"{term.name[:24]:<24} {term.speedup:5.2f}×\n")
                text.append(f"  {term.measured}\n", style="dim")
            ks = " ".join(f"{v:.1f}" for v in chk.costs.verify)
            text.append(f"\nV(1…{len(chk.costs.verify)}): {ks}\n")
            if chk.costs.reeval:
                text.append("R: " + " ".join(f"{v:.1f}" for v in chk.costs.reeval) + "\n")
            mbe = chk.break_even_alpha
            text.append(
                f"measured costs: best γ {chk.best_gamma}, break-even α "
                + (f"{mbe:.3f}\n" if mbe is not None else "none\n")
            )
        table.update(text)
        self._plot(be)
        self._measured_line()

    def _plot(self, be: float | None) -> None:
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        xs = [i / 100 for i in range(0, 100)]
        plt.plot(
            xs,
            [theory.speedup(a, self.gamma, self.cost) for a in xs],
            label=f"ideal S(α), γ={self.gamma}, c={self.cost:g}",
        )
        chk = self.check
        if chk is not None:
            plt.plot(xs, [chk.costs.speedup(a, self.gamma) for a in xs], label="measured costs (c, V(k), R(k))")
        plt.plot(xs, [1.0] * len(xs), label="break-even S = 1")
        if be is not None:
            plt.vertical_line(be)
        if self.measured:
            plt.scatter([self.measured["alpha"]], [self.measured["measured_speedup"]], label="measured", marker="x")
            if self.measured.get("runs"):  # the 95 % interval over repeated runs, as a vertical bar
                a = self.measured["alpha"]
                plt.plot([a, a], [self.measured["speedup_low"], self.measured["speedup_high"]], label="95 % interval")
        if chk is not None:
            plt.scatter([min(chk.alpha, 0.99)], [chk.predicted], label="predicted from the terms", marker="o")
        plt.xlabel("acceptance rate α (per position)")
        plt.ylabel("speed-up S")
        plt.title("speculative decoding: speed-up against acceptance rate")
        plot.refresh()

    def _measured_line(self) -> None:
        m = self.query_one("#measured", Static)
        chk = self.check
        if chk is not None:
            verdict = (
                f"the measured terms account for the measured speed-up ({chk.agreement})"
                if chk.agree
                else (chk.miss or next((n for n in chk.notes if n.startswith("too few runs")), ""))
            )
            meas = (
                f"{chk.measured:.2f}× [{chk.measured_low:.2f}–{chk.measured_high:.2f}] over {chk.runs} runs "
                f"(width {chk.measured_high - chk.measured_low:.2f}×)"
                if chk.measured_low is not None and chk.measured_high is not None
                else f"{chk.measured:.2f}× (1 run: no interval)"
            )
            outside = outside_note(chk.predicted, chk.predicted_range)
            m.update(
                Text(
                    f"α {chk.alpha:.2f} per position, γ {chk.gamma:.2f}, E {chk.tokens_per_step:.2f}; c = {chk.costs.c:.3f} "
                    f"[{chk.costs.sources.get('c', '')}]\npredicted from the measured terms "
                    f"{predicted_words(chk.predicted, chk.predicted_range)}, measured {meas}\n{verdict}"
                    + (f"\n{outside}" if outside else "")
                    + (f"\n{self.status}" if self.status else "")
                )
            )
            return
        if self.measured:
            d = self.measured
            m.update(
                Text(
                    f"measured run: α = {d['alpha']:.2f} per position "
                    f"({d['acceptance_per_drafted_token']:.0%} accepted per drafted token), γ = {d['gamma']:.2f} "
                    f"drafts/step (server counters), implied c = {d['implied_cost']:.2f}; predicted with a free "
                    f"draft {d['predicted_speedup_free_draft']:.2f}×, measured "
                    + (  # the prompt's figure over its runs, as the text report and spectui theory --from give it
                        f"{d['speedup_median']:.2f}× [{d['speedup_low']:.2f}–{d['speedup_high']:.2f}] over {d['runs']} "
                        f"runs (this run {d['measured_speedup']:.2f}×, whose α, γ and c these are)"
                        if d.get("runs")
                        else f"{d['measured_speedup']:.2f}× (1 run: no spread measured)"
                    )
                    + f".\n{d['why']}"
                    + (f"\n{self.status}" if self.status else "")
                )
            )
        else:
            m.update("run a comparison first to put a measured point here (α, γ from the server's counters)")
