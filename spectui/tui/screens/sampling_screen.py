"""Exact under sampling, on the prompt on screen: seeded bytes, then the two output distributions.

Runs labs.sampling.exact (the code `spectui sampling` runs) with a progress bar over the seeds, and shows, per
generated position, both sides' most frequent tokens side by side and the total variation distance
between them beside what chance alone gives, the one verdict of the whole-sequence test (green only for
`consistent`; `not enough samples to decide` in yellow), and which promise applies to how the candidate
drafts.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Input, Label, ProgressBar, Static
from textual_plotext import PlotextPlot

from spectui.core.compare import escape_bytes
from spectui.core.types import GenerationParams, Prompt
from spectui.labs.sampling.exact import ALPHA, NOT_ENOUGH, sampling
from spectui.tui.context import LabContext
from spectui.tui.widgets.footer import KeysFooter

if TYPE_CHECKING:
    from spectui.labs.sampling.exact import SamplingResult

POSITIONS = 4  # positions shown side by side (the test covers all K)


def top_tokens(results, side: str, position: int, n: int = 3) -> list[tuple[str, int]]:
    """The n most frequent tokens (their bytes, escaped) at a generated position over the samples."""
    counts: Counter = Counter()
    for r in results:
        toks = getattr(r, side).tokens
        if position < len(toks):
            counts[escape_bytes(toks[position].data) or "∅"] += 1
    return counts.most_common(n)


def eta_text(done: int, total: int, elapsed_s: float) -> str:
    """Samples done, the measured time a sample (both sides, one seed) and the time left at that pace."""
    if not done:
        return ""
    each = elapsed_s / done
    left = each * (total - done)
    return f"sample {done} of {total} · {each:.2f} s a sample (measured) · " + (
        f"about {left:.0f} s left" if done < total else f"{elapsed_s:.1f} s in all"
    )


class SamplingScreen(Screen):
    BINDINGS = [
        Binding("enter", "run", "Run", id="sampling_run", priority=True),
        Binding("escape", "app.pop_screen", "Back", id="sampling_back"),
    ]
    DEFAULT_CSS = """
    SamplingScreen #sampling-settings { height: 1; padding: 0 1; }
    SamplingScreen #sampling-settings Input { width: 8; height: 1; border: none; padding: 0; }
    SamplingScreen #sampling-settings Label { padding: 0 1 0 2; }
    SamplingScreen ProgressBar { padding: 0 1; }
    SamplingScreen #sampling-result { height: auto; padding: 0 1; }
    SamplingScreen PlotextPlot { height: 1fr; }
    """

    def __init__(self, backends: dict, prompt: Prompt, params: GenerationParams) -> None:
        super().__init__()
        self.backends, self.prompt, self.params = backends, prompt, params
        self.result: SamplingResult | None = None

    @classmethod
    def open(cls, context: LabContext) -> SamplingScreen | str:
        """F2: exact under sampling on the prompt on screen (the last one run, else the one typed)."""
        if context.prompt is None:
            return "type or run a prompt first: sampling runs it many times"
        return context.refusal or cls(context.backends, context.prompt, context.params)

    def compose(self) -> ComposeResult:
        yield Static(f"exact under sampling on {self.prompt.id}: {self.prompt.preview}; Enter to run", id="status")
        with Horizontal(id="sampling-settings"):
            yield Label("temperature")
            yield Input("0.8", id="sampling-temperature", type="number")
            yield Label("samples")
            yield Input("20", id="sampling-samples", type="integer")
            yield Label("max tokens")
            yield Input(str(min(self.params.max_tokens, 8)), id="sampling-max-tokens", type="integer")
        # idle (empty, still) until Enter: a bar with no total animates as if something ran
        yield ProgressBar(total=20, id="sampling-progress", show_eta=False)
        yield Static("", id="sampling-eta")
        yield Static("", id="sampling-result")
        yield PlotextPlot(id="sampling-plot")
        yield KeysFooter()  # its own keys and the app's few that work here (SpectuiApp.BINDINGS)

    def action_run(self) -> None:
        try:
            temp = float(self.query_one("#sampling-temperature", Input).value)
            n = int(self.query_one("#sampling-samples", Input).value)
            k = int(self.query_one("#sampling-max-tokens", Input).value)
        except ValueError:
            self.notify("temperature, samples and max tokens must be numbers", severity="error")
            return
        if not temp > 0 or n < 2 or k < 1:
            self.notify(
                "temperature above 0 (greedy is checked byte for byte), ≥ 2 samples, ≥ 1 token", severity="error"
            )
            return
        self.query_one("#status", Static).update(f"sampling {n} seeds on both sides at temperature {temp:g}…")
        self.run_sampling(temp, n, k)

    @work(exclusive=True, group="sampling", exit_on_error=False)
    async def run_sampling(self, temperature: float, samples: int, max_tokens: int) -> None:
        bar = self.query_one(ProgressBar)
        bar.update(total=samples, progress=0)
        started = time.monotonic()

        def progress(_prompt, done: int, total: int) -> None:
            bar.update(progress=done)
            self.query_one("#sampling-eta", Static).update(eta_text(done, total, time.monotonic() - started))

        params = GenerationParams(max_tokens=max_tokens, temperature=temperature, seed=self.params.seed)
        try:
            [res] = await sampling(
                self.backends["baseline"],
                self.backends["candidate"],
                [self.prompt],
                params,
                samples,
                1000,
                True,  # always the distribution pass here: the screen is for looking at the distributions
                None,
                progress,
            )
        except Exception as exc:
            self.query_one("#status", Static).update(Text(f"failed: {exc}", style="bold red"))
            return
        self.result = res
        self.query_one("#status", Static).update("done; Enter to run again, Esc to go back")
        self._show(res)

    def _show(self, res) -> None:
        t = Text()
        answer, overall = res.overall()  # one verdict over the seeds, the distributions and the promise (labs)
        t.append(overall + "\n", style={"same": "bold green", "different": "bold red"}.get(answer, "bold yellow"))
        t.append(f"byte-identical for {res.seeded_identical} of {len(res.compared)} seeds", style="bold")
        if res.failed_seeds:  # named, and out of both counts: a failed request is not a broken promise
            left = res.failed_seeds
            t.append(f" · failed, left out of both counts: {', '.join(left[:3])}", style="yellow")
        g = res.guarantee
        if g is not None:
            promise = {
                "seeded bytes": "seeded bytes promised",
                "distribution only": "only the distribution promised: a seeded mismatch is not a failure",
                "unknown": "promise unknown",
            }[g.promise]
            style = "bold red" if res.seeded_mismatch_is_failure and g.promise == "seeded bytes" else "dim"
            t.append(f" · drafting {g.drafting}: {promise}", style=style)
        # the verdict's own colour: green only for a consistent result, never for "not enough samples"
        style = {"different": "bold red", "consistent": "bold green", NOT_ENOUGH: "bold yellow"}.get(
            res.verdict, "bold"
        )
        t.append("\n" + res.distribution_line(), style=style)
        acc = res.acceptance()
        sp = res.speedup()
        t.append(f"\nacceptance {acc:.0%}" if acc is not None else "\nacceptance —")
        if sp is not None:
            t.append(f" · speed-up {sp.text(unit='×')}")
        for pos in res.positions[:POSITIONS]:
            k = pos.position
            b = "  ".join(f"'{tok}'×{c}" for tok, c in top_tokens(res.runs, "baseline", k))
            c = "  ".join(f"'{tok}'×{n}" for tok, n in top_tokens(res.runs, "candidate", k))
            p = f"p {pos.p_adjusted:.3f}" if pos.z is not None else "nothing varies here"
            t.append(
                f"\nposition {k + 1}: TVD {pos.tvd:.2f} ({pos.tvd_by_chance:.2f} by chance), {p}",
                style="red" if pos.p_adjusted < ALPHA else "",
            )
            t.append(f"\n   baseline  {b}\n   candidate {c}", style="dim")
        self.query_one("#sampling-result", Static).update(t)
        self._plot(res)

    def _plot(self, res) -> None:
        """Each position's TVD between the sides beside the TVD expected by chance and the detectable one."""
        plot = self.query_one(PlotextPlot)
        plt = plot.plt
        plt.clear_data()
        xs = [p.position + 1 for p in res.positions]
        if xs:
            plt.bar(xs, [p.tvd for p in res.positions], label="TVD between the two sides")
            plt.plot(xs, [p.tvd_by_chance for p in res.positions], label="expected by chance", marker="dot")
            found = [(p.position + 1, p.detectable) for p in res.positions if p.detectable is not None]
            if found:
                plt.plot([x for x, _ in found], [d for _, d in found], label="detectable (80 % power)", marker="dot")
        plt.xlabel("generated position")
        plt.title("how far apart the two sides' token distributions are, position by position")
        plot.refresh()
