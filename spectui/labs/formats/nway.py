"""The n-way table `spectui prove` prints under a certificate: plain decoding in every weight format the
formats lesson measured, and the speculative configuration the certificate proved, all in the same run.
Every row is a ratio paired with the proof's baseline (B C / C B, the proof's prompts and parameters), so a
loaded machine moves all of them alike; the speculative row's ratio is the certificate's own speed-up."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

FILE_NAME = "n-way.json"  # written beside the certificate by `prove --formats-table`


@dataclass
class NWayRow:
    label: str  # "plain Q4_0", "speculative (the candidate)"
    tps: float | None  # median decode rate in this run, in its own phase (the load moves between phases)
    over_baseline: float | None  # paired ratio to the proof's baseline (geometric mean)
    low: float | None = None
    high: float | None = None
    runs: int = 0
    note: str = ""  # why a row has no figure

    def ratio_text(self) -> str:
        if self.over_baseline is None:
            return "—"
        if self.low is None or self.high is None:
            return f"{self.over_baseline:.2f}×"
        return f"{self.over_baseline:.2f}× [{self.low:.2f}–{self.high:.2f}]"


@dataclass
class NWay:
    baseline: str  # the proof's baseline, in words ("plain Q4_1 (the baseline)")
    plain: list[NWayRow]
    speculative: NWayRow
    notes: list[str] = field(default_factory=list)

    def fastest_plain(self) -> NWayRow | None:
        known = [r for r in self.plain if r.over_baseline is not None]
        return max(known, key=lambda r: r.over_baseline or 0.0) if known else None

    def gap(self) -> float | None:
        """The speculative configuration over the fastest plain format (both paired with the baseline): above
        1 it is faster than every plain format measured, below by how much it falls short."""
        best, s = self.fastest_plain(), self.speculative.over_baseline
        if best is None or s is None or not best.over_baseline:
            return None
        return s / best.over_baseline

    def line(self) -> str:
        g, best = self.gap(), self.fastest_plain()
        if g is None or best is None:
            return "the speculative configuration could not be set beside every plain format"
        head = f"the speculative configuration is {g:.2f}× the fastest plain format ({best.label})"
        if g > 1 and self._overlap(best):  # a point above, the intervals not apart: no claim of speed
            return f"{head}: no measurable difference (its interval and the fastest's overlap)"
        if g > 1:
            return f"{head}: above every plain format (the intervals apart)"
        return f"{head}: {(1 - g) * 100:.0f} % short of it"

    def _overlap(self, best: NWayRow) -> bool:
        s = self.speculative
        if None in (s.low, s.high, best.low, best.high):
            return True
        return not (s.low > best.high or best.low > s.high)  # type: ignore[operator]

    def text(self) -> str:
        rows = [["configuration", "tok/s (its own phase)", "over the baseline (paired: read this)"]]
        for r in [*self.plain, self.speculative]:
            rows.append(
                [r.label, f"{r.tps:.1f}" if r.tps else "—", r.ratio_text() + (f"  ({r.note})" if r.note else "")]
            )
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        lines = [
            "n-way (plain decoding in every format the formats lesson measured, and the speculative one; this run):"
        ]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.append("  " + self.line())
        lines += [f"  {n}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict:
        return {**asdict(self), "gap": self.gap(), "line": self.line()}
