"""Passes over a prompt set for a drafter that keeps state between requests (backends.spectypes: ngram-mod,
ngram-cache, chains holding them): run 1 of each prompt is the cold pass (the drafter has not seen this
prompt), every later run a warm one, and a verdict on the bytes is made for each pass apart.

    warm_passes(results, note) → Warmth: per pass, prompts compared / differing, tokens drafted, and how many
    requests the drafter had been sent before; its `line` is the finding
    ("identical cold, differs warm on 6/8 (pass 2), 5/8 (pass 3): state-dependent").

The verdict on every prompt still covers every pass (core.verdict, one per run); this says where in the
passes a difference appeared, which for a stateful drafter is the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spectui.core.runner import PromptResult


@dataclass(frozen=True)
class PassCount:
    """One pass (run k of every prompt)."""

    run: int
    prompts: int  # prompts run in this pass
    compared: int  # of them, with a verdict on the bytes
    differs: int
    drafted: int  # tokens the candidate drafted over the pass
    accepted: int
    seen: tuple[int, int] | None  # fewest and most requests the candidate had been sent before, in this run

    def to_json(self) -> dict:
        return {
            "pass": self.run,
            "prompts": self.prompts,
            "compared": self.compared,
            "differs": self.differs,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "requests_seen": list(self.seen) if self.seen is not None else None,
        }


@dataclass(frozen=True)
class Warmth:
    note: str  # which types keep state (backends.spectypes.state_note)
    passes: list[PassCount] = field(default_factory=list)

    @property
    def cold(self) -> PassCount | None:
        return self.passes[0] if self.passes else None

    @property
    def warm(self) -> list[PassCount]:
        return self.passes[1:]

    @property
    def state_dependent(self) -> bool:
        """Identical on every prompt cold, differing on some warm: the drafter's state changed the bytes."""
        cold = self.cold
        return bool(cold and cold.compared and not cold.differs and any(p.differs for p in self.warm))

    @property
    def line(self) -> str:
        cold = self.cold
        if cold is None:
            return f"{self.note}: nothing was run"
        if not self.warm:
            return (
                f"{self.note}: one pass only, cold (the drafter had not seen these prompts); the server as it runs "
                "all day is warm: repeat the set (--repeat 2 or more) to judge it warm"
            )
        cold_words = (
            f"identical cold ({cold.compared}/{cold.prompts})"
            if not cold.differs
            else f"differs cold on {cold.differs}/{cold.compared}"
        )
        warm_diff = [p for p in self.warm if p.differs]
        if warm_diff:
            each = ", ".join(f"{p.differs}/{p.compared} (pass {p.run})" for p in warm_diff)
            tail = ": state-dependent" if self.state_dependent else ""
            words = f"{cold_words}, differs warm on {each}{tail}"
        else:
            words = f"{cold_words}, identical warm on every pass ({', '.join(str(p.run) for p in self.warm)})"
        return f"{words}; {self.drafting_words()} ({self.note})"

    def drafting_words(self) -> str:
        cold, warm = self.cold, self.warm
        assert cold is not None
        seen = [p.seen for p in warm if p.seen is not None]
        how_warm = f", after {min(s[0] for s in seen)}–{max(s[1] for s in seen)} earlier requests" if seen else ""
        per = "/".join(str(p.drafted) for p in warm)
        return f"drafted {cold.drafted} tokens cold, {per} warm{how_warm}"

    def to_json(self) -> dict:
        return {
            "stateful": self.note,
            "passes": [p.to_json() for p in self.passes],
            "state_dependent": self.state_dependent,
            "line": self.line,
        }


def warm_passes(
    results: list[PromptResult],
    note: str | None,
    seen: dict[int, int] | None = None,
    runs: dict[int, int] | None = None,
) -> Warmth | None:
    """The passes of a run whose candidate keeps state (`note`, None: it keeps none → None). `seen` maps
    id(result) to the requests the candidate had been sent before it (default: its place in `results`,
    which run in the order they are given); `runs` id(result) to its run number (default: result.run)."""
    if not note or not results:
        return None
    before = seen if seen is not None else {id(r): i for i, r in enumerate(results)}
    by_run: dict[int, list[PromptResult]] = {}
    for r in results:
        by_run.setdefault((runs or {}).get(id(r), r.run), []).append(r)
    passes = []
    for k in sorted(by_run):
        rs = by_run[k]
        counts = [before[id(r)] for r in rs if id(r) in before]
        passes.append(
            PassCount(
                k,
                len(rs),
                sum(1 for r in rs if r.identical is not None),
                sum(1 for r in rs if r.identical is False),
                sum(r.candidate.figures.drafted for r in rs),
                sum(r.candidate.figures.accepted for r in rs),
                (min(counts), max(counts)) if counts else None,
            )
        )
    return Warmth(note, passes)
