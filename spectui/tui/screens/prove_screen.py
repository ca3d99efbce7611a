"""`spectui prove` as a screen (F4 / palette: Prove): the prompt set on screen through run.prove.prove's Prover
— the run session the main screen drives — with a progress bar over prompts and runs, the certificate's
verdict line in its colour, its table of measured terms, and where it was saved. The notebook gets one
entry for it. In a TUI that runs one server at a time each side is started alone (the supervisor's
open_alone) when a phase needs it and stopped after, as `spectui prove --one-at-a-time` does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Label, ProgressBar, Static

from spectui.backends.launchspec import LaunchSpec
from spectui.core import terms_table
from spectui.core.errors import describe
from spectui.core.types import GenerationParams, Prompt
from spectui.run import events
from spectui.run.alone import OneAtATime
from spectui.run.prove.prove import TRIAGE_SKIPPED, ProveOptions, Prover, default_dir
from spectui.run.prove.terms import add_terms
from spectui.store import notebook
from spectui.tui.context import LabContext
from spectui.tui.widgets.footer import KeysFooter

NOT_ASKED = "not asked for (measure terms: no)"
STYLE = {"identical": "bold green", "different": "bold red", "incomplete": "bold yellow"}


class ProveScreen(Screen):
    BINDINGS = [
        Binding("enter", "run", "Prove", id="prove_run", priority=True),
        Binding("escape", "app.pop_screen", "Back", id="prove_back"),
    ]
    DEFAULT_CSS = """
    ProveScreen #prove-settings { height: 1; padding: 0 1; }
    ProveScreen #prove-settings Input { width: 8; height: 1; border: none; padding: 0; }
    ProveScreen #prove-settings Label { padding: 0 1 0 2; }
    ProveScreen ProgressBar { padding: 0 1; }
    ProveScreen #prove-phase, ProveScreen #prove-verdict, ProveScreen #prove-saved { height: auto; padding: 0 1; }
    ProveScreen #prove-alone { height: auto; padding: 0 1; color: $text-muted; }
    ProveScreen #prove-terms-box { height: 1fr; }
    ProveScreen #prove-terms-table { width: auto; padding: 0 1; }
    """

    def __init__(
        self,
        backends: dict,
        prompts: list[Prompt],
        set_name: str,
        params: GenerationParams,
        *,
        client=None,
        launched: dict | None = None,
        notebook: str | None = None,
        out_dir: Path | None = None,
        open_alone: Callable | None = None,
        alone_why: str = "",
    ) -> None:
        """`open_alone` (the supervisor's): one server at a time, each side started alone when a phase needs
        it; `backends` is then not used (its servers are not up)."""
        super().__init__()
        self.backends, self.prompts, self.set_name, self.params = backends, prompts, set_name, params
        self.client = client
        self.launched = launched or {}
        self.notebook = notebook
        self.out_dir = out_dir
        self.open_alone, self.alone_why = open_alone, alone_why
        self.document: dict | None = None
        self._done = 0

    @classmethod
    def open(cls, context: LabContext) -> ProveScreen | str:
        """F4: the app's prompt set, settings, HTTP client, launched servers and notebook (the screen keeps
        none of the app); one server at a time where the app runs so, else on the two connected servers
        (where they are not both up: why not, said in a notice)."""
        if context.open_alone is None and context.refusal:
            return context.refusal
        return cls(
            context.backends if context.open_alone is None else {},
            list(context.prompts),
            context.set_name,
            context.params,
            client=context.client,
            launched=context.launched,
            notebook=context.notebook,
            open_alone=context.open_alone,
            alone_why=context.alone_why,
        )

    def compose(self) -> ComposeResult:
        yield Static(
            f"prove on the prompt set {self.set_name} ({len(self.prompts)} prompts): greedy identity on each, "
            "identity under sampling on a few, the speed-up beside its acceptance; Enter to run",
            id="status",
        )
        yield Static(self.alone_line(), id="prove-alone")
        with Horizontal(id="prove-settings"):
            yield Label("runs")
            yield Input("2", id="prove-runs", type="integer")
            yield Label("sampled prompts")
            yield Input("1", id="prove-sampled", type="integer")
            yield Label("seeds")
            yield Input("8", id="prove-samples", type="integer")
            yield Label("max tokens")
            yield Input(str(self.params.max_tokens), id="prove-max-tokens", type="integer")
            yield Label("measure terms")
            yield Input("yes", id="prove-terms", restrict=r"[yesnoYESNO]*")
        yield ProgressBar(id="prove-progress", show_eta=True)
        yield Static("", id="prove-phase")
        yield Static("", id="prove-verdict")
        yield Static("", id="prove-saved")
        with VerticalScroll(id="prove-terms-box"):
            yield Static("", id="prove-terms-table")
        yield KeysFooter()  # its own keys and the app's few that work here (SpectuiApp.BINDINGS)

    def alone_line(self) -> str:
        if self.open_alone is None:
            return ""

        return (
            f"one server at a time ({self.alone_why}): each side is started when a phase needs it and stopped "
            f"after, never both up; triage {TRIAGE_SKIPPED}; the terms are not measured (they need "
            "both servers up)"
        )

    def action_run(self) -> None:
        try:
            runs, sampled, samples, max_tokens = (
                int(self.query_one(f"#prove-{k}", Input).value) for k in ("runs", "sampled", "samples", "max-tokens")
            )
        except ValueError:
            self.notify("runs, sampled prompts, seeds and max tokens must be whole numbers", severity="error")
            return
        terms = self.query_one("#prove-terms", Input).value.strip().lower()
        if terms not in ("yes", "no"):
            self.notify("measure terms: yes or no", severity="error")
            return

        options = ProveOptions(runs=runs, sampled=sampled, samples=samples)
        try:
            options.check()
            if max_tokens < 1:
                raise ValueError("max tokens must be at least 1")
        except Exception as exc:
            self.notify(str(exc), severity="error")
            return
        self.query_one("#prove-verdict", Static).update("")
        self.query_one("#prove-saved", Static).update("")
        self.query_one("#prove-terms-table", Static).update("")
        self.document = None
        self.run_prove(options, max_tokens, terms == "yes")

    @work(exclusive=True, group="prove", exit_on_error=False)
    async def run_prove(self, options, max_tokens: int, terms: bool = True) -> None:
        bar = self.query_one(ProgressBar)
        launched = {s: LaunchSpec.from_argv(p.argv) for s, p in self.launched.items() if getattr(p, "argv", None)}
        alone = None
        baseline, candidate = self.backends.get("baseline"), self.backends.get("candidate")
        if self.open_alone is not None:
            alone = OneAtATime(self.open_alone, self.alone_why, self.say_alone)
            baseline = candidate = None
        prover = Prover(
            baseline,
            candidate,
            replace(self.params, max_tokens=max_tokens, cache_prompt=False),
            self.prompts,
            self.set_name,
            self.out_dir or default_dir(),
            options,
            emit=self.on_prove_event,
            client=self.client,
            launched=launched,
            one_at_a_time=alone,
        )
        self._done = 0
        bar.update(total=len(prover.share) * options.runs + len(prover.sampled) * options.samples, progress=0)
        self.query_one("#status", Static).update(
            f"proving into {prover.out} … (Esc stops it and goes back; the sessions recorded so far stay there)"
        )
        try:
            doc = await prover.run()
            if terms and alone is None:
                self.query_one("#prove-phase", Static).update("measuring the formula's terms on the servers …")
            doc = await add_terms(
                doc,
                self.client,
                baseline,
                candidate,
                skip=None if terms or alone is not None else NOT_ASKED,
                say=lambda line: self.query_one("#prove-phase", Static).update(line),
            )
        except Exception as exc:
            self.query_one("#status", Static).update(Text(f"stopped: {describe(exc)}", style="bold red"))
            return
        self.show(doc)
        self.note(doc)

    def say_alone(self, line: str) -> None:
        """Where a one-at-a-time prove is: which side is up, which pass it runs."""
        self.query_one("#prove-alone", Static).update(f"one server at a time · {line}")

    def on_prove_event(self, ev: events.Event) -> None:
        """Where the prove is: each event's one line (run.events.line, as the CLI prints it), and the bar."""
        match ev:
            case events.Progressed(phase="greedy" | "sampled"):
                self._done += 1
                self.query_one(ProgressBar).update(progress=self._done)
        if (text := events.line(ev)) is not None:
            self.query_one("#prove-phase", Static).update(text)

    def show(self, doc: dict) -> None:
        """The certificate's verdict line (never judged here) and where it is."""
        self.document = doc
        v = doc["verdict"]
        self.query_one("#prove-verdict", Static).update(Text(v["line"], style=STYLE.get(v["status"], "bold")))
        path = Path(doc["_path"])
        alone = (doc.get("derived") or {}).get("one_at_a_time")
        self.query_one("#prove-saved", Static).update(
            (f"{alone['line']}\n" if alone else "")
            + f"certificate saved: {path} (+ {path.with_suffix('.md').name}, {path.with_suffix('.html').name}), "
            f"beside its sessions; `spectui verify {path}` re-derives it"
        )

        self.query_one("#prove-terms-table", Static).update(
            Text("\n".join(terms_table.text(doc.get("terms"))).strip("\n"))
        )
        self.query_one("#status", Static).update("done; Enter to prove again, Esc to go back")

    def note(self, doc: dict) -> None:
        try:
            where, warning = notebook.append(notebook.notebook_path(self.notebook), [notebook.certificate_entry(doc)])
        except Exception as exc:  # the certificate stands without its notebook entry
            self.notify(f"notebook entry not written: {exc}", severity="warning")
            return
        self.notify(
            warning or f"certificate added to the notebook {where}", severity="warning" if warning else "information"
        )
