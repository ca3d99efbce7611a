"""The arithmetic screen: speed-up against acceptance rate, the break-even point, and a measured run beside it."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Input, Label, Static
from textual_plotext import PlotextPlot

from spectui.core.errors import InputError
from spectui.labs import theory


class TheoryScreen(Screen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="theory_back")]
    DEFAULT_CSS = """
    TheoryScreen #inputs { height: 3; }
    TheoryScreen #inputs Input { width: 14; }
    TheoryScreen #inputs Label { padding: 1 1 0 2; }
    TheoryScreen #body { height: 1fr; }
    TheoryScreen PlotextPlot { width: 2fr; }
    TheoryScreen #table { width: 1fr; padding: 0 1; }
    TheoryScreen #measured { height: auto; padding: 0 1; background: $panel; }
    """

    @classmethod
    def for_results(cls, results) -> TheoryScreen:
        """The screen with the last run as its measured point (α per position and γ from the server's
        counters, labs.theory.from_result), and the interval of its speed-up where the prompt ran several
        times."""
        from spectui.core.runner import grouped
        from spectui.labs import theory

        measured = None
        if results:
            measured = theory.from_result(results[-1])
            spread = grouped(results)[-1].speedup
            if measured and spread is not None and spread.measured:
                measured |= {"speedup_low": spread.low, "speedup_high": spread.high, "runs": spread.n}
        if not measured:
            return cls()
        return cls(
            min(measured["alpha"], 0.999),
            max(1, round(measured["gamma"])),
            round(measured["implied_cost"], 3),
            measured,
        )

    def __init__(self, alpha: float = 0.8, gamma: int = 4, cost: float = 0.05, measured: dict | None = None) -> None:
        super().__init__()
        self.alpha, self.gamma, self.cost = alpha, gamma, cost
        self.measured = measured

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
        yield Footer()

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

    def redraw(self) -> None:
        table = self.query_one("#table", Static)
        try:
            t = theory.analyse(self.alpha, self.gamma, self.cost)
        except InputError as exc:
            table.update(Text(exc.one_line(), style="bold red"))
            return
        be = t["break_even_alpha"]
        text = Text()
        text.append("E = (1−α^(γ+1))/(1−α)\nS = E/(γc+1)\n\n", style="dim")
        text.append(f"tokens per step E  {t['tokens_per_step']:.2f}\n")
        text.append(f"speed-up S         {t['speedup']:.2f}×\n", style="bold")
        text.append("break-even α       " + (f"{be:.3f}\n" if be is not None else "none (never pays)\n"))
        text.append(f"best γ at this α,c {t['best_gamma']} (S {t['best_speedup']:.2f}×)\n\n")
        text.append("  α     S\n", style="dim")
        for row in t["table"]:
            text.append(
                f"  {row['alpha']:.1f}  {row['speedup']:5.2f}\n", style="green" if row["speedup"] >= 1 else "red"
            )
        text.append(
            "\nassumes verifying γ+1 tokens costs one target step:\ntrue while decoding is memory-bound, false on\n"
            "a CPU and under concurrency (see spectui sweep)",
            style="dim",
        )
        table.update(text)
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        plt.clear_figure()
        xs = [i / 100 for i in range(0, 100)]
        plt.plot(
            xs, [theory.speedup(a, self.gamma, self.cost) for a in xs], label=f"S(α), γ={self.gamma}, c={self.cost:g}"
        )
        plt.plot(xs, [1.0] * len(xs), label="break-even S = 1")
        if be is not None:
            plt.vertical_line(be)
        if self.measured:
            plt.scatter([self.measured["alpha"]], [self.measured["measured_speedup"]], label="measured", marker="x")
            if self.measured.get("runs"):  # the 95 % interval over repeated runs, as a vertical bar
                a = self.measured["alpha"]
                plt.plot([a, a], [self.measured["speedup_low"], self.measured["speedup_high"]], label="95 % interval")
        plt.xlabel("acceptance rate α (per position)")
        plt.ylabel("speed-up S")
        plt.title("speculative decoding: speed-up against acceptance rate")
        plot.refresh()
        m = self.query_one("#measured", Static)
        if self.measured:
            d = self.measured
            m.update(
                Text(
                    f"measured run: α = {d['alpha']:.2f} per position "
                    f"({d['acceptance_per_drafted_token']:.0%} accepted per drafted token), γ = {d['gamma']:.2f} "
                    f"drafts/step (server counters), implied c = {d['implied_cost']:.2f}; predicted with a free "
                    f"draft {d['predicted_speedup_free_draft']:.2f}×, measured {d['measured_speedup']:.2f}×"
                    + (
                        f" (median of {d['runs']} runs [{d['speedup_low']:.2f}–{d['speedup_high']:.2f}]; the point is "
                        "the last run's)"
                        if d.get("runs")
                        else " (1 run: no spread measured)"
                    )
                    + f".\n{d['why']}"
                )
            )
        else:
            m.update("run a comparison first to put a measured point here (α, γ from the server's counters)")
