"""The keys a newcomer can find: one sentence per action, the footer's order, why a greyed key does nothing,
and the `?` screen (k9s and lazygit's `?`: every key of the screen you are on).

No default key is one tmux or readline owns: Ctrl+B is tmux's prefix (the README recommends tmux), and
Ctrl+W/U/K edit the prompt (delete a word, to the start, to the end) as in every shell; those actions are on
Alt+letter keys instead, which neither tmux's defaults nor Textual's Input bind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.dom import DOMNode

# the main screen's first keys, in this order; the rest follow as bound (the marks' key early: code in the
# candidate's pane reads as code only with the marks off or colour-only; Quit within the first ten)
FOOTER_FIRST = (
    "run",
    "lab('prove')",
    "lab('sampling')",
    "lab('theory')",
    "show_keys",
    "switch('marks')",
    "keep('export')",
    "diff",
    "triage",
    "quit",
)

# one sentence per action: the `?` screen, the command palette and the footer's tooltips
SENTENCES = {
    "run": "run the prompt on both servers and compare their bytes as they arrive",
    "cancel": "stop the run on both servers",
    "rerun": "run the last prompt again (with the settings on screen)",
    "run_all": "run every prompt of the chosen set, then show the whole set's speed-up",
    "switch('order')": "sequential (one side, then the other) or concurrent: concurrent runs share the machine",
    "switch('boundaries')": "show where each token starts in both outputs",
    "switch('marks')": "the candidate's marks: all (✗n before a rejection), colours only (the text as sent, "
    "a rejection shown reversed on the character where it happened), or off",
    "switch('logs')": "show or hide the last lines of the launched servers' logs",
    "toggle_live": "fold the live panel (GPU, RAM, KV, each server's memory) to one line, or unfold it",
    "diff": "the two outputs side by side from where they part, with the cause triage found",
    "triage": "rerun the diverged prompt asking for log-probabilities, to find why the outputs differ",
    "drafts": "what the draft proposed where the target said no (a draft model's probe asks before starting its server)",
    "keep('save')": "save this session (a JSONL file `spectui replay` plays back)",
    "keep('notebook')": "append the last result to the notebook (Markdown)",
    "keep('export')": "export the session as an HTML report",
    "keep('screenshot')": "save an SVG screenshot of the screen",
    "sessions": "browse saved sessions: replay, rename, delete",
    "profiles": "pick a launch profile: spectui starts the baseline and the candidate for you",
    "lab('theory')": "the speed-up the measured acceptance predicts, term by term, against the measured one",
    "lab('prefix_lab')": "prefix caching: cold against warm turns of a conversation, tokens reused, bytes compared",
    "lab('sweep')": "speed-up against concurrency (1, 2, 4 requests at once): where batching eats the payoff",
    "lab('sampling')": "the prompt many times at temperature > 0: seeded bytes and the output distribution",
    "lab('drafts_cost')": "what a draft model costs to run beside the target",
    "lab('prove')": "a certificate for the prompt set: verdict, speed-up and acceptance, from saved sessions",
    "show_keys": "this list of the keys of the screen you are on (? only outside a text box: the prompt takes it "
    "as text; F1 works everywhere)",
    "quit": "quit (servers spectui launched are stopped)",
    "command_palette": "search every action by name",
}


def sentence(action: str, description: str = "") -> str:
    return SENTENCES.get(action, description.lower() if description else action)


def in_footer_order(actions: list[str], main_screen: bool) -> list[str]:
    """The main screen's keys with FOOTER_FIRST first; a sub-screen's as bound: its own, then the app's few."""
    if main_screen:
        first = {a: i for i, a in enumerate(FOOTER_FIRST)}
        return sorted(actions, key=lambda a: first.get(a, len(first)))
    last = {a: i for i, a in enumerate(("keep('screenshot')", "show_keys", "quit"), 1)}
    return sorted(actions, key=lambda a: last.get(a, 0))


def greyed_reason(node: DOMNode, action: str) -> str:
    """Why a greyed-out action of `node` (the screen whose key it is) does nothing now, and what makes it work."""
    runs = getattr(node, "runs", None)
    results = runs.results if runs is not None else []
    if getattr(node, "replaying", False) and action == "triage":
        return "triage needs the live servers: a replay has only what was recorded"
    if not results:
        return "run a prompt first (Enter): there is no result yet"
    if action == "triage":
        return "triage explains outputs that differ: the last run's outputs are identical"
    return "not available now"
