"""The one verdict: identical, differs, failed or incomplete — computed once, here, and carried as data.

Every view (the TUI banner and diff screen, replay, the reports, the notebook, the sweep, the prefix lab,
the certificate) shows a `Verdict` that `judge` made; none decides identical/different on its own. A live
byte comparison may show *where* two streams part while they run, never the final word.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from spectui.core.compare import Divergence, compare_ids, compare_tokens, token_divergence

if TYPE_CHECKING:
    from spectui.core.figures import SideRecorder

Status = Literal["identical", "differs", "failed", "incomplete"]
STATUSES: tuple[Status, ...] = ("identical", "differs", "failed", "incomplete")
WORDS = {"identical": "IDENTICAL", "differs": "DIFFERS", "failed": "FAILED", "incomplete": "INCOMPLETE"}


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the comparison of one prompt's two outputs found, and why."""

    status: Status
    compared: str = "text"  # what was compared: "text+ids" (bytes and token ids) or "text"
    divergence: Divergence | None = None  # where they part (status "differs" only)
    reason: str = ""  # one line: what differs, or why there is no verdict

    @property
    def identical(self) -> bool | None:
        """True/False where both sides finished; None where a side failed or the record is incomplete."""
        return {"identical": True, "differs": False}.get(self.status)

    @property
    def word(self) -> str:
        return WORDS[self.status]

    @property
    def kind(self) -> str | None:
        """What differs ("bytes", "ids", "count"), None unless the outputs differ."""
        return self.divergence.kind if self.divergence is not None else None

    def line(self) -> str:
        """`IDENTICAL (compared text+ids)`, `DIFFERS: same text, different token ids from token 3`, …"""
        if self.status == "identical":
            return f"IDENTICAL (compared {self.compared})"
        return f"{self.word}: {self.reason}" if self.reason else self.word

    def to_json(self) -> dict:
        return {
            "status": self.status,
            "identical": self.identical,
            "compared": self.compared,
            "reason": self.reason,
            "divergence": self.divergence.to_json() if self.divergence is not None else None,
        }

    @classmethod
    def from_json(cls, d: object) -> Verdict:
        """A recorded verdict; ValueError/TypeError name what is wrong with a damaged one."""
        if not isinstance(d, dict):
            raise TypeError(f"verdict is {type(d).__name__}, not an object")
        status = d.get("status")
        if status not in STATUSES:
            raise ValueError(f"verdict status {status!r}")
        div = d.get("divergence")
        compared, reason = d.get("compared", "text"), d.get("reason", "")
        if not isinstance(compared, str) or not isinstance(reason, str):
            raise TypeError("verdict compared/reason are not text")
        divergence = Divergence.from_json(div) if div is not None else None
        if (status == "differs") != (divergence is not None):
            raise ValueError(f"verdict {status} {'without' if divergence is None else 'with'} a divergence")
        return cls(status, compared, divergence, reason)

    @classmethod
    def legacy(cls, saved: dict) -> Verdict | None:
        """The verdict of a session written before verdicts were recorded whole (`identical`,
        `first_divergence`, `compared` keys of its result record); None where it holds none."""
        same = saved.get("identical")
        compared = str(saved["compared"]) if isinstance(saved.get("compared"), str) else "text"
        if same is True:
            return cls("identical", compared)
        if same is False and isinstance(saved.get("first_divergence"), dict):
            div = Divergence.from_json(saved["first_divergence"])
            return cls("differs", compared, div, reason_for(div))
        return None

    def agrees(self, other: Verdict) -> bool:
        """Same status, and the same kind of difference at the same byte."""
        if self.status != other.status:
            return False
        a, b = self.divergence, other.divergence
        if a is None or b is None:
            return a is b
        return (a.kind, a.byte, a.baseline_token, a.candidate_token) == (
            b.kind,
            b.byte,
            b.baseline_token,
            b.candidate_token,
        )


def reason_for(div: Divergence) -> str:
    """One line naming what differs."""
    if div.kind in ("ids", "count") and div.detail:
        return div.detail
    if div.baseline_token is None or div.candidate_token is None:
        shorter = "baseline" if div.baseline_token is None else "candidate"
        return f"the {shorter} output ends at byte {div.byte}; the other goes on"
    return f"bytes differ from byte {div.byte} (token {div.baseline_token} | {div.candidate_token})"


def failed(b: SideRecorder, c: SideRecorder) -> Verdict:
    parts = [f"{r.name} failed: {r.failed.message}" for r in (b, c) if r.failed is not None]
    return Verdict("failed", reason="; ".join(parts) + " — not compared")


def judge(b: SideRecorder, c: SideRecorder, ids_comparable: bool, damaged: bool = False) -> Verdict:
    """THE verdict on two sides' outputs, given as the recorders that took their events.

    A failed side gives no verdict ("failed"); a side that neither finished nor failed (a cut-off
    recording) gives "incomplete". Otherwise the bytes are compared; where both sides give every token
    id and share a tokenizer, the ids catch what the text hides; and a side that generated more tokens
    than it sent (withheld at the end) is never called identical.
    """
    if b.failed is not None or c.failed is not None:
        return failed(b, c)
    if damaged or not (b.done and c.done):
        return Verdict("incomplete", reason="the record stops inside this prompt (a side never finished)")
    tb, tc = b.token_bytes(), c.token_bytes()
    ids_b, ids_c = [t.token_id for t in b.tokens], [t.token_id for t in c.tokens]
    with_ids = ids_comparable and None not in ids_b and None not in ids_c and bool(ids_b) and bool(ids_c)
    compared = "text+ids" if with_ids else "text"
    div = compare_tokens(tb, tc)
    if div is None and with_ids:
        i = compare_ids(ids_b, ids_c)
        if i is not None:
            div = token_divergence(tb, tc, i, "ids", f"same text, different token ids from token {i}")
    if div is None:
        # only the servers' own counts (llama.cpp tokens_predicted): chunk counts from servers that give
        # no ids differ with chunking, not with the tokens
        nb = b.finished.tokens_predicted if b.finished is not None else None
        nc = c.finished.tokens_predicted if c.finished is not None else None
        if nb is not None and nc is not None and nb != nc:
            detail = f"same text, but {nb} vs {nc} tokens generated (tokens at the end were never sent as text)"
            div = token_divergence(tb, tc, min(nb, nc), "count", detail)
    if div is None:
        return Verdict("identical", compared)
    return Verdict("differs", compared, div, reason_for(div))
