"""What a lab screen gets of the comparison: one typed `LabContext`, read once when the lab opens.

`CompareScreen.lab_context()` (tui.screens.compare) builds it; every lab screen opens one way,
`Screen.open(context)`, which returns the screen or the one line that says why it cannot open now (said in a
notice). A lab keeps what it needs from the context and nothing of the comparison screen or the app.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spectui.core.types import GenerationParams, Prompt
from spectui.run.alone import OpenSide

if TYPE_CHECKING:
    from spectui.backends.base import Backend
    from spectui.core.runner import PromptResult


@dataclass(frozen=True)
class LabContext:
    """The app's state a lab needs, at the moment the lab opens."""

    backends: dict[str, Backend]  # the two connected servers ({} when none is up: one at a time, replay)
    params: GenerationParams  # the settings row's generation parameters
    prompts: list[Prompt]  # the prompt set on screen
    set_name: str
    prompt: Prompt | None = None  # the prompt on screen: the last one run, else the one typed, else None
    results: list[PromptResult] = field(default_factory=list)  # the runs on screen
    refusal: str | None = None  # why a lab that needs both servers up at once cannot run now (None: it can)
    open_alone: OpenSide | None = None  # one server at a time: the supervisor's, starts one side for a block
    alone_why: str = ""  # why the app runs one server at a time
    client: Any = None  # the app's HTTP client (compare's stamped one)
    launched: dict[str, Any] = field(default_factory=dict)  # side -> ServerProcess, for servers spectui started
    notebook: str | None = None  # the notebook path the app writes to (None: the default)
    model_path: str | None = None  # the baseline's model file, where its server said it
    profile: str | None = None  # the remembered hardware profile

    def live_backends(self) -> dict[str, Backend] | None:
        """Both servers, up now; None where a lab that needs them cannot run (`refusal` says why)."""
        return None if self.refusal else self.backends
