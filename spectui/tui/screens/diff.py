"""The diff view: both outputs aligned around the first difference, non-printable bytes escaped."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from spectui.core.compare import Divergence, escape_bytes, first_difference
from spectui.core.findings import ProbeResult, Triage, evidence_lines
from spectui.core.verdict import Verdict


def aligned_lines(a: bytes, b: bytes, at: int | None, width: int = 64) -> list[tuple[str, str, bool]]:
    """Rows of (baseline, candidate, differs) in fixed byte windows, so both sides line up by offset."""
    rows = []
    start = 0 if at is None else max(0, (at // width) * width - 3 * width)
    end = max(len(a), len(b))
    if at is not None:
        end = min(end, (at // width) * width + 4 * width)
    for off in range(start, end, width):
        ca, cb = a[off : off + width], b[off : off + width]
        rows.append((f"{off:>6} {escape_bytes(ca)}", f"{off:>6} {escape_bytes(cb)}", ca != cb))
    return rows


class DiffScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,ctrl+d", "dismiss", "Close", id="close_diff")]
    DEFAULT_CSS = """
    DiffScreen { align: center middle; }
    DiffScreen > VerticalScroll { width: 95%; height: 90%; border: thick $warning; background: $surface; padding: 0 1; }
    """

    def __init__(
        self,
        baseline: bytes,
        candidate: bytes,
        verdict: Verdict | None,
        triage: Triage | None = None,
        drafts: ProbeResult | None = None,
        live: Divergence | None = None,
        which: str | None = None,
    ) -> None:
        """`verdict` is the prompt's carried verdict (None while it still runs: then `live` says where the
        bytes parted so far); `which` names the request where it is one of many (a lab's turn or level)."""
        super().__init__()
        self.which = which
        self.note: str | None = None  # where triage stands, for a lab's request (show_triage)
        self.a, self.b, self.verdict, self.triage = baseline, candidate, verdict, triage
        self.divergence = verdict.divergence if verdict is not None else live
        self.drafts = drafts

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self._body(), id="diff-body")

    def on_mount(self) -> None:  # what show_triage set while the screen composed
        self.query_one("#diff-body", Static).update(self._body())

    def show_triage(self, triage: Triage | None, note: str | None = None) -> None:
        """Triage's finding once it comes (a lab's request is triaged after its diff opens), or why none came."""
        self.triage, self.note = triage, note
        for body in self.query("#diff-body").results(Static):  # none yet while the screen composes: it reads these
            body.update(self._body())

    def _body(self) -> Text:
        t = Text()
        if self.which:
            t.append(f"{self.which}\n", style="bold")
        if self.note:
            t.append(f"{self.note}\n", style="italic")
        v = self.verdict
        d = self.divergence
        at = d.byte if d is not None else None
        if v is not None and v.status == "identical":
            t.append(f"IDENTICAL: {len(self.a)} bytes, compared {v.compared}\n\n", style="bold green")
        elif v is not None and v.status in ("failed", "incomplete"):
            at = first_difference(self.a, self.b)
            t.append(f"{v.line()}\n", style="bold")
            parted = "the bytes so far agree" if at is None else f"the bytes so far part at byte {at}"
            t.append(f"{parted}; offsets on the left, bytes escaped\n\n")
        elif d is not None:
            what = v.line() if v is not None else "still running: the bytes so far part here"
            toks = f" (token {d.baseline_token} / {d.candidate_token})"
            t.append(
                f"{what}\nfirst difference at byte {at}{toks}; offsets on the left, bytes escaped\n\n", style="bold"
            )
        else:
            t.append("still running: the bytes so far agree\n\n", style="bold")
        for la, lb, differs in aligned_lines(self.a, self.b, at):
            style = "bold red" if differs else None
            t.append("B " + la + "\n", style=style)
            t.append("C " + lb + "\n", style=style)
        if at is not None:
            t.append("\n")
            t.append("baseline  ▸ ", style="dim")
            t.append(escape_bytes(self.a[at : at + 48]) or "(ends here)", style="bold")
            t.append("\ncandidate ▸ ", style="dim")
            t.append(escape_bytes(self.b[at : at + 48]) or "(ends here)", style="bold")
        if self.triage:
            self._triage(t, self.triage)
        if self.drafts:
            self._drafts(t, self.drafts)
        t.append("\n\nEsc to close")
        return t

    @staticmethod
    def _triage(t: Text, tr: Triage) -> None:
        """Triage's reruns and the top tokens at the divergence, under the bytes."""
        t.append(f"\n\ncause: {tr.cause}", style="bold")
        t.append(f" — {tr.summary}\n")
        for r in tr.reruns:
            same = "identical" if r.get("identical") else f"differs at byte {r.get('first_divergence')}"
            t.append(f"  rerun: {r.get('what')}: {same}\n")
        for line in evidence_lines(tr.logprobs):
            t.append(f"  {line}\n")
        for n in tr.notes:
            t.append(f"  ({n})\n", style="dim")

    @staticmethod
    def _drafts(t: Text, d: ProbeResult) -> None:
        """The draft probe: each step's drafted, accepted and rejected text."""
        t.append(f"\n\ndrafts: {d.summary()}\n", style="bold")
        for s in d.steps:
            head = f"  step {s.step} at token {s.position}: kept {s.accepted}/{s.drafted}"
            if s.agrees:
                drafted = escape_bytes(s.draft_text.encode())
                rejected = escape_bytes(s.rejected_text.encode())
                t.append(f"{head}  drafted '{drafted}'")
                if rejected:
                    t.append("  rejected ")
                    t.append(f"'{rejected}'", style="strike red")
                t.append("\n")
            else:
                t.append(f"{head}  (probe disagrees: {s.note or 'not checkable'})\n", style="dim")
