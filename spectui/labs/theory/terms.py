"""The formula checked against a run: the cost terms (measured by labs.theory.costs, or the ideal's),
the run's own steps, and the prediction beside the measured speed-up with the term that misses.

A speculative step that drafts d tokens costs, in target decode steps (t = 1):

    n_dec(d)·c  +  V(d + 1)  +  R(d + 1)

c is a draft decode step over a target decode step; n_dec(d) the draft decodes the step makes: llama.cpp's
draft-simple decodes the last sampled token, then each drafted token but the one that reaches n_max, so
d + 1 where the draft stopped early (its top token under p_min) and d where it reached n_max
(common/speculative.cpp, common_speculative_impl_draft_simple::draft); V(k) the target's cost to verify k
tokens in one batch; R(k) what the drafter spends on the verified batch afterwards — llama.cpp re-runs the
draft model on every batch the target decoded (server-context.cpp, common_speculative_process after each
decode, TAG_SPEC_AVOID_DRAFT_REEVAL), 0 for n-gram drafting. A step with an empty draft (plain) costs
n_dec(0)·c + V(1) + R(1), V(1) = 1. Leviathan's formula assumes V(k) = 1 and R = 0: S = E / (γc + 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spectui.core.stats import ratio_interval
from spectui.core.terms_table import outside_note, predicted_words
from spectui.labs.theory.formula import real_gamma_tokens, tokens_per_step
from spectui.labs.theory.steps import RunSteps, run_steps


@dataclass(frozen=True)
class StepCosts:
    """The cost terms in target decode steps: c, V(k) and R(k) for k = 1 … len(verify); each either
    measured or the ideal formula's assumption, as `sources` says (keys "c", "verify", "reeval")."""

    c: float
    verify: tuple[float, ...]  # V(1), V(2), …
    reeval: tuple[float, ...] = ()  # R(1), R(2), …; empty: none (n-gram drafting, or the ideal's R = 0)
    sources: dict = field(default_factory=dict)
    draft_model: bool = True  # n_dec counts draft-model decodes (n-gram drafting decodes nothing: c = 0)

    @classmethod
    def ideal(cls, c: float, why: str = "") -> StepCosts:
        note = f"ideal{': ' + why if why else ''}"
        return cls(c, (1.0,), (), {"c": note, "verify": "ideal: V(k) = 1", "reeval": "ideal: R = 0"})

    @property
    def measured_k(self) -> int:
        return len(self.verify)

    @property
    def none_measured(self) -> bool:
        """No term was measured: each is the ideal formula's assumption or a known value (theory --from S
        --no-measure; a vLLM or SGLang pair, whose servers report no prompt timings; n-gram's c = 0)."""
        return bool(self.sources) and not any(str(v).startswith("measured") for v in self.sources.values())

    def V(self, k: float) -> float:
        return _curve(self.verify, k)

    def R(self, k: float) -> float:
        return _curve(self.reeval, k) if self.reeval else 0.0

    def draft_decodes(self, d: float, n_max: float | None) -> float:
        if not self.draft_model:
            return 0.0
        if n_max is not None and d >= n_max:
            return d
        return d + 1

    def step(self, d: float, n_max: float | None = None) -> float:
        """One step drafting d tokens (d = 0: a plain step after an empty draft). `n_max`: the limit that
        step drafted under (the server's n_max, or the cap n_remaining − 1 near the end where lower): a
        draft that reaches it stops without decoding its last token (common/speculative.cpp:439-443)."""
        return self.draft_decodes(d, n_max) * self.c + self.V(d + 1) + self.R(d + 1)

    def undrafted_step(self) -> float:
        """The step for the last token: n_remaining − 1 = 0, so no draft call at all
        (server-context.cpp:517-536): no draft decode."""
        return self.V(1) + self.R(1)

    def full_step(self, gamma: float) -> float:
        """A step that drafts all γ of its n_max = γ (the formula's step): γ·c + V(γ+1) + R(γ+1)."""
        return (gamma * self.c if self.draft_model else 0.0) + self.V(gamma + 1) + self.R(gamma + 1)

    def speedup(self, alpha: float, gamma: int) -> float:
        """S(α, γ) with these costs: E / (γc + V(γ+1) + R(γ+1))."""
        return tokens_per_step(min(alpha, 0.999999), gamma) / self.full_step(gamma)

    def to_json(self) -> dict:
        return {
            "c": self.c,
            "verify": {str(k): v for k, v in enumerate(self.verify, 1)},
            "reeval": {str(k): v for k, v in enumerate(self.reeval, 1)} if self.reeval else None,
            "sources": dict(self.sources),
        }


def _curve(values: tuple[float, ...], k: float) -> float:
    """values[k−1] (1-based k); linear between measured k, and along the last two beyond them."""
    n = len(values)
    if n == 1 or k <= 1:
        return values[0]
    x0 = n - 1 if k >= n else int(k)
    y0, y1 = values[x0 - 1], values[x0]
    return y0 + (y1 - y0) * (k - x0)


@dataclass(frozen=True)
class Term:
    """One row of the terms table: what the ideal formula assumes, what was measured, and the speed-up
    predicted once this term (and the ones above it) take their measured value."""

    name: str
    ideal: str
    measured: str
    speedup: float
    source: str

    def to_json(self) -> dict:
        return {
            "term": self.name,
            "ideal": self.ideal,
            "measured": self.measured,
            "speedup": self.speedup,
            "source": self.source,
        }


@dataclass(frozen=True)
class TheoryCheck:
    """The formula filled from measured terms, beside the measured speed-up: agree, or the term that misses."""

    alpha: float  # per position (Σ α^i over γ positions = accepted/steps)
    gamma: float  # drafted per verification step
    tokens_per_step: float  # E, from per-position acceptance
    by_position: tuple[float, ...] | None
    by_position_source: str
    costs: StepCosts
    terms: tuple[Term, ...]  # the ideal, then one measured term at a time
    predicted: float
    predicted_range: tuple[float, float] | None  # over the repeated measurements of the terms
    measured: float
    measured_low: float | None
    measured_high: float | None
    runs: int
    step_measured: float  # target steps a verification step took in the run (plain steps at their cost)
    step_predicted: float
    agree: bool | None  # None: no interval to judge by (one run) and the terms' range says nothing either
    miss: str | None  # which term misses and by how much, where they disagree
    agreement: str | None  # how they agree, where they do
    best_gamma: int | None
    best_speedup: float | None
    break_even_alpha: float | None
    break_even_c: float | None
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {
            "alpha_per_position": self.alpha,
            "gamma": self.gamma,
            "tokens_per_step": self.tokens_per_step,
            "accepted_by_position": list(self.by_position) if self.by_position else None,
            "accepted_by_position_source": self.by_position_source,
            "draft_cost_c": self.costs.c,
            "verification_cost": {str(k): v for k, v in enumerate(self.costs.verify, 1)},
            "draft_reevaluation_cost": (
                {str(k): v for k, v in enumerate(self.costs.reeval, 1)} if self.costs.reeval else None
            ),
            "sources": dict(self.costs.sources),
            "terms": [t.to_json() for t in self.terms],
            "ideal_speedup": self.terms[0].speedup if self.terms else None,
            "predicted_speedup": self.predicted,
            "predicted_range": list(self.predicted_range) if self.predicted_range else None,
            "measured_speedup": self.measured,
            "measured_low": self.measured_low,
            "measured_high": self.measured_high,
            "runs": self.runs,
            "step_cost_measured": self.step_measured,
            "step_cost_predicted": self.step_predicted,
            "agree": self.agree,
            "agreement": self.agreement,
            "miss": self.miss,
            "best_gamma": self.best_gamma,
            "best_speedup": self.best_speedup,
            "break_even_alpha": self.break_even_alpha,
            "break_even_c": self.break_even_c,
            "notes": list(self.notes),
        }

    def text(self) -> str:
        """The lesson's report: what was measured, the terms table, the prediction against the measured
        speed-up and which term misses, the best γ and the break-even points."""
        lines = self._measured_lines()
        lines.append("")
        w = max(len(t.name) for t in self.terms)
        lines.append(f"  {'term':<{w}}  {'ideal':<14} {'measured':<22} speed-up")
        for t in self.terms:
            lines.append(f"  {t.name:<{w}}  {t.ideal:<14} {t.measured:<22} {t.speedup:.2f}×")
        lines += self._verdict_lines() + self._break_even_lines()
        lines += list(self.notes)
        return "\n".join(lines)

    def _measured_lines(self) -> list[str]:
        """α, γ and E of the run, its acceptance by position, and the cost terms with where each came from."""
        lines = [
            f"α = {self.alpha:.3f} per position ({self.by_position_source}), γ = {self.gamma:.2f} drafted per step, "
            f"E = {self.tokens_per_step:.2f} tokens per step",
        ]
        if self.by_position:
            lines.append(
                "accepted at position i (share of steps): "
                + " ".join(f"{i}:{v:.2f}" for i, v in enumerate(self.by_position, 1))
            )
        c = self.costs
        ks = " ".join(f"{k}:{v:.2f}" for k, v in enumerate(c.verify, 1))
        lines += [
            f"draft cost c = {c.c:.3f} target steps per draft decode [{c.sources.get('c', '?')}]",
            f"verification V(k) in target steps, k = 1…{len(c.verify)}: {ks} [{c.sources.get('verify', '?')}]",
        ]
        if c.reeval:
            lines.append(
                "draft re-evaluation R(k): "
                + " ".join(f"{k}:{v:.2f}" for k, v in enumerate(c.reeval, 1))
                + f" [{c.sources.get('reeval', '?')}]"
            )
        else:
            lines.append(f"draft re-evaluation R(k) = 0 [{c.sources.get('reeval', '?')}]")
        return lines

    def _verdict_lines(self) -> list[str]:
        """The prediction beside the measured speed-up (interval, step cost) and whether the terms explain it."""
        c = self.costs
        meas = (
            f"{self.measured:.2f}× [{self.measured_low:.2f}–{self.measured_high:.2f}] over {self.runs} runs "
            f"(width {self.measured_high - self.measured_low:.2f}×)"
            if self.measured_low is not None and self.measured_high is not None
            else f"{self.measured:.2f}× (1 run: no interval)"
        )
        # with nothing measured the terms are the ideal formula's: say so, never "the measured terms"
        what = "the ideal formula's terms (none measured)" if c.none_measured else "the measured terms"
        lines = [
            "",
            f"predicted from {what}: {predicted_words(self.predicted, self.predicted_range)}",
            f"measured:                          {meas}",
            f"a step took {self.step_measured:.2f} target steps in the run; {what} add up to {self.step_predicted:.2f}",
        ]
        if note := outside_note(self.predicted, self.predicted_range):
            lines.append(note)
        if c.none_measured:  # the ideal's terms explain nothing: they were assumed, not measured
            lines.append("nothing measured: the ideal formula beside the measured speed-up, not a test of it")
        elif self.agree:
            lines.append(f"{what} account for the measured speed-up ({self.agreement})")
        elif self.miss:
            lines.append(self.miss.replace("the measured terms", what))
        return lines

    def _break_even_lines(self) -> list[str]:
        """The best γ on the measured cost curve, and the α and draft cost at which speculation breaks even."""
        c = self.costs
        lines = []
        if self.best_gamma is not None:
            lines.append(
                f"best γ from the measured cost curve (γ ≤ {self.costs.measured_k - 1}): {self.best_gamma} "
                f"(S {self.best_speedup:.2f}× at α {self.alpha:.2f})"
            )
        be = self.break_even_alpha
        lines.append(
            f"break-even α at γ = {round(self.gamma)} with "
            + ("the ideal costs (c = 0, V = 1, R = 0 assumed): " if c.none_measured else "the measured costs: ")
            + (f"{be:.3f}" if be is not None else "none — no acceptance rate pays at these costs")
        )
        if self.break_even_c is not None:
            lines.append(
                f"break-even draft cost at this α and γ: c = {self.break_even_c:.3f}"
                if self.break_even_c >= 0
                else "break-even draft cost at this α and γ: none — verification alone costs more than the "
                "tokens a step yields"
            )
        return lines


def check(
    run: RunSteps,
    costs: StepCosts,
    measured: float,
    low: float | None = None,
    high: float | None = None,
    runs: int = 1,
    costs_each: list[StepCosts] | None = None,
) -> TheoryCheck:
    """The predicted speed-up from the measured terms (the run's own steps and acceptance, the measured
    costs), beside the measured one; where they disagree beyond the measured interval, the term that
    misses, from the run's own step times (never by fitting c)."""
    gamma, alpha, E = run.gamma, run.alpha, run.tokens_per_step
    a = min(alpha, 0.999999)
    g_int = max(1, round(gamma))
    terms, ideal_E, cost, predicted = _term_ladder(run, costs, gamma, a, g_int)
    rng = _predicted_range(run, costs_each)
    groups = run.steps + run.plain
    step_meas = (run.tokens / measured) / groups if measured > 0 and groups else float("nan")
    step_pred = cost / groups if groups else float("nan")
    agree, how, untested = _agreement(predicted, rng, low, high, ideal_E, costs.none_measured)
    miss = None if agree or untested else _which_term(run, costs, measured, predicted, low, high)
    best, be_alpha, be_c = _best_and_break_even(costs, a, gamma, g_int)
    notes = [untested] if untested else []
    notes += _edge_notes(run, costs)
    return TheoryCheck(
        alpha,
        gamma,
        E,
        run.by_position,
        run.by_position_source,
        costs,
        tuple(terms),
        predicted,
        rng,
        measured,
        low,
        high,
        runs,
        step_meas,
        step_pred,
        agree,
        miss,
        how,
        best[0] if best else None,
        best[1] if best else None,
        be_alpha,
        be_c,
        tuple(notes),
    )


def _predicted_range(run: RunSteps, costs_each: list[StepCosts] | None) -> tuple[float, float] | None:
    """The prediction's range over the terms' repeats (each repeat's costs alone), where they were kept."""
    each = [run.tokens / run.cost(ce) for ce in costs_each or [] if run.cost(ce) > 0]
    return (min(each), max(each)) if each else None


def _best_and_break_even(costs: StepCosts, a: float, gamma: float, g_int: int):
    """The best (γ, S) on the measured cost curve (None: one k measured), the break-even α at γ, and the
    break-even draft cost c at this α and γ (None: no draft model)."""
    best = None
    if costs.measured_k > 1:
        best = max(((g, costs.speedup(a, g)) for g in range(1, costs.measured_k)), key=lambda t: t[1])
    be_c = None
    if costs.draft_model:
        be_c = (real_gamma_tokens(a, gamma) - costs.V(gamma + 1) - costs.R(gamma + 1)) / gamma
    return best, _break_even_alpha(costs, g_int), be_c


def _agreement(
    predicted: float,
    rng: tuple[float, float] | None,
    low: float | None,
    high: float | None,
    ideal: float,
    none_measured: bool,
) -> tuple[bool | None, str | None, str | None]:
    """Whether the prediction (or its range over the terms' repeats) meets the measured interval, and how;
    None where one run gives no interval, or where the interval also holds the ideal formula's speed-up (then
    why the prediction was not tested)."""
    how = None
    if low is not None and high is not None:
        agree: bool | None = low <= predicted <= high or (rng is not None and rng[0] <= high and low <= rng[1])
        if agree:
            how = (
                "the prediction is inside the measured interval"
                if low <= predicted <= high
                else "the prediction's range over the terms' repeats overlaps the measured interval"
            )
    else:  # one run: no interval to judge by; the gap is still explained, not judged
        agree = None
    if agree and low is not None and high is not None and low <= ideal <= high and not none_measured:
        # an interval that holds the ideal formula's speed-up too could not have told the terms from the ideal
        untested = (
            f"too few runs to test the prediction: the measured interval {low:.2f}–{high:.2f}× (width "
            f"{high - low:.2f}×) also holds the ideal formula's {ideal:.2f}×"
        )
        return None, None, untested
    return agree, how, None


def _term_ladder(run: RunSteps, costs: StepCosts, gamma: float, a: float, g_int: int):
    """The formula's terms added one at a time, each with its speed-up; the ideal E, the run's cost, S."""
    ideal_E = real_gamma_tokens(a, gamma)
    src = costs.sources
    terms = [Term("ideal (c = 0, V = 1, R = 0)", "—", f"α {run.alpha:.2f}, γ {gamma:.2f}", ideal_E, "Leviathan et al.")]
    s_c = ideal_E / (gamma * costs.c + 1) if costs.draft_model else ideal_E
    terms.append(Term("draft cost c", "c as given", f"c = {costs.c:.3f}", s_c, src.get("c", "")))
    v = costs.V(gamma + 1)
    step_v = (gamma * costs.c if costs.draft_model else 0.0) + v
    terms.append(
        Term(
            f"verification V({gamma + 1:.1f})",
            "1 target step",
            f"{v:.2f} target steps",
            ideal_E / step_v,
            src.get("verify", ""),
        )
    )
    r = costs.R(gamma + 1)
    terms.append(
        Term("draft re-evaluation R", "0", f"{r:.2f} target steps", ideal_E / (step_v + r), src.get("reeval", ""))
    )
    cost = run.cost(costs)
    predicted = run.tokens / cost if cost > 0 else float("inf")
    steps_source = f"draft lengths as drafted, acceptance per position from {run.by_position_source}" + (
        f", {costs.draft_decodes(g_int, run.n_max):.0f} draft decodes a full step" if costs.draft_model else ""
    )
    terms.append(
        Term("the run's own steps", "all γ drafted", f"{run.steps} steps, {run.plain} plain", predicted, steps_source)
    )
    return terms, ideal_E, cost, predicted


def _edge_notes(run: RunSteps, costs: StepCosts) -> list[str]:
    """What the prediction charges as the server runs it: capped drafts, final steps undrafted, n-gram as free."""
    notes: list[str] = []
    capped = sum(1 for d, cap in zip(run.drafted, run.caps, strict=False) if cap is not None and d >= cap)
    if capped or run.undrafted:  # the server's edges, charged as it runs them
        notes.append(
            f"edges charged as llama-server runs them: {capped} draft(s) capped at n_remaining − 1 without the "
            f"last decode, {run.undrafted} final step(s) with no draft call (server-context.cpp:517-536)"
        )
    if not costs.draft_model:
        notes.append("n-gram drafting: no draft model runs; the lookup in the token history is taken as free (c = 0)")
    return notes


def _break_even_alpha(costs: StepCosts, gamma: int, tol: float = 1e-9) -> float | None:
    if (gamma + 1) / costs.full_step(gamma) <= 1:
        return None
    if costs.speedup(0.0, gamma) >= 1:
        return 0.0
    lo, hi = 0.0, 1.0 - 1e-12
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if costs.speedup(mid, gamma) < 1:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _which_term(
    run: RunSteps, costs: StepCosts, measured: float, predicted: float, low: float | None, high: float | None
) -> str:
    """Where prediction and measurement part: the run's own step times (arrival of each step's tokens)
    split the missing time into a part that grows with the drafted count and a fixed part per step, and
    that names the term: per drafted token (the draft decodes c and the slope of V and R) or per step (a
    fixed cost no measured term holds)."""
    groups = run.steps + run.plain
    t_meas = run.tokens / measured
    t_pred = run.cost(costs)
    gap = (t_meas - t_pred) / groups  # target steps per step group
    where = "above" if predicted > measured else "below"
    bound = f"the interval [{low:.2f}–{high:.2f}]" if low is not None else f"the measured {measured:.2f}×"
    head = (
        f"the prediction {predicted:.2f}× is {where} {bound}: a step took {t_meas / groups:.2f} target steps, the "
        f"measured terms add up to {t_pred / groups:.2f} ({gap:+.2f}, {gap / (t_pred / groups):+.0%})"
    )
    d, t = run.group_d, run.group_t
    if len(d) < 3 or len(set(d)) < 2 or len(t) != len(d):
        return (
            head
            + "; the run's steps all drafted alike, so the missing time cannot be split into per token and per step"
        )
    import numpy as np  # lazy: numpy (~0.5 s) only for this fit; the TUI's theory screen imports terms

    ms = np.asarray(t, dtype=float)
    unit = ms.sum() / t_meas  # ms of one target step, so that the groups' times add up to the run's decode time
    dd = np.asarray(d, dtype=float)
    pred = np.asarray([costs.step(x, run.n_max) for x in d])
    resid = ms / unit - pred
    slope, fixed = np.polyfit(dd, resid, 1)
    spec = dd > 0
    mean_d = float(dd[spec].mean()) if spec.any() else 0.0
    per_token = costs.c * (1 if costs.draft_model else 0) + (costs.V(mean_d + 2) - costs.V(mean_d)) / 2
    per_token += (costs.R(mean_d + 2) - costs.R(mean_d)) / 2
    if abs(fixed) >= abs(slope) * mean_d:
        return (
            head + f"; in the run's own step times the missing time is a fixed {fixed:+.2f} target steps "
            f"({fixed * unit:+.1f} ms) per step, {slope:+.3f} per drafted token: the term that misses is a fixed "
            "cost per step, which no measured term (c, V, R) holds"
        )
    return (
        head + f"; in the run's own step times it grows by {slope:+.3f} target steps per drafted token "
        f"(the measured terms charge {per_token:.3f}: c and the slope of V and R), {fixed:+.2f} fixed per step: "
        f"the term that misses is the cost per drafted token, off by {slope / per_token:+.0%}"
        if per_token > 0
        else head + f"; it grows by {slope:+.3f} target steps per drafted token: the cost per drafted token misses"
    )


def check_runs(runs, costs: StepCosts, costs_each: list[StepCosts] | None = None) -> TheoryCheck | None:
    """check() for the N runs of one prompt (core.runner.PromptResult): the run's steps from the last run
    that finished (acceptance at temperature 0 is the same each run), the measured speed-up as the median
    of the runs' ratios with its 95 % interval (core.stats). None where no run drafted or finished."""
    done = [r for r in runs if r.speedup]
    if not done:
        return None
    steps = run_steps(done[-1].candidate)
    if steps is None:
        return None
    spread = ratio_interval([r.speedup for r in done])
    return check(steps, costs, spread.median, spread.low, spread.high, len(done), costs_each)
