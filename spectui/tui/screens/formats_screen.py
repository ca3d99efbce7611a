"""The weight-formats lesson on the theory screen: the table `spectui formats` kept for the model (its plain
decode rates, V(k) as the server verifies, whether a lossless draft kept the bytes) and the format where
speculation pays — what the α/γ/c curve above assumes of V(k) = 1, measured per format. Read, never measured
here: the measurement starts servers for minutes (`spectui formats`)."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from spectui.core.errors import InputError
from spectui.labs.formats.table import recommend, table_text
from spectui.machine.assets import find_model
from spectui.run.formats import default_path, read


def formats_text(path: Path | None = None) -> str:
    """The kept table and its recommendation, or one line saying how to make it."""
    if path is None:
        model = find_model()
        if model is None:
            return "weight formats: no model yet — run `spectui setup`, then `spectui formats`"
        path = default_path(model)
    if not path.is_file():
        return f"weight formats: not measured on this machine yet — `spectui formats` keeps its table in {path}"
    try:
        les = read(path)
    except InputError as exc:
        return f"weight formats: {exc.one_line()}"
    s = les.settings
    head = (
        f"weight formats of {Path(les.model).name} (spectui formats, {s.get('date', '?')}, -t {s.get('threads', '?')}):"
    )
    return head + "\n" + table_text(les.rows, les.recommendation or recommend(les.rows)).rstrip()


class FormatsPanel(Static):
    """The kept formats table, read when the screen opens."""

    DEFAULT_CSS = "FormatsPanel { height: auto; max-height: 14; padding: 0 1; }"

    def __init__(self, path: Path | None = None) -> None:
        super().__init__("", id="formats", markup=False)
        self.path = path

    def on_mount(self) -> None:
        self.update(formats_text(self.path))
