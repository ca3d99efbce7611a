"""A question before something costly: what it does and what it costs, y to go on, n or Esc to leave it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from spectui.core.errors import InputError, describe
from spectui.labs.memory.kv import server_cost
from spectui.machine.drafter import DRAFTER_CTX, candidate_draft
from spectui.run.probe import drafter_kind

if TYPE_CHECKING:
    from spectui.core.types import ServerInfo
    from spectui.run.session import RunSession


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "answer(True)", "Yes, start it", id="confirm_yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm_no"),
    ]
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical { width: 80%; max-width: 96; height: auto; border: round $warning;
                               background: $surface; padding: 0 1; }
    ConfirmScreen #confirm-keys { color: $text-muted; padding: 1 0 0 0; }
    """

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text, self.text = title, text

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = self.title_text
            yield Static(self.text, id="confirm-text")
            yield Static("y: yes, start it · n or Esc: no", id="confirm-keys")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


def draft_server_question(session: RunSession, candidate: ServerInfo | None) -> str | None:
    """What the draft probe of a draft-model candidate starts (the draft's own llama-server, beside the two
    running) and what that holds, asked before it starts; None where the probe starts no server (n-gram)."""
    if drafter_kind(candidate.speculative if candidate is not None else {}) != "draft-simple":
        return None
    try:
        model = candidate_draft(
            session.options.draft_model, session.launched("candidate"), candidate.url if candidate else None, candidate
        ).path
    except InputError as exc:
        model, cost = None, f"{describe(exc)}: the probe will say so"
    if model is not None:
        cost = f"It holds {server_cost(model, DRAFTER_CTX)}, on the GPU or in RAM where llama-server puts it."
    return (
        "The draft probe asks the draft model what it proposed where the target said no. For that it starts "
        f"a third llama-server, the draft model on its own, beside the two running now. {cost}\n"
        "It is stopped as soon as the probe ends; the run's figures are already measured and do not change."
    )
