"""Triage's evidence from the streams' own computation: each side's request again with n_probs, kept where it
reproduces the stream to the divergence (the same computation as the stream, not the position asked apart), and
the cause it names — a choice the candidate's verification batch flipped, with both margins, or a near-tie in a
side's own decode. llama.cpp gives no probabilities for verified tokens (tools/server/server-context.cpp,
"TODO: set result.probs"); where a side gives none, run.triage goes on with the evidence asked apart, labelled.
"""

from __future__ import annotations

import dataclasses

from spectui.core.errors import describe
from spectui.core.figures import SideRecorder
from spectui.core.runner import PromptResult
from spectui.core.types import SIDES


def cached(rec: SideRecorder) -> int:
    return rec.figures.prompt_cached or 0


def margins(top: list[tuple], chosen_b: int | None, chosen_c: int | None) -> tuple[float | None, bool]:
    """log p(baseline's token) − log p(candidate's token) in one side's top list; (value, exact)."""
    by_id = {t[0]: t[2] for t in top if t[0] is not None}
    lb, lc = by_id.get(chosen_b), by_id.get(chosen_c)
    if lb is not None and lc is not None:
        return lb - lc, True
    if top and (lb is not None or lc is not None):
        floor = min(t[2] for t in top)  # the missing one is at most the smallest listed
        return ((lb - floor) if lb is not None else (floor - lc)), False
    return None, False


def same_top_tokens(evidence: dict) -> bool:
    """Both sides' top tokens asked apart are the same, in the same order, with the same log-probabilities as
    printed (3 decimals): the two servers answer the position alike."""
    b, c = evidence.get("baseline") or [], evidence.get("candidate") or []
    return bool(b) and bool(c) and [(t, f"{lp:.3f}") for t, lp in b] == [(t, f"{lp:.3f}") for t, lp in c]


async def own_decode(sides, result: PromptResult, text: dict, params, evidence: dict, notes: list[str]) -> None:
    """Each side's own probabilities at the divergent token: its request again with n_probs, kept only where
    it reproduces the stream's tokens up to and including that one (the same computation as the stream).
    Goes into evidence["own"][side] = {"tops": [[text, logprob]…], "ids", "margin": log p(baseline's token) −
    log p(candidate's token) or None, "exact": whether both were in the list}."""
    k = evidence["position"]
    own: dict = {}
    for name, (backend, orig) in sides.items():
        if name not in text or not backend.capabilities.logprobs or k >= len(orig.tokens):
            continue
        # the stream's own cache condition: a prompt it computed whole is computed whole again (a cached
        # prompt re-evaluates only its last token, in another shape)
        cold = backend.capabilities.cache_prompt_control and not cached(orig)
        own_params = dataclasses.replace(params, cache_prompt=False) if cold else params
        try:
            got = await backend.own_decode_logprobs(text[name], own_params, k + 1, 3)
        except Exception as exc:  # a server that cannot be asked this way: said, the probe's evidence stands
            notes.append(f"{name}: its own decode's probabilities unavailable ({describe(exc)})")
            continue
        if [i for i, _ in got[: k + 1]] != [t.token_id for t in orig.tokens[: k + 1]]:
            notes.append(f"{name}: its request again with n_probs did not reproduce its stream to token {k}: not used")
            continue
        top = got[k][1]
        if not top:
            notes.append(
                f"{name}: token {k} came from a verification step, for which llama.cpp gives no probabilities "
                "(server-context.cpp: 'TODO: set result.probs')"
            )
            continue
        m, exact = margins(top, evidence.get("baseline_token"), evidence.get("candidate_token"))
        own[name] = {
            "tops": [[tok, lp] for _id, tok, lp in top],
            "ids": [i for i, _tok, _lp in top],
            "margin": m,
            "exact": exact,
        }
    if own:
        evidence["own"] = own


def _verified(result: PromptResult, k: int) -> bool:
    """The candidate's token k came out of a verification batch (a step that drafted)."""
    toks = result.candidate.tokens
    return k < len(toks) and toks[k].step is not None


def _candidate_in_batch(evidence: dict) -> tuple[float, int] | None:
    """log p(candidate's token) − log p(baseline's token) in the candidate's target at M = k + 1 (the shape of
    a verification batch), where both are in that shape's top list: (margin, M)."""
    width = evidence.get("batch_width")
    wide = (evidence.get("batch_shapes") or {}).get("candidate", {}).get(str(width))
    if width is None or not wide or not wide.get("ids"):
        return None
    by_id = dict(zip(wide["ids"], (lp for _t, lp in wide["tops"])))
    b, c = evidence.get("baseline_token"), evidence.get("candidate_token")
    if b in by_id and c in by_id:
        return by_id[c] - by_id[b], int(width)
    return None


def own_finding(evidence: dict, result: PromptResult, threshold: float) -> tuple[str, str] | None:
    """The cause from a side's own decode (evidence["own"]), where one gives an exact margin: a choice the
    candidate's verification batch flipped (a near-tie under the threshold, else the batch shape), with both
    margins; or a near-tie between two plain decodes. None where no side's own decode gives an exact margin,
    or where the own evidence cannot tell (a plain candidate that chose apart by a clear margin)."""
    own = evidence.get("own") or {}
    k = evidence["position"]
    side = next((s for s in SIDES if own.get(s, {}).get("exact")), None)
    if side is None:
        return None
    m = abs(own[side]["margin"])
    b_text, c_text = _text_of(evidence, "baseline_token"), _text_of(evidence, "candidate_token")
    where = f"the {side}'s own decode (its stream's request with n_probs)"
    tie = m < threshold
    if side == "baseline" and _verified(result, k):
        other = _candidate_in_batch(evidence)
        theirs = (
            f"the candidate computed token {k} in a verification batch; its target asked in that shape (M = "
            f"{other[1]} on a cached prefix) puts {c_text} {other[0]:.3f} nats over {b_text}"
            if other is not None
            else f"the candidate computed token {k} in a verification batch, whose probabilities llama.cpp does "
            "not give"
        )
        what = "a near-tie" if tie else f"a close choice (over the {threshold:g}-nat near-tie threshold)"
        return (
            "near-tie" if tie else "batch shape",
            f"{what} the candidate's verification batch flipped: {where} puts {b_text} {m:.3f} nats over "
            f"{c_text} at token {k}; {theirs}",
        )
    if tie:
        return (
            "near-tie",
            f"the two chosen tokens were {m:.3f} nats apart at token {k} in {where} (under {threshold:g}): a "
            "numerical difference between two almost equally likely tokens",
        )
    theirs = own.get("candidate", {})
    drafted_before = any(t.step is not None for t in result.candidate.tokens[:k])
    if side == "baseline" and theirs.get("exact") and theirs["margin"] < 0 and drafted_before:
        mc = abs(theirs["margin"])
        close = f" (under {threshold:g}: a near-tie in the candidate's own computation)" if mc < threshold else ""
        return (
            "batch shape",
            f"each stream chose its own decode's first token at token {k}: {where} puts {b_text} {m:.3f} nats over "
            f"{c_text}, the candidate's own decode puts {c_text} {mc:.3f} over {b_text}{close}; the same model "
            "computed the position differently because the candidate's earlier tokens came out of verification "
            "batches, whose KV entries differ in their last bits from a one-token decode's",
        )
    return None


def _text_of(evidence: dict, key: str) -> str:
    """A chosen token's text as printed in the evidence (from any list that holds its id), else its id."""
    tid = evidence.get(key)
    lists = list((evidence.get("own") or {}).values())
    lists += [shape for per in (evidence.get("batch_shapes") or {}).values() for shape in per.values()]
    for got in lists:
        for i, (t, _lp) in zip(got.get("ids") or [], got.get("tops") or []):
            if i == tid:
                return repr(t)
    return f"token id {tid}"
