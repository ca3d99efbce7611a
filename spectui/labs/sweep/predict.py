"""The sweep's predicted speed-up at each concurrency level, from batch times measured after its last level
(labs.theory.costs): the collapse under concurrency, predicted beside the one the sweep measured."""

from __future__ import annotations

from spectui.core.errors import InputError
from spectui.labs.theory.costs import measure_on_servers
from spectui.labs.theory.curve import DRAFT_MODEL, NONE, OTHER, CostCurve, drafting_kind


def predict_level(curve: CostCurve, n: int, tokens_per_round: float, drafted_per_round: float, n_max=None) -> float:
    """The speed-up at concurrency n from the measured batch times, all n sequences stepping together
    (a round: each sequence makes one step). The baseline's round decodes n tokens in one batch:
    B(n) = 1 + (prompt_ms(n) − prompt_ms(1))/t. The candidate's round: its draft decodes (as llama.cpp
    counts them) each a batch of n on the draft model, c + (draft prompt_ms(n) − draft prompt_ms(1))/t;
    the target verifies n·(γ+1) tokens in one batch, V(n·(γ+1)); the draft re-evaluates them,
    R(n·(γ+1)). S(n) = E · B(n) / candidate round."""
    t = curve.step_ms()
    b1 = curve.target_ms(1)

    def batch(k: float) -> float:  # a target batch of k tokens, in target steps
        return 1 + (curve.target_ms(k) - b1) / t

    g = drafted_per_round
    k = n * (g + 1)
    cand = batch(k)
    c = curve.c()
    if curve.drafting == DRAFT_MODEL and c is not None:
        decodes = g if n_max is not None and g >= n_max else g + 1
        draft_batch = c + ((curve.draft_ms(n) - curve.draft_ms(1)) / t if curve.draft_batch else 0.0)
        cand += decodes * draft_batch + (curve.draft_ms(k) / t if curve.draft_batch else 0.0)
    return tokens_per_round * batch(n) / cand


async def predict_levels(levels, baseline, candidate, prompt_text: str, repeats: int = 5) -> CostCurve | None:
    """Measure the batch times the sweep's levels need (after every level ran: the baseline and a draft
    server of its own only, the candidate is sent nothing) and set each level's predicted speed-up, or
    the reason there is none."""

    def note_all(why: str) -> CostCurve | None:
        for lv in levels:
            lv.predicted, lv.predicted_note = None, why
        return None

    rounds, kinds = _rounds(levels)
    if not any(d for _, d, _ in rounds):
        return note_all("the candidate drafted nothing")
    if not baseline.capabilities.prompt_timings:
        return note_all(f"not predicted: the baseline ({baseline.kind}) reports no per-request prompt timings")
    kind = kinds.pop() if len(kinds) == 1 else OTHER
    out_ids = [t.token_id for r in levels[0].baseline.recorders[:1] for t in r.tokens]
    if any(i is None for i in out_ids):
        return note_all("not predicted: the baseline's stream gave no token ids")
    prompt_ids = await baseline.tokenize(prompt_text)
    need, n_max = _batches_needed(levels, rounds)
    ids = prompt_ids + [int(i) for i in out_ids]
    try:
        curve = await measure_on_servers(
            baseline.client,
            baseline,
            candidate,
            ids,
            len(prompt_ids) + len(out_ids) // 2,
            sorted(need),
            kind,
            repeats=repeats,
            check_candidate=False,
        )
    except InputError as exc:  # the candidate's own draft cannot be had: the levels measured stand, said why
        return note_all(f"not predicted: {exc.one_line()}")
    if not curve.measured:
        return note_all("not predicted: " + curve.sources.get("verify", "the batch times were not measured"))
    c = curve.c()
    label = f"c {c:.2f}" if c is not None else "c not measured: 0 assumed"
    for lv, (later, drafted, groups) in zip(levels, rounds):
        if not groups or not drafted:
            lv.predicted, lv.predicted_note = None, "no drafts at this level"
            continue
        lv.predicted = predict_level(curve, lv.concurrency, later / groups, drafted / groups, n_max)
        lv.predicted_note = f"{label}, batch {lv.concurrency}·(γ+1) = {lv.concurrency * (drafted / groups + 1):.0f}"
    levels[0].cost_terms = curve
    return curve


def _rounds(levels) -> tuple[list[tuple[int, int, int]], set[str]]:
    """Each level's candidate rounds: (tokens after the first, tokens drafted, rounds — verification steps
    and plain decodes), and the drafting kinds its streams report (none left out)."""
    rounds = []
    kinds = set()
    for lv in levels:
        recs = [r for r in lv.candidate.recorders if r.finished is not None]
        steps = sum(len(r.steps) for r in recs)
        drafted = sum(s.drafted for r in recs for s in r.steps)
        later = sum(max(0, len(r.tokens) - 1) for r in recs)
        accepted = sum(s.accepted for r in recs for s in r.steps)
        plain = max(0, later - accepted - steps)
        rounds.append((later, drafted, steps + plain))
        for r in recs:
            kinds.add(drafting_kind(r.finished.settings.get("speculative.types")))
    kinds.discard(NONE)
    return rounds, kinds


def _batches_needed(levels, rounds) -> tuple[set[int], float | None]:
    """The batch sizes to time (1, each level's n and n·(γ+1)) and the candidate's n_max where it says one."""
    n_max = None
    need = {1}
    for lv, (_, drafted, groups) in zip(levels, rounds):
        if groups:
            need |= {lv.concurrency, max(1, round(lv.concurrency * (drafted / groups + 1)))}
        for r in lv.candidate.recorders:
            v = r.finished.settings.get("speculative.n_max") if r.finished is not None else None
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
                n_max = v
    return need, n_max
