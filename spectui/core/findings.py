"""What the labs find about one prompt, as the data every view reads: triage's cause and the draft probe's
reconstructed drafts. Defined once here (shapes and their JSON), made by run.triage and run.probe,
carried on core.runner.PromptResult, recorded in sessions, shown by the reports, the TUI and the notebook.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TypedDict, cast

from spectui.core.compare import escape_bytes
from spectui.core.types import SIDES

# A margin (nats) between the two sides' chosen tokens under which triage calls a divergence a near-tie: the
# default of run.triage, `compare --near-tie`, prove and the TUI's run, defined once here where every layer can
# read it without importing triage's servers and metrics
NEAR_TIE_NATS = 0.05


class Rerun(TypedDict, total=False):
    """One of triage's reruns as recorded: what ran again and whether its bytes matched the run's."""

    what: str  # "candidate recomputed without its prompt cache (…)"
    identical: bool
    first_divergence: int | None  # the byte where the rerun parted from the run; None where identical
    prompt_cached_before: int  # the cold rerun only: prompt tokens the run reused from the cache
    prompt_cached_now: int | None  # … and the rerun reused (None: the server does not say)


# how triage asks a position's top tokens where they are not a stream's own (backends' top_logprobs)
APART = "asked apart: the prompt and the common prefix as one uncached batch"


def _tops(tops) -> str:
    return ", ".join(f"'{escape_bytes(str(tok).encode())}' {lp:.3f}" for tok, lp in tops)


def evidence_lines(lp: dict | None) -> list[str]:
    """Triage's evidence at the divergence, each list labelled with the computation it was taken in: a side's
    own decode (its stream's request with n_probs), the position asked apart, a batch of a given shape."""
    if not lp:
        return []
    pos = lp.get("position")
    out = []
    for side, got in (lp.get("own") or {}).items():
        margin = got.get("margin")
        m = f" (log p of the baseline's token − the candidate's: {margin:.3f})" if got.get("exact") else ""
        out.append(f"{side}'s own decode at token {pos} (its stream's request with n_probs): {_tops(got['tops'])}{m}")
    for side in SIDES:
        if lp.get(side):
            out.append(f"{side} top tokens at token {pos} ({APART}): {_tops(lp[side])}")
    for side, per in (lp.get("batch_shapes") or {}).items():
        for m, shape in per.items():
            if shape.get("tops"):
                out.append(
                    f"{side} at token {pos} as the last of a batch of M = {m} (cached prefix): {_tops(shape['tops'])}"
                )
    if lp.get("margin") is not None:
        out.append(f"margin between the two chosen tokens ({APART}): {abs(lp['margin']):.3f} nats")
    return out


def margins_text(lp: dict | None) -> str:
    """The margins at a divergence, each with where it was taken: `0.060 (the baseline's own decode), 0.290
    (the candidate's target in a batch of M = 5)`; empty where none was had."""
    if not lp:
        return ""
    parts = []
    for side, got in (lp.get("own") or {}).items():
        if got.get("exact") and got.get("margin") is not None:
            parts.append(f"{abs(got['margin']):.3f} (the {side}'s own decode)")
    width = lp.get("batch_width")
    wide = (lp.get("batch_shapes") or {}).get("candidate", {}).get(str(width))
    if wide and wide.get("margin") is not None:
        parts.append(f"{wide['margin']:.3f} (the candidate's target in a batch of M = {width})")
    if not parts and lp.get("margin") is not None:
        parts.append(f"{abs(lp['margin']):.3f} ({APART})")
    return ", ".join(parts)


def finding_lines(results: list) -> list[str]:
    """Where the candidate drafted and its greedy output still changed: how often, the causes triage named and
    the margins at each divergence (`results`: core.runner.PromptResult) — the result the lab exists to find (a verification batch computes the
    target's logits in another shape than a one-token decode; a close choice can flip), not a failure."""
    drafted = [r for r in results if r.identical is not None and r.candidate.figures.drafted]
    changed = [r for r in drafted if not r.identical]
    if not changed:
        return []
    causes: dict[str, int] = {}
    for r in changed:
        cause = r.triage.cause if r.triage else "not triaged"
        causes[cause] = causes.get(cause, 0) + 1
    lines = [
        f"finding: speculation changed the greedy output in {len(changed)} of {len(drafted)} runs where the "
        f"candidate drafted (causes: {', '.join(f'{c} {n}' for c, n in causes.items())})"
    ]
    for r in changed:
        margins = margins_text(r.triage.logprobs) if r.triage else ""
        if margins:
            lines.append(f"  {r.prompt.id}: margins at the divergence {margins} nats")
    if causes.keys() & {"near-tie", "batch shape"}:
        lines.append(
            "  why: a verification batch computes the target's logits in another shape than a one-token decode, "
            "and where two tokens are close the last bits decide; exact speculation is exact up to that"
        )
    return lines


@dataclass
class Triage:
    cause: str  # "nondeterminism" | "cache" | "lossy verification" | "near-tie" | "batch shape" | "configuration"
    summary: str
    reruns: list[Rerun] = field(default_factory=list)
    # the near-tie evidence at the divergence: position, each side's chosen token and top tokens, margins and
    # the batch shapes asked (run.triage._near_tie); keys are made per side, so it stays a dict
    logprobs: dict | None = None
    notes: list[str] = field(default_factory=list)  # steps a side could not do

    def to_json(self) -> dict:
        return {
            "cause": self.cause,
            "summary": self.summary,
            "reruns": self.reruns,
            "logprobs": self.logprobs,
            "notes": self.notes,
        }

    @classmethod
    def from_json(cls, d: object) -> Triage | None:
        """A recorded finding; None where the record is not one (a hand-edited or damaged session)."""
        if not isinstance(d, dict) or not isinstance(d.get("cause"), str):
            return None
        raw = d.get("reruns")
        reruns = cast(list[Rerun], [r for r in raw if isinstance(r, dict)] if isinstance(raw, list) else [])
        logprobs = d.get("logprobs") if isinstance(d.get("logprobs"), dict) else None
        notes = [str(n) for n in d.get("notes") or []] if isinstance(d.get("notes"), list) else []
        return cls(d["cause"], str(d.get("summary") or ""), reruns, logprobs, notes)

    def line(self) -> str:
        return f"cause: {self.cause} — {self.summary} (reruns: {len(self.reruns)})"


@dataclass
class StepSpan:
    """One verification step as the stream showed it."""

    step: int
    position: int  # output index of the step's first token: the first drafted position
    drafted: int
    accepted: int


@dataclass
class ProbeStep:
    step: int
    position: int
    drafted: int
    accepted: int
    draft_ids: list[int] = field(default_factory=list)
    draft_text: str = ""
    rejected_text: str = ""
    target_text: str = ""  # what the target wrote where it rejected (its token, as the server spells it)
    agrees: bool | None = None  # None: the step could not be checked (note says why)
    note: str = ""
    near_ties: list[float] = field(default_factory=list)  # margins (nats) of near-ties the evidence resolved

    @property
    def rejected(self) -> int:
        return self.drafted - self.accepted

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class ProbeResult:
    method: str  # how the drafts were rebuilt ("draft model X", "ngram-simple n=3 m=8")
    steps: list[ProbeStep] = field(default_factory=list)
    unavailable: str | None = None  # why no step could be probed, where none could

    @property
    def checked(self) -> int:
        return sum(1 for s in self.steps if s.agrees is not None)

    @property
    def agreed(self) -> int:
        return sum(1 for s in self.steps if s.agrees)

    def summary(self) -> str:
        if self.unavailable:
            return f"rejected drafts not available: {self.unavailable}"
        with_rej = [s for s in self.steps if s.rejected > 0]
        shown = sum(1 for s in with_rej if s.agrees)
        unchecked = len(self.steps) - self.checked
        ties = sum(1 for s in self.steps if s.agrees and s.near_ties)
        tail = f", {unchecked} not checkable" if unchecked else ""
        tail += f", {ties} after resolving a near-tie" if ties else ""
        return (
            f"rejected drafts reconstructed for {self.agreed}/{len(self.steps)} steps ({self.method}); "
            f"{shown}/{len(with_rej)} steps with rejections show their text{tail}"
        )

    def to_json(self) -> dict:
        return {
            "method": self.method,
            "unavailable": self.unavailable,
            "agreed": self.agreed,
            "checked": self.checked,
            "steps_total": len(self.steps),
            "summary": self.summary(),
            "steps": [s.to_json() for s in self.steps],
        }

    @classmethod
    def from_json(cls, d: object) -> ProbeResult | None:
        """A recorded probe; None where the record is not one. A damaged step is skipped, the others kept."""
        if not isinstance(d, dict):
            return None
        steps = []
        for s in d.get("steps") or []:
            if isinstance(s, dict):
                try:
                    steps.append(
                        ProbeStep(
                            int(s["step"]),
                            int(s["position"]),
                            int(s["drafted"]),
                            int(s["accepted"]),
                            [int(i) for i in s.get("draft_ids") or []],
                            str(s.get("draft_text") or ""),
                            str(s.get("rejected_text") or ""),
                            str(s.get("target_text") or ""),
                            s.get("agrees") if isinstance(s.get("agrees"), bool) else None,
                            str(s.get("note") or ""),
                            [float(m) for m in s.get("near_ties") or []],
                        )
                    )
                except (KeyError, TypeError, ValueError):
                    continue  # a damaged step record: skip it, keep the others
        return cls(str(d.get("method") or "?"), steps, d.get("unavailable"))

    def rejected_at(self) -> dict[int, str]:
        """Output index of each step's target token → the rejected text there (agreeing steps only)."""
        return {s.position + s.accepted: s.rejected_text for s in self.steps if s.agrees and s.rejected_text}
