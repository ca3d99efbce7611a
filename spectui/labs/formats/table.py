"""The formats table: one row a weight format (its copy's size, plain decode rate, V(k) as the server
verifies, and what a lossless n-gram candidate did to the bytes and the speed), the recommendation read from
it, its text and its JSON. Pure: run.formats measures the rows.

The recommendation is the format where speculation pays and the bytes stay:
- the bytes stay: every compared prompt of the n-gram candidate (lossless drafting: llama.cpp accepts only
  the target's own greedy token) came out identical to the plain server of the same file; a format whose
  verification batches move a near-tie changes them, and is never recommended for speculation;
- speculation pays: with the measured V(k) and the draft free (c = 0, as an n-gram or a small head), the
  best draft length γ ≤ 7 at the reference acceptance α gives S(α, γ) = E(α, γ) / V(γ + 1) above 1 by more
  than the tolerance (core.stats.TOLERANCE). Row by row (V(k) ≈ k) nothing drafted pays;
- among those, the highest projected speculative rate: plain tok/s × S. Where no format qualifies the
  fastest plain format whose bytes stay is named, said as "speculation does not pay here".
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from spectui.core.stats import TOLERANCE
from spectui.labs.formats.kernels import kernel_words, kernels
from spectui.labs.theory.formula import tokens_per_step

ALPHA_REF = 0.5  # the reference acceptance where none was measured (n-gram drafts on chat prompts: 33-42 %)
BATCHED_BELOW = 0.6  # V(k)/k at the largest k: a batch under 60 % of k single steps has a batched kernel
ROW_BY_ROW_ABOVE = 0.85  # … above 85 %, it runs row by row


@dataclass
class SpecOutcome:
    """One prompt of the n-gram candidate against the plain server of the same file."""

    prompt: str
    runs: int
    identical: int  # runs whose bytes (and ids) were identical
    compared: int  # runs with a verdict
    speedup: float | None  # geometric mean over its runs
    parted_at: int | None = None  # the byte where a differing run parted
    margin: float | None = None  # triage's margin (nats) between the two chosen tokens there, where measured
    cause: str | None = None  # triage's cause of the difference


@dataclass
class FormatRow:
    format: str
    file: str = ""
    size_bytes: int | None = None
    refused: str | None = None  # why this format's copy could not be made (one line)
    plain_tps: float | None = None  # median plain decode rate over the lesson's prompts
    verify: list[float] = field(default_factory=list)  # V(1) … V(K), target decode steps, as the server verifies
    verify_source: str = ""
    spec: list[SpecOutcome] = field(default_factory=list)
    speedup: dict | None = None  # the n-gram candidate's speed-up over the prompts: value, low, high, word
    acceptance: float | None = None  # accepted / drafted of the n-gram candidate
    failed: str | None = None  # a measurement that could not run (one line)

    @property
    def identical(self) -> int:
        return sum(o.identical for o in self.spec)

    @property
    def compared(self) -> int:
        return sum(o.compared for o in self.spec)

    @property
    def bytes_stay(self) -> bool | None:
        """True where every compared run was identical, False where one differed, None where none compared."""
        if not self.compared:
            return None
        return self.identical == self.compared

    def batch_share(self) -> float | None:
        """V(K)/K at the largest K measured: the share of K single steps a K-token batch costs."""
        if len(self.verify) < 2:
            return None
        return self.verify[-1] / len(self.verify)

    def kernel_read(self) -> str:
        """What the measured V(k) says of the kernel: batched, row by row, or in between."""
        share = self.batch_share()
        if share is None:
            return "not measured"
        if share < BATCHED_BELOW:
            return "batched"
        if share > ROW_BY_ROW_ABOVE:
            return "row by row"
        return "partly batched"

    def best_speedup(self, alpha: float) -> tuple[float, int] | None:
        """max over γ of E(α, γ) / V(γ + 1) with a free draft (c = 0), and that γ; None without V(k)."""
        if len(self.verify) < 2:
            return None
        a = min(max(alpha, 0.0), 0.999)
        best = max(((tokens_per_step(a, g) / self.verify[g], g) for g in range(1, len(self.verify))), default=None)
        return best

    def to_json(self) -> dict:
        d = asdict(self)
        d["kernels"] = kernels(self.format)
        d["kernel_read"] = self.kernel_read()
        return d

    @classmethod
    def from_json(cls, d: dict) -> FormatRow:
        spec = [SpecOutcome(**{k: o.get(k) for k in SpecOutcome.__dataclass_fields__}) for o in d.get("spec") or []]
        keep = {k: d[k] for k in cls.__dataclass_fields__ if k not in ("format", "spec", "verify") and k in d}
        return cls(str(d["format"]), **keep, verify=[float(v) for v in d.get("verify") or []], spec=spec)


@dataclass(frozen=True)
class Recommendation:
    format: str | None
    speculation_pays: bool
    projected_tps: float | None  # plain tok/s × S at α, where speculation pays
    speedup: float | None  # S(α, γ) projected from V(k)
    gamma: int | None
    alpha: float
    why: list[str]

    def to_json(self) -> dict:
        return asdict(self)


def reference_alpha(rows: list[FormatRow]) -> tuple[float, str]:
    """The acceptance the projection uses: the n-gram candidate's, pooled over the formats (the same model
    drafts the same n-grams in every format), else ALPHA_REF."""
    got = [r.acceptance for r in rows if r.acceptance is not None]
    if got:
        a = sum(got) / len(got)
        return a, f"α {a:.2f}: the n-gram candidate's acceptance, averaged over the formats"
    return ALPHA_REF, f"α {ALPHA_REF:.2f}: a reference acceptance (no draft was accepted or measured)"


def recommend(rows: list[FormatRow], alpha: float | None = None) -> Recommendation:
    """The format where speculation pays and the bytes stay (module docstring), with why, in lines."""
    a, said = (alpha, f"α {alpha:.2f} (given)") if alpha is not None else reference_alpha(rows)
    measured = [r for r in rows if r.refused is None and r.failed is None and r.plain_tps]
    why = [
        f"{r.format}: not made — {r.refused}" if r.refused is not None else f"{r.format}: not measured — {r.failed}"
        for r in rows
        if r.refused is not None or r.failed is not None
    ]
    why += [
        f"{r.format}: the bytes changed under lossless speculation ({r.compared - r.identical}/{r.compared} runs "
        "differ): its verification batch moves near-ties, so speculating on it changes the output"
        for r in measured
        if r.bytes_stay is False
    ]
    kept = [r for r in measured if r.bytes_stay is not False]
    paying = _paying(kept, a, said.split(":")[0], why)
    if paying:
        tps, s, g, r = paying[0]
        bytes_said = f"identical on {r.identical}/{r.compared} runs" if r.compared else "not compared"
        why.insert(
            0,
            f"{r.format}: plain {r.plain_tps:.1f} tok/s, V({len(r.verify)}) = {r.verify[-1]:.2f} steps "
            f"({r.kernel_read()}; {kernel_words(r.format)}); at {said.replace(': ', ' (', 1)}"
            f"{')' if ': ' in said else ''} a free draft of γ = {g} projects "
            f"{s:.2f}× → {tps:.1f} tok/s; bytes {bytes_said}",
        )
        why += [
            f"{o.format}: pays too ({o_s:.2f}× at γ = {o_g}) but projects {o_tps:.1f} tok/s"
            for o_tps, o_s, o_g, o in paying[1:]
        ]
        return Recommendation(r.format, True, tps, s, g, a, why)
    if kept:
        r = max(kept, key=lambda x: x.plain_tps or 0.0)
        why.insert(
            0,
            f"speculation does not pay in any format measured here; {r.format} decodes fastest plain "
            f"({r.plain_tps:.1f} tok/s) with its bytes kept",
        )
        return Recommendation(r.format, False, None, None, None, a, why)
    why.insert(0, "no format was measured with its bytes kept")
    return Recommendation(None, False, None, None, None, a, why)


def _paying(kept: list[FormatRow], alpha: float, at: str, why: list[str]) -> list[tuple[float, float, int, FormatRow]]:
    """(projected tok/s, S, γ, row) of each format where a free draft pays at `alpha`, best first; a line in
    `why` for each where it does not."""
    paying: list[tuple[float, float, int, FormatRow]] = []
    for r in kept:
        best = r.best_speedup(alpha)
        if best is None or r.plain_tps is None:
            continue
        s, g = best
        if s > 1 + TOLERANCE:
            paying.append((r.plain_tps * s, s, g, r))
            continue
        n = len(r.verify)
        why.append(
            f"{r.format}: V({n}) = {r.verify[-1]:.2f} steps ({r.verify[-1] / n:.0%} of {n} single steps, "
            f"{r.kernel_read()}): at {at} the best draft gives {s:.2f}× — {kernel_words(r.format)}"
        )
    return sorted(paying, key=lambda p: -p[0])


def _mib(n: int | None) -> str:
    return f"{n / 2**20:.0f} MiB" if n else "—"


def _cells(rows: list[FormatRow], ks: tuple[int, ...]) -> tuple[list[str], list[list[str]]]:
    head = [
        "format",
        "size",
        "plain tok/s",
        *(f"V({k})" for k in ks),
        "kernel (from V)",
        "n-gram identical",
        "speed-up",
    ]
    body = []
    for r in rows:
        if r.refused is not None or r.failed is not None:
            body.append([r.format, _mib(r.size_bytes), "—", *("—" for _ in ks), "—", (r.refused or r.failed or ""), ""])
            continue
        vs = [f"{r.verify[k - 1]:.2f}" if len(r.verify) >= k else "—" for k in ks]
        sp = r.speedup or {}
        if sp.get("value") is None:
            speed = "—"
        elif sp.get("low") is not None:
            speed = f"{sp['value']:.2f}× [{sp['low']:.2f}–{sp['high']:.2f}]"
        else:
            speed = f"{sp['value']:.2f}× (no interval)"
        ident = f"{r.identical}/{r.compared}" if r.compared else "not compared"
        tps = f"{r.plain_tps:.1f}" if r.plain_tps else "—"
        body.append([r.format, _mib(r.size_bytes), tps, *vs, r.kernel_read(), ident, speed])
    return head, body


def recommendation_lines(rec: Recommendation) -> list[str]:
    if rec.format is None:
        first = "recommendation: none — " + (rec.why[0] if rec.why else "nothing measured")
        return [first] + [f"  {w}" for w in rec.why[1:]]
    if rec.speculation_pays:
        first = f"recommendation: {rec.format} — speculation pays and the bytes stay"
    else:
        first = f"recommendation: {rec.format} (plain) — speculation does not pay in any format here"
    return [first] + [f"  {w}" for w in rec.why]


def table_text(rows: list[FormatRow], rec: Recommendation, ks: tuple[int, ...] = (2, 4, 8)) -> str:
    """The table and the recommendation, as `spectui formats` prints them."""
    head, body = _cells(rows, ks)
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [head, *body]]
    lines.append("")
    lines += recommendation_lines(rec)
    lines.append(
        "  V(k): a k-token verification batch in target decode steps, every position's logits as the server "
        "verifies; ≈ 1 is a batched kernel (one pass over the weights), ≈ k is row by row"
    )
    lines.append(
        "  plain tok/s: each format in its own phase, one after the other — not paired, the machine's load moves "
        "between them; V(k) and the n-gram speed-up are ratios within a phase. `spectui prove --formats-table` "
        "pairs every plain format with one baseline"
    )
    return "\n".join(lines) + "\n"


def table_markdown(rows: list[FormatRow], ks: tuple[int, ...] = (2, 4, 8)) -> str:
    """The same table in Markdown (docs, the README)."""
    head, body = _cells(rows, ks)
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
    return "\n".join(out) + "\n"


@dataclass
class FormatsLesson:
    """What `spectui formats` keeps: the model, how it was measured, the rows and the recommendation."""

    model: str
    rows: list[FormatRow]
    settings: dict = field(default_factory=dict)  # tokens, prompts, runs, threads, ks, date, machine
    recommendation: Recommendation | None = None

    def to_json(self) -> dict:
        rec = self.recommendation or recommend(self.rows)
        return {
            "kind": "spectui-formats",
            "version": 1,
            "model": self.model,
            "settings": self.settings,
            "rows": [r.to_json() for r in self.rows],
            "recommendation": rec.to_json(),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2) + "\n"

    @classmethod
    def from_json(cls, d: object) -> FormatsLesson:
        """A kept table; ValueError naming what is wrong with a damaged or foreign file."""
        if not isinstance(d, dict) or d.get("kind") != "spectui-formats":
            raise ValueError("not a spectui formats table (its kind is not spectui-formats)")
        try:
            rows = [FormatRow.from_json(r) for r in d["rows"]]
            rec_d = d.get("recommendation")
            rec = Recommendation(**rec_d) if isinstance(rec_d, dict) else None
        except (KeyError, TypeError) as exc:
            raise ValueError(f"a damaged formats table: {exc}") from None
        return cls(str(d.get("model", "")), rows, dict(d.get("settings") or {}), rec)
