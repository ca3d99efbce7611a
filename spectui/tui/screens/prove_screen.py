"""`spectui prove` as a screen (F4 / palette: Prove): the prompt set on screen through run.prove's Prover
— the run session the main screen drives — with a progress bar over prompts and runs, the certificate's
verdict line in its colour, and where the certificate was saved. The notebook gets one entry for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Input, Label, ProgressBar, Static

from spectui.core.types import GenerationParams, Prompt

if TYPE_CHECKING:
    from spectui.tui.app import SpectuiApp

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
    ) -> None:
        super().__init__()
        self.backends, self.prompts, self.set_name, self.params = backends, prompts, set_name, params
        self.client = client
        self.launched = launched or {}
        self.notebook = notebook
        self.out_dir = out_dir
        self.document: dict | None = None
        self._done = 0

    @classmethod
    def of(cls, app: SpectuiApp, backends: dict) -> ProveScreen:
        """The screen for the app's prompt set, settings, HTTP client, launched servers and notebook
        (read once here; the screen keeps none of the app)."""
        return cls(
            backends,
            list(app.prompt_list),
            app.prompt_set_name,
            app.params,
            client=app.client,
            launched=app.config.launched,
            notebook=app.config.notebook,
        )

    def compose(self) -> ComposeResult:
        yield Static(
            f"prove on the prompt set {self.set_name} ({len(self.prompts)} prompts): greedy identity on each, "
            "identity under sampling on a few, the speed-up beside its acceptance; Enter to run",
            id="status",
        )
        with Horizontal(id="prove-settings"):
            yield Label("runs")
            yield Input("2", id="prove-runs", type="integer")
            yield Label("sampled prompts")
            yield Input("1", id="prove-sampled", type="integer")
            yield Label("seeds")
            yield Input("8", id="prove-samples", type="integer")
            yield Label("max tokens")
            yield Input(str(self.params.max_tokens), id="prove-max-tokens", type="integer")
        yield ProgressBar(id="prove-progress", show_eta=True)
        yield Static("", id="prove-phase")
        yield Static("", id="prove-verdict")
        yield Static("", id="prove-saved")
        yield Footer()

    def action_run(self) -> None:
        try:
            runs, sampled, samples, max_tokens = (
                int(self.query_one(f"#prove-{k}", Input).value) for k in ("runs", "sampled", "samples", "max-tokens")
            )
        except ValueError:
            self.notify("runs, sampled prompts, seeds and max tokens must be whole numbers", severity="error")
            return
        from spectui.run.prove import ProveOptions

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
        self.run_prove(options, max_tokens)

    @work(exclusive=True, group="prove", exit_on_error=False)
    async def run_prove(self, options, max_tokens: int) -> None:
        from dataclasses import replace

        from spectui.backends.launchspec import LaunchSpec
        from spectui.core.errors import describe
        from spectui.run.prove import Prover, default_dir

        bar = self.query_one(ProgressBar)
        launched = {s: LaunchSpec.from_argv(p.argv) for s, p in self.launched.items() if getattr(p, "argv", None)}
        prover = Prover(
            self.backends["baseline"],
            self.backends["candidate"],
            replace(self.params, max_tokens=max_tokens, cache_prompt=False),
            self.prompts,
            self.set_name,
            self.out_dir or default_dir(),
            options,
            emit=self.on_prove_event,
            client=self.client,
            launched=launched,
        )
        self._done = 0
        bar.update(total=len(prover.share) * options.runs + len(prover.sampled) * options.samples, progress=0)
        self.query_one("#status", Static).update(
            f"proving into {prover.out} … (Esc stops it and goes back; the sessions recorded so far stay there)"
        )
        try:
            doc = await prover.run()
        except Exception as exc:
            self.query_one("#status", Static).update(Text(f"stopped: {describe(exc)}", style="bold red"))
            return
        self.show(doc)
        self.note(doc)

    def on_prove_event(self, ev) -> None:
        from spectui.run import prove

        if isinstance(ev, prove.Progressed):
            if ev.phase in ("greedy", "sampled"):
                self._done += 1
                self.query_one(ProgressBar).update(progress=self._done)
            self.query_one("#prove-phase", Static).update(f"{ev.phase} {ev.done}/{ev.total}: {ev.prompt_id}")
        elif isinstance(ev, prove.PhaseStarted):
            self.query_one("#prove-phase", Static).update(f"{ev.phase} …")

    def show(self, doc: dict) -> None:
        """The certificate's verdict line (never judged here) and where it is."""
        self.document = doc
        v = doc["verdict"]
        self.query_one("#prove-verdict", Static).update(Text(v["line"], style=STYLE.get(v["status"], "bold")))
        path = Path(doc["_path"])
        self.query_one("#prove-saved", Static).update(
            f"certificate saved: {path} (+ {path.with_suffix('.md').name}, {path.with_suffix('.html').name}), "
            f"beside its sessions; `spectui verify {path}` re-derives it"
        )
        self.query_one("#status", Static).update("done; Enter to prove again, Esc to go back")

    def note(self, doc: dict) -> None:
        from spectui.store import notebook

        try:
            where, warning = notebook.append(notebook.notebook_path(self.notebook), [notebook.certificate_entry(doc)])
        except Exception as exc:  # the certificate stands without its notebook entry
            self.notify(f"notebook entry not written: {exc}", severity="warning")
            return
        self.notify(
            warning or f"certificate added to the notebook {where}", severity="warning" if warning else "information"
        )
