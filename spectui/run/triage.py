"""Divergence triage: when the outputs differ, run the experiments a careful person would, in order,
and say which explained it — with the evidence.

1. run-to-run: each side again under the same conditions; a side that does not reproduce itself is
   `nondeterminism` (which side, where it moved) — unless its rerun found a different prompt-cache state
   (with the cache on, a rerun finds its own prompt cached): then the cache step decides first;
2. cache: a side that reused prompt-cache tokens, recomputed without them (llama.cpp cache_prompt false
   and a slot erase where allowed, vLLM /reset_prefix_cache, SGLang /flush_cache); if it then equals
   the other side, the cause is `cache`;
3. lossy verification: the candidate's token at the divergence is an accepted draft that the target would
   not choose (its own top log-probability, asked without speculation, is another token by a margin at or
   over the threshold): the verifier is lossy by design, and the settings that make it so are named where
   spectui recognises them (backends.lossy);
4. near-tie: both sides' top log-probabilities at the divergent position, from the common prefix's
   token ids; an exact margin between the two chosen tokens under a threshold is `near-tie` (where a
   chosen token is missing from a side's top-k the margin is only a bound, "margin ≥ X", never a near-tie);
5. otherwise `configuration`: the two servers compute different distributions, with what differs.

A side whose settings promise determinism (vLLM's batch-invariant mode, SGLang's deterministic inference)
has the difference reported against that promise.

Reruns use recorders of their own: they never touch the run's figures, its session events or the
notebook. A step a side cannot do is said, and triage goes on with the rest.
"""

from __future__ import annotations

import dataclasses
import math

from spectui.backends.base import Backend
from spectui.backends.launchspec import LaunchSpec
from spectui.backends.lossy import determinism_claims, lossy_settings
from spectui.core.compare import compare_tokens
from spectui.core.errors import describe
from spectui.core.figures import SideRecorder
from spectui.core.findings import APART, NEAR_TIE_NATS, Rerun, Triage
from spectui.core.runner import PromptResult, run_side
from spectui.core.types import GenerationParams
from spectui.run.own_decode import cached as _cached
from spectui.run.own_decode import margins as _margins
from spectui.run.own_decode import own_decode, own_finding, same_top_tokens


def _can_run_cold(backend: Backend) -> bool:
    return backend.capabilities.cache_reset or backend.capabilities.cache_prompt_control


def _first_byte(a, b) -> int | None:
    d = compare_tokens(a.token_bytes(), b.token_bytes())
    return None if d is None else d.byte


async def _rerun(name: str, backend: Backend, text: str, params: GenerationParams):
    rec = await run_side(name, backend, text, params)
    return rec if rec.failed is None else None


async def triage(
    baseline: Backend,
    candidate: Backend,
    result: PromptResult,
    params: GenerationParams,
    threshold: float = NEAR_TIE_NATS,
    launched: dict[str, str] | None = None,
    specs: dict[str, LaunchSpec] | None = None,
    sources: dict[str, str] | None = None,
) -> Triage | None:
    """Why the two outputs of `result` differ; None when they do not (identical pairs run no triage).
    `launched` holds each launched side's note, `specs` its command line (for lossy and deterministic
    settings), launched or read from its local process, and `sources` where each came from
    (`from the process command line`, run.cmdline), named beside a setting read from it."""
    found = await _triage(baseline, candidate, result, params, threshold, launched, specs or {}, sources or {})
    if found is not None:
        found = _against_promises(found, specs or {})
    return found


def _against_promises(found: Triage, specs: dict[str, LaunchSpec]) -> Triage:
    """A difference where a side promises determinism breaks that promise: say so in the summary."""
    if found.cause == "lossy verification":
        return found
    promises = [f"the {side} runs with {c}" for side, spec in specs.items() for c in determinism_claims(spec.argv)]
    if not promises:
        return found
    return dataclasses.replace(
        found, summary=f"{found.summary}; {', '.join(promises)}: this difference breaks its promise"
    )


async def _triage(
    baseline: Backend,
    candidate: Backend,
    result: PromptResult,
    params: GenerationParams,
    threshold: float,
    launched: dict[str, str] | None,
    specs: dict[str, LaunchSpec],
    sources: dict[str, str],
) -> Triage | None:
    if result.divergence is None or result.failed:
        return None
    steps = _Steps(baseline, candidate, result, params, threshold, specs)
    steps.sources = sources
    return (
        await steps.run_to_run()  # 1
        or await steps.cache()  # 2
        or await steps.lossy()  # 3
        or await steps.numerics(launched)  # 4 and 5
    )


class _Steps:
    """Triage's experiments in order, sharing what each found: the reruns, the notes, the cache states."""

    def __init__(self, baseline, candidate, result: PromptResult, params, threshold: float, specs) -> None:
        self.baseline, self.candidate, self.result = baseline, candidate, result
        self.params, self.threshold, self.specs = params, threshold, specs
        self.sources: dict[str, str] = {}  # where each side's command line was read (run.cmdline)
        self.sides = {"baseline": (baseline, result.baseline), "candidate": (candidate, result.candidate)}
        self.reruns: list[Rerun] = []
        self.notes: list[str] = []
        self.text = result.rendered
        self.unsettled: dict[str, SideRecorder] = {}  # reruns that moved under another cache state: step 2 decides

    def found(self, cause: str, summary: str, evidence: dict | None = None) -> Triage:
        return Triage(cause, summary, self.reruns, evidence, self.notes)

    async def run_to_run(self) -> Triage | None:
        """Each side again under the run's own conditions (its cache setting included)."""
        for name, (backend, orig) in self.sides.items():
            if name not in self.text:
                self.notes.append(f"{name}: its rendered prompt is unknown; no rerun")
                continue
            rec = await _rerun(name, backend, self.text[name], self.params)
            if rec is None:
                self.notes.append(f"{name}: the rerun failed")
                continue
            moved = _first_byte(orig, rec)
            self.reruns.append(
                {
                    "what": f"{name} again under the same conditions",
                    "identical": moved is None,
                    "first_divergence": moved,
                }
            )
            if moved is None:
                continue
            if _cached(rec) != _cached(orig) and _can_run_cold(backend):
                # with the prompt cache on, the rerun found its prompt cached (or lost it): not the same conditions
                self.unsettled[name] = rec
                continue
            if name == "candidate" and (lossy := await self.lossy()) is not None:
                lossy.notes.append(
                    f"the candidate's rerun also differed from its first run at byte {moved}: a verifier that "
                    "accepts drafts at random moves from run to run unless the request is seeded"
                )
                return lossy
            why = (
                f" (its rerun reused {_cached(rec)} cached prompt tokens, its first run {_cached(orig)}; the "
                "server offers no cold run to tell the cache from nondeterminism)"
                if _cached(rec) != _cached(orig)
                else ""
            )
            return self.found(
                "nondeterminism",
                f"the {name} does not reproduce itself: its rerun differs from its first run at byte {moved}{why}",
            )
        return None

    async def cache(self) -> Triage | None:
        """A side that reused prompt-cache tokens, recomputed without them."""
        for name, (backend, orig) in self.sides.items():
            if not (_cached(orig) or name in self.unsettled) or name not in self.text:
                continue
            if not backend.capabilities.cache_reset and not backend.capabilities.cache_prompt_control:
                self.notes.append(
                    f"{name}: reused {orig.figures.prompt_cached} cached prompt tokens but offers no way to run cold"
                )
                continue
            found = await self._cold(name, backend, orig)
            if found is not None:
                return found
        return None

    async def _cold(self, name: str, backend, orig) -> Triage | None:
        other = self.result.candidate if name == "baseline" else self.result.baseline
        done = [await backend.reset_cache()] if backend.capabilities.cache_reset else []
        params = self.params
        cold = dataclasses.replace(params, cache_prompt=False) if backend.capabilities.cache_prompt_control else params
        rec = await _rerun(name, backend, self.text[name], cold)
        if rec is None:
            self.notes.append(f"{name}: the cold rerun failed")
            return None
        at = _first_byte(other, rec)
        reused = max(_cached(orig), _cached(self.unsettled.get(name, orig)))
        if name in self.unsettled:
            # two runs without cached tokens must agree, or the side is nondeterministic after all
            cold_before = next((r for r in (orig, self.unsettled[name]) if not _cached(r)), None)
            again = _first_byte(cold_before, rec) if cold_before is not None else None
            if again is not None:
                return self.found(
                    "nondeterminism",
                    f"the {name} does not reproduce itself: two runs without cached prompt tokens differ at "
                    f"byte {again}",
                )
            if at is not None:
                self.notes.append(
                    f"{name}: its rerun reused {_cached(self.unsettled[name])} cached prompt tokens and differed from "
                    f"its first run ({_cached(orig)}): the prompt cache changes its output, though not this divergence"
                )
        self.reruns.append(
            {
                "what": f"{name} recomputed without its prompt cache ({'; '.join(done) or 'cache_prompt: false'})",
                "identical": at is None,
                "first_divergence": at,
                "prompt_cached_before": reused,
                "prompt_cached_now": rec.figures.prompt_cached,
            }
        )
        if at is not None:
            return None
        return self.found(
            "cache",
            f"a prompt-cache hit changed the greedy output ({reused} tokens reused); recomputed, the "
            f"{name} is identical to the {other.name}",
        )

    async def lossy(self) -> Triage | None:
        """An accepted draft the target would not choose."""
        found = await _lossy(
            self.sides,
            self.result,
            self.text,
            self.notes,
            self.threshold,
            self.specs,
            self.baseline,
            self.candidate,
            self.sources.get("candidate", ""),
        )
        if found is not None:
            found.reruns[:0] = self.reruns
        return found

    async def numerics(self, launched: dict[str, str] | None) -> Triage:
        """A near-tie at the divergent position, else the servers compute different distributions; either way
        with the batch-shape evidence (M = 1 vs M = k + 1) where the servers can give it. The cause is named
        from evidence of the streams' own computation where a side gives it (its request again with n_probs,
        kept where it reproduces the stream), else from the position asked apart, labelled as such."""
        evidence = await _near_tie(self.sides, self.result, self.text, self.notes)
        if evidence is not None:
            await _batch_shapes(self.sides, self.result, self.text, evidence, self.specs, self.notes)
            await own_decode(self.sides, self.result, self.text, self.params, evidence, self.notes)
            own = own_finding(evidence, self.result, self.threshold)
            if own is not None:
                return self.found(own[0], own[1] + _shape_words(evidence), evidence)
        # only an exact margin can be a near-tie: a bound ("margin ≥ X") says nothing about how close it was
        if evidence is not None and evidence.get("margin") is not None and abs(evidence["margin"]) < self.threshold:
            return self.found(
                "near-tie",
                f"the two chosen tokens were {abs(evidence['margin']):.3f} nats apart at token "
                f"{evidence['position']} (under {self.threshold:g}; {APART}): a numerical difference between two "
                "almost equally likely tokens" + _shape_words(evidence),
                evidence,
            )
        diffs = _config_differences(self.baseline, self.candidate)
        if launched and launched.get("baseline") != launched.get("candidate"):
            # what the servers do not report (llama.cpp's /props has no KV cache type) but their argv says
            diffs.append(
                f"{launched.get('baseline') or 'not launched by spectui'} vs "
                f"{launched.get('candidate') or 'not launched by spectui'}"
            )
        if evidence is not None and same_top_tokens(evidence):
            return self.found("batch shape", _same_tops_summary(evidence, diffs), evidence)
        summary = "the two servers compute different distributions: " + (
            "; ".join(diffs) if diffs else "no configuration difference is reported"
        )
        if evidence is not None and evidence.get("margin") is not None:
            summary += f" (margin at the divergence {abs(evidence['margin']):.3f} nats, {APART})"
        elif evidence is not None and evidence.get("margin_bound") is not None:
            summary += (
                f" (margin at the divergence ≥ {evidence['margin_bound']:.3f} nats: a chosen token was outside a "
                "side's top log-probabilities, so only a bound is known)"
            )
        return self.found("configuration", summary + _shape_words(evidence), evidence)


async def _near_tie(sides, result: PromptResult, text: dict, notes: list[str]) -> dict | None:
    div = result.divergence
    assert div is not None  # triage runs on prompts whose verdict is DIFFERS
    b_toks, c_toks = result.baseline.tokens, result.candidate.tokens
    ks = [k for k in (div.baseline_token, div.candidate_token) if k is not None]
    if not ks:
        notes.append("near-tie: the divergence is past the end of both outputs; no position to ask about")
        return None
    k = min(ks)
    prefix_b = [t.token_id for t in b_toks[:k]]
    prefix_c = [t.token_id for t in c_toks[:k]]
    if None in prefix_b or prefix_b != prefix_c:
        notes.append("near-tie: the sides' token ids before the divergence are unknown or differ; not asked")
        return None
    chosen_b = b_toks[k].token_id if k < len(b_toks) else None
    chosen_c = c_toks[k].token_id if k < len(c_toks) else None
    out: dict = {"position": k, "baseline_token": chosen_b, "candidate_token": chosen_c}
    margins: list[float] = []
    bounds: list[float] = []
    for name, (backend, _orig) in sides.items():
        if not backend.capabilities.logprobs:
            notes.append(f"{name}: gives no log-probabilities; near-tie not checked on this side")
            continue
        try:
            top = await backend.top_logprobs(text[name], prefix_b, 3)
        except Exception as exc:
            notes.append(f"{name}: log-probabilities unavailable ({describe(exc)})")
            continue
        out[name] = [[tok, lp] for _id, tok, lp in top]
        first = _below_first(top, chosen_c)
        if first is not None:
            out[f"{name}_candidate_below_first"], out[f"{name}_candidate_below_first_exact"] = first
        m, exact = _margins(top, chosen_b, chosen_c)
        if m is not None and math.isfinite(m):
            out[f"{name}_margin"] = m
            out[f"{name}_margin_exact"] = exact
            (margins if exact else bounds).append(m)
    if not margins and not bounds:
        return out if len(out) > 3 else None
    # a bound is a lower bound on that side's |margin| (the missing token's logprob is at most the smallest
    # listed), never the margin itself: the smallest margin over the sides is exact only when no side's
    # bound could fall below it; otherwise all that is known is "margin ≥ the smallest of them"
    smallest = min(margins, key=abs) if margins else None
    if smallest is not None and all(abs(b) >= abs(smallest) for b in bounds):
        out["margin"] = smallest
    else:
        out["margin"] = None
        out["margin_bound"] = min(abs(m) for m in margins + bounds)
    return out


def _same_tops_summary(evidence: dict, diffs: list[str]) -> str:
    """Both servers answer the position alike when asked apart: "different distributions" would contradict the
    evidence printed beside it; the streams computed it in other shapes."""
    return (
        f"both servers give the same top tokens at token {evidence['position']} ({APART}), yet their streams "
        "chose differently: each stream computed the position in its own shape (the baseline token by token, a "
        "speculating candidate in verification batches), and the probe's shape cannot say which moved"
        + (f"; configurations differ: {'; '.join(diffs)}" if diffs else "")
        + _shape_words(evidence)
    )


def _config_differences(baseline: Backend, candidate: Backend) -> list[str]:
    b, c = baseline.info, candidate.info
    if b is None or c is None:
        return []
    out = []
    for what, vb, vc in (
        ("model", b.model, c.model),
        ("build", b.build, c.build),
        ("configuration", b.describe_speedup(), c.describe_speedup()),
    ):
        if vb != vc:
            out.append(f"{what} {vb or '?'} vs {vc or '?'}")
    return out


def _below_first(top: list[tuple], chosen: int | None) -> tuple[float, bool] | None:
    """How far (nats) a token lies below the first choice of one side's top list: (value, exact). A token
    missing from the list is at least as far as the smallest listed (a bound)."""
    if chosen is None or not top:
        return None
    best = max(t[2] for t in top)
    by_id = {t[0]: t[2] for t in top if t[0] is not None}
    if chosen in by_id:
        return best - by_id[chosen], True
    return best - min(t[2] for t in top), False


async def _lossy(
    sides, result: PromptResult, text: dict, notes: list[str], threshold: float, specs, baseline, candidate, source=""
):
    """`lossy verification` when the candidate's token at the divergence is an accepted draft that the target
    would not choose; None otherwise (or where the evidence cannot be had)."""
    div = result.divergence
    assert div is not None
    k = div.candidate_token
    toks = result.candidate.tokens
    if k is None or k >= len(toks) or toks[k].label != "accepted":
        return None
    settings = lossy_settings(specs.get("candidate").argv if specs.get("candidate") else None)
    scratch: list[str] = []
    evidence = await _near_tie(sides, result, text, scratch)
    if evidence is None:
        notes.append("lossy verification: the divergent token was an accepted draft, but no log-probabilities")
        return None
    own = evidence.get("candidate_candidate_below_first")
    theirs = evidence.get("baseline_candidate_below_first")
    if own is not None:
        margin, exact, whose = own, evidence.get("candidate_candidate_below_first_exact", False), "its own target's"
    elif theirs is not None and not _config_differences(baseline, candidate):
        margin, exact, whose = theirs, evidence.get("baseline_candidate_below_first_exact", False), "the baseline's"
    else:
        return None
    if margin < threshold:
        return None
    evidence["lossy_margin"] = margin
    evidence["lossy_margin_exact"] = exact
    evidence["lossy_settings"] = settings
    if source and settings:
        evidence["lossy_settings_source"] = source
    how = f"{margin:.3f}" if exact else f"≥ {margin:.3f}"
    named = (
        f"; the candidate runs with {', '.join(settings)}{f' ({source})' if source else ''}, which accepts drafts "
        "without the target's agreement"
        if settings
        else "; spectui recognises no lossy setting on its command line"
        + (f" ({source})" if source else " (not known: not launched by spectui, not a local process)")
    )
    summary = (
        f"the candidate accepted a draft the target would not choose at token {k} "
        f"(margin {how} nats below the first choice, from {whose} log-probabilities){named}"
    )
    return Triage("lossy verification", summary, [], evidence, notes)


def _verify_width(specs, result: PromptResult) -> int:
    """k + 1 for the candidate's verification batches: its launched draft length (n_max), else the most
    tokens one of its steps produced in this run, else llama.cpp's default of 3 drafts."""
    spec = specs.get("candidate")
    if spec is not None:
        try:
            return int(spec.values["n_max"]) + 1
        except (KeyError, ValueError):
            pass
    steps: dict[int, int] = {}
    for tok in result.candidate.tokens:
        if tok.step is not None:
            steps[tok.step] = steps.get(tok.step, 0) + 1
    return max(steps.values()) if steps and max(steps.values()) > 1 else 4


async def _batch_shapes(sides, result: PromptResult, text: dict, evidence: dict, specs, notes: list[str]) -> None:
    """Each side's target at the divergent position evaluated as a one-token decode (M = 1) and as the last
    token of a verification-sized batch (M = k + 1), on a cached prefix: the argmax and its margin over the
    runner-up in each shape (the evidence batch-invariance work asks for: vLLM RFC #54506)."""
    if "batch_shapes" in evidence:
        return
    k = evidence["position"]
    prefix = [t.token_id for t in result.baseline.tokens[:k]]
    if None in prefix:
        return
    width = _verify_width(specs, result)
    shapes: dict[str, dict] = {}
    for name, (backend, _orig) in sides.items():
        if name not in text:
            continue
        per: dict[str, dict] = {}
        for m in sorted({1, width}):
            try:
                top, processed = await backend.top_logprobs_in_batch(text[name], prefix, 3, m)
            except Exception as exc:  # a server that cannot be asked this way: said, triage goes on
                notes.append(f"{name}: batch shape M = {m} not checked ({describe(exc)})")
                break
            if len(top) < 2:
                continue
            ranked = sorted(top, key=lambda e: -e[2])
            per[str(m)] = {
                "top": ranked[0][0],
                "top_text": ranked[0][1],
                "margin": ranked[0][2] - ranked[1][2],
                "processed": processed,
                "ids": [e[0] for e in ranked],
                "tops": [[e[1], e[2]] for e in ranked],
            }
        if per:
            shapes[name] = per
    if shapes:
        evidence["batch_shapes"] = shapes
        evidence["batch_width"] = width


def _shape_words(evidence: dict | None) -> str:
    """`; batch shape: the candidate's target picks 'a' at M = 1 and 'b' at M = 4 (margins 0.010, 0.004)`
    where a side's argmax flips between the shapes; nothing where no side's does."""
    if not evidence or not evidence.get("batch_shapes"):
        return ""
    width = evidence.get("batch_width")
    flips = []
    for name, per in evidence["batch_shapes"].items():
        one, wide = per.get("1"), per.get(str(width))
        if one and wide and one["top"] != wide["top"]:
            flips.append(
                f"the {name}'s target picks {one['top_text']!r} at M = 1 and {wide['top_text']!r} at M = {width} "
                f"(margins {one['margin']:.3f}, {wide['margin']:.3f} nats)"
            )
    if flips:
        return "; batch shape: " + "; ".join(flips)
    return f"; batch shape: no side's argmax moves between M = 1 and M = {width}"
