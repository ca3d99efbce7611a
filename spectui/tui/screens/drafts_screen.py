"""What a trained draft would cost for the model on screen and the chosen profile (`spectui drafts cost`
as a screen): Medusa, EAGLE-1, EAGLE-3 and draft models, each figure with its formula and inputs; above it,
what a trained draft measured here (`spectui drafts lesson`'s folder: time, memory and tokens per phase,
acceptance per position, the n_max chosen, the certificate's verdict line)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Label, Static

from spectui.core.errors import SpectuiError
from spectui.labs.drafts import cost as drafts
from spectui.labs.drafts.cost_text import text
from spectui.labs.drafts.lesson import latest_lesson, measured_text
from spectui.labs.memory.shape import read_shape
from spectui.machine.assets import find_model
from spectui.store.profiles import load_profiles
from spectui.tui.context import LabContext
from spectui.tui.widgets.footer import KeysFooter


def cost_text(target: str, profile: str | None, seq_len: int, samples: int, width: int | None = None) -> str:
    """The report `spectui drafts cost --target T --profile P --seq-len S --samples N` prints; `width`: its
    method table fits that many columns (one line a method, labs.drafts.cost_text._method_table)."""
    shape = read_shape(target)
    inputs = drafts.CostInputs(seq_len=seq_len, samples=samples)
    memory = None
    if profile:
        profiles, _ = load_profiles()
        if profile in profiles:
            memory = profiles[profile].min_gpu_memory_gib or None
            if profile in drafts.PROFILE_GPU:
                inputs = replace(inputs, gpu=drafts.PROFILE_GPU[profile])
        else:
            profile = None
    return text(drafts.estimate(shape, inputs, None, profile, memory), width)


def lesson_text(folder: str) -> str:
    """What `spectui drafts lesson` measured in this folder (labs.drafts.lesson.measured_text)."""
    if not folder:
        return "no trained draft measured yet: `spectui drafts lesson` trains, serves and proves one"
    return measured_text(Path(folder).expanduser())


REPORT_MARGIN = 4  # the report's padding (one each side) and its scroll bar's two columns


class DraftsScreen(Screen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="drafts_cost_back")]
    DEFAULT_CSS = """
    DraftsScreen #inputs, DraftsScreen #inputs-lesson { height: 3; }
    DraftsScreen #inputs Input, DraftsScreen #inputs-lesson Input { width: 1fr; }
    DraftsScreen #inputs Input.-short { width: 10; }
    DraftsScreen #inputs Label, DraftsScreen #inputs-lesson Label { padding: 1 1 0 2; }
    DraftsScreen #report { padding: 0 1; }
    DraftsScreen #lesson { padding: 0 1 1 1; }
    """

    def __init__(self, target: str | None, profile: str | None, lesson: str | None = None) -> None:
        super().__init__()
        self.target, self.profile, self.lesson = target or "", profile or "", lesson or ""

    @classmethod
    def open(cls, context: LabContext) -> DraftsScreen:
        """F3: the model on screen where its file is readable here, else the bundled SmolLM2."""
        path = context.model_path
        target = path if path and os.path.isfile(path) else find_model()

        lesson = latest_lesson()  # the newest lesson under the data folder's lessons/
        return cls(str(target) if target else None, context.profile, str(lesson) if lesson else None)

    def compose(self) -> ComposeResult:
        with Horizontal(id="inputs"):
            yield Label("target")
            yield Input(self.target, id="target", placeholder="GGUF file or HF folder")
            yield Label("profile")
            yield Input(self.profile, id="profile", classes="-short")
            yield Label("seq len")
            yield Input("2048", id="seq_len", classes="-short", type="integer")
            yield Label("samples")
            yield Input("5000", id="samples", classes="-short", type="integer")
        with Horizontal(id="inputs-lesson"):
            yield Label("lesson")
            yield Input(self.lesson, id="lesson", placeholder="a `spectui drafts lesson` folder")
        with VerticalScroll():
            yield Static(id="lesson-report", markup=False)
            yield Static(id="report", markup=False)
        yield KeysFooter()  # its own keys and the app's few that work here (SpectuiApp.BINDINGS)

    def on_mount(self) -> None:
        self.refresh_report()

    def on_resize(self) -> None:
        self.refresh_report()  # the method table fits the new width

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.refresh_report()

    def refresh_report(self) -> None:
        values = {i.id: i.value.strip() for i in self.query(Input)}
        self.query_one("#lesson-report", Static).update(lesson_text(values.get("lesson") or ""))
        report = self.query_one("#report", Static)
        if not values["target"]:
            report.update("give a target model (a GGUF file or a Hugging Face folder) and press Enter")
            return
        try:
            seq_len, samples = int(values["seq_len"] or 0), int(values["samples"] or 0)
            if seq_len < 1 or samples < 1:
                raise ValueError
        except ValueError:
            report.update("sequence length and samples must be whole numbers of at least 1")
            return
        try:
            width = self.app.size.width - REPORT_MARGIN
            report.update(cost_text(values["target"], values["profile"] or None, seq_len, samples, width))
        except SpectuiError as exc:
            report.update(f"cannot cost {values['target']}: {exc.one_line()}")
