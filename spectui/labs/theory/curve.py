"""The cost curve: the times the formula's terms are made of (ms, as the servers timed them), repeated, and the
terms read from them (labs.theory.costs measures it; labs.theory.outputs adds every position's outputs; the
sweep's prediction and the kept record read it)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from spectui.backends.spectypes import SPEC_TYPES, chain_of
from spectui.core.errors import InputError
from spectui.labs.theory.terms import StepCosts

DRAFT_MODEL, NGRAM, OTHER, NONE = "draft model", "n-gram", "other", "none"


@dataclass(frozen=True)
class Samples:
    """Repeated measurements of one time, in ms."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def at(self, i: int) -> float:
        return self.values[i % len(self.values)]

    def to_json(self) -> dict:
        return {"median_ms": self.median, "ms": list(self.values)}


@dataclass
class CostCurve:
    """The raw measurements (ms, as the servers timed them) and the cost terms made of them."""

    context: int  # tokens in the cached prefix the batches were measured on
    repeats: int
    target_step: Samples | None  # one plain decode step of the target (the baseline)
    target_batch: dict[int, Samples]  # k → prompt_ms for k tokens on the baseline
    draft_step: Samples | None = None  # the draft model's decode step on its own server
    draft_batch: dict[int, Samples] | None = None  # k → its prompt_ms for k tokens
    candidate_batch: dict[int, Samples] | None = None  # k → the candidate's prompt_ms for k tokens
    drafting: str = DRAFT_MODEL
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    left_out: int = 0  # replies whose cache_n/prompt_n were not what was asked
    output_extra: dict[int, Samples] | None = None  # k → ms all k positions' outputs add (labs.theory.outputs)
    draft_decode: Samples | None = None  # the draft's decode as the candidate runs it (probe): c's numerator

    @property
    def ks(self) -> list[int]:
        return sorted(self.target_batch)

    @property
    def measured(self) -> bool:
        return self.target_step is not None and 1 in self.target_batch and len(self.target_batch) > 1

    def target_ms(self, k: float, i: int | None = None) -> float:
        """A target batch of k tokens as the server verifies it: the prompt batch's time plus what every
        position's outputs add, where the probe measured it."""
        extra = _interp(self.output_extra, k, i) if self.output_extra and k > 1 else 0.0
        return _interp(self.target_batch, k, i) + extra

    def prompt_batch_ms(self, k: float, i: int | None = None) -> float:
        """A target batch of k tokens with its last position's logits only (llama-server's prompt_ms)."""
        return _interp(self.target_batch, k, i)

    def draft_ms(self, k: float, i: int | None = None) -> float:
        # never below 0: a head's R(k) is a difference of two batch times (labs.theory.head_cost)
        return max(0.0, _interp(self.draft_batch, k, i)) if self.draft_batch else 0.0

    def step_ms(self, i: int | None = None) -> float:
        assert self.target_step is not None
        return self.target_step.median if i is None else self.target_step.at(i)

    def c(self, i: int | None = None) -> float | None:
        if self.drafting == NGRAM:
            return 0.0
        own = self.draft_decode or self.draft_step
        if own is None or self.target_step is None:
            return None
        d = own.median if i is None else own.at(i)
        return d / self.step_ms(i)

    def terms(self, i: int | None = None, k_max: int | None = None) -> StepCosts:
        """The cost terms in target steps, k = 1 … k_max (the largest k measured by default): from the
        medians, or from repeat i alone."""
        if not self.measured:
            ideal = StepCosts.ideal(0.0).sources
            sources = {key: self.sources.get(key, ideal[key]) for key in ("c", "verify", "reeval")}
            c = self.c(i) if self.target_step is not None else (0.0 if self.drafting == NGRAM else None)
            if c is None:
                sources["c"] += "; c = 0 assumed (a free draft): the prediction is an upper bound"
            return StepCosts(c or 0.0, (1.0,), (), sources, draft_model=self.drafting != NGRAM)
        t = self.step_ms(i)
        top = k_max or max(self.ks)
        b1 = self.target_ms(1, i)
        verify = tuple(1 + (self.target_ms(k, i) - b1) / t for k in range(1, top + 1))
        reeval: tuple[float, ...] = ()
        if self.draft_batch and self.drafting in (DRAFT_MODEL, OTHER):  # OTHER: a head's, labs.theory.head_cost
            reeval = tuple(self.draft_ms(k, i) / t for k in range(1, top + 1))
        c = self.c(i)
        sources = dict(self.sources)
        if c is None:
            sources["c"] = (
                sources.get("c", "not measured") + "; c = 0 assumed (a free draft): the prediction is an upper bound"
            )
            c = 0.0
        return StepCosts(c, verify, reeval, sources, draft_model=self.drafting != NGRAM)

    def terms_each(self, k_max: int | None = None) -> list[StepCosts]:
        return [self.terms(i, k_max) for i in range(self.repeats)] if self.measured else []

    def to_json(self) -> dict:
        def batch(d):
            return {str(k): s.to_json() for k, s in sorted(d.items())} if d else None

        return {
            "context_tokens": self.context,
            "repeats": self.repeats,
            "target_step": self.target_step.to_json() if self.target_step else None,
            "target_batch": batch(self.target_batch),
            "draft_step": self.draft_step.to_json() if self.draft_step else None,
            "draft_batch": batch(self.draft_batch),
            "candidate_batch": batch(self.candidate_batch),
            "drafting": self.drafting,
            "sources": dict(self.sources),
            "notes": list(self.notes),
            "left_out": self.left_out,
            "output_extra": batch(self.output_extra),
            "draft_decode": self.draft_decode.to_json() if self.draft_decode else None,
        }

    @classmethod
    def from_json(cls, d: dict) -> CostCurve:
        """The curve as to_json wrote it (a certificate's or a session's recorded terms): the raw times, from
        which terms() gives the same c, V(k) and R(k) again."""

        def samples(x, key: str) -> Samples | None:
            return _samples(x, key) if x else None

        def batch(x, key: str, signed: bool = False) -> dict[int, Samples] | None:
            if not x:
                return None
            if not isinstance(x, dict) or len(x) > K_MAX:
                raise InputError(f"the terms' {key} is not a table of at most {K_MAX} batch sizes")
            out = {}
            for k, s in x.items():
                kk = int(k) if isinstance(k, str) and k.isdigit() and len(k) < 7 else None
                if kk is None or not 1 <= kk <= K_MAX:
                    raise InputError(f"the terms' {key} has a batch of {str(k)[:20]!r} tokens, not 1 … {K_MAX}")
                out[kk] = _samples(s, f"{key}[{kk}]", signed)
            return out

        if not isinstance(d, dict):
            raise InputError("the terms' measurement is not an object")
        repeats = d.get("repeats")
        if not isinstance(repeats, int) or isinstance(repeats, bool) or not 0 <= repeats <= SAMPLES_MAX:
            raise InputError(f"the terms' repeats is {str(repeats)[:20]!r}, not a whole number 0 … {SAMPLES_MAX}")
        step = samples(d.get("target_step"), "target_step")
        if step is not None and min(step.values) <= 0:
            raise InputError("the terms' target_step is 0 ms: no time a step can be measured in")
        return cls(
            context=int(d.get("context_tokens") or 0),
            repeats=repeats,
            target_step=step,
            target_batch=batch(d.get("target_batch"), "target_batch") or {},
            draft_step=samples(d.get("draft_step"), "draft_step"),
            draft_batch=batch(d.get("draft_batch"), "draft_batch"),
            candidate_batch=batch(d.get("candidate_batch"), "candidate_batch"),
            drafting=str(d.get("drafting", DRAFT_MODEL)),
            sources=dict(d.get("sources") or {}),
            notes=list(d.get("notes") or []),
            left_out=int(d.get("left_out") or 0),
            # a difference of two measured times (every position's outputs less the last's): noise can make it
            # negative, so it is bounded in size, not in sign
            output_extra=batch(
                d.get("output_extra"), "output_extra", signed=True
            ),  # absent in terms recorded before it was
            draft_decode=samples(d.get("draft_decode"), "draft_decode"),
        )


K_MAX = 512  # the largest batch the probes measure is a few dozen tokens; a stored k beyond this is tampered
SAMPLES_MAX = 1000  # repeats of one time
TIME_MAX_MS = 3.6e6  # an hour for one batch: beyond it a stored time is not a measurement


def _samples(x, key: str, signed: bool = False) -> Samples:
    """Recorded times (ms): a list of 1 … SAMPLES_MAX finite numbers below an hour, none negative (a
    `signed` difference of two times lies within an hour either way)."""
    ms = x.get("ms") if isinstance(x, dict) else None
    if not isinstance(ms, list) or not 1 <= len(ms) <= SAMPLES_MAX:
        raise InputError(f"the terms' {key} holds no list of 1 … {SAMPLES_MAX} times (ms)")
    low = -TIME_MAX_MS if signed else 0
    for v in ms:
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float))
            or not math.isfinite(v)
            or not low <= v <= TIME_MAX_MS
        ):
            raise InputError(
                f"the terms' {key} holds the time {str(v)[:20]!r} ms, not a number {low:g} … {TIME_MAX_MS:g}"
            )
    return Samples(tuple(float(v) for v in ms))


def _interp(table: dict[int, Samples] | None, k: float, i: int | None) -> float:
    """A batch time at k tokens: measured, or linear between the nearest measured k (along the last two
    beyond them)."""
    assert table
    ks = sorted(table)

    def val(x: int) -> float:
        return table[x].median if i is None else table[x].at(i)

    if k in table:
        return val(int(k))
    if len(ks) == 1:
        return val(ks[0])
    lo = max((x for x in ks if x <= k), default=ks[0])
    hi = min((x for x in ks if x > k), default=ks[-1])
    if lo == hi:  # beyond the measured range: along the last (or first) two
        lo, hi = (ks[-2], ks[-1]) if k > ks[-1] else (ks[0], ks[1])
    return val(lo) + (val(hi) - val(lo)) * (k - lo) / (hi - lo)


def drafting_kind(types: str | None) -> str:
    """llama.cpp's speculation types as a request reports them ('none,draft-simple', 'ngram-simple')."""
    used = [t for t in str(types or "").split(",") if t and t != "none"]
    if not used:
        return NONE
    if all(t.startswith("ngram") for t in used):
        return NGRAM
    if any(t == "draft-simple" for t in used):
        return DRAFT_MODEL
    return OTHER  # EAGLE-3, MTP, DFlash: a head inside the target, not a model spectui can run on its own


def other_words(types: str | None) -> str | None:
    """For a drafter spectui cannot time on its own (EAGLE-3, MTP, DFlash, DSpark), what each of its types
    drafts with and needs (backends.spectypes), one line; None where the chain holds none of them."""
    named = [
        SPEC_TYPES[t] for t in chain_of(types) if t in SPEC_TYPES and t.startswith("draft-") and t != "draft-simple"
    ]
    if not named:
        return None
    return "; ".join(f"{t.name} drafts with {t.drafts_with} (needs {t.needs}; served by {t.servers})" for t in named)


def is_local(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    return host in ("127.0.0.1", "localhost", "::1")
