"""Rejected drafts, reconstructed: what the draft proposed at each verification step, checked step by step.

No server reports the text of the drafts it rejected, only how many. This module rebuilds each step's
proposal after the run, the way llama.cpp drafted it, and keeps only what passes a self-check:

- draft-simple (a draft model): llama.cpp's drafter (common/speculative.cpp,
  common_speculative_impl_draft_simple::draft) takes the top-1 token of the draft model at each
  position — greedy — for up to n_max tokens, stopping early when the top token's probability falls
  under p_min. The step's drafted count is known from the server, so the probe asks the draft model
  (its own llama-server) for that many greedy tokens after the prompt plus the tokens kept so far.
- ngram-simple: common/ngram-map.cpp, common_ngram_simple_draft, ported below; its input is the token
  history (prompt + kept tokens, not the last sampled one) and the last sampled token.

Self-check, per step: the proposal's first `accepted` tokens must equal the tokens the target kept,
and where the step rejected drafts, its next token must differ from the token the target wrote there.
A step that fails shows no rejected text ("probe disagrees"); the summary says how many agreed.

The probe runs after the timed run, on its own server (or on none), so it never touches the figures.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from spectui.backends.launchspec import LaunchSpec
from spectui.core.errors import SpectuiError, describe
from spectui.core.figures import SideRecorder
from spectui.core.findings import ProbeResult, ProbeStep, StepSpan

__all__ = ["ProbeResult", "ProbeStep", "StepSpan"]

DraftFn = Callable[[list[int], int], Awaitable[list[tuple[int, list[tuple[int, float]]]]]]  # context, n -> proposal
TextFn = Callable[[list[int]], Awaitable[str]]  # ids -> their text


def step_spans(rec: SideRecorder) -> list[StepSpan]:
    """Each verification step with the output position it drafted at (tokens carry their step number)."""
    first: dict[int, int] = {}
    for t in rec.tokens:
        if t.step is not None and t.step not in first:
            first[t.step] = t.index
    return [StepSpan(s.step, first[s.step], s.drafted, s.accepted) for s in rec.steps if s.step in first]


def check_step(
    span: StepSpan, proposal: list[int], out_ids: list[int | None], eog_at: int | None = None
) -> tuple[bool | None, str]:
    """The self-check: accepted drafts equal the kept tokens; the first rejected draft differs from the
    target's token there. None where the ids needed are missing.

    `eog_at` is the output index of an end-of-generation token the stream ended with: llama.cpp's
    verifier (common_sampler_sample_and_accept_n) never counts a drafted end-of-generation token as
    accepted while drafts follow it, so a draft equal to the target's token is right there.
    """
    d, a, p = span.drafted, span.accepted, span.position
    if len(proposal) < d:
        return False, f"the probe proposed {len(proposal)} of the {d} drafted tokens"
    if any(i is None for i in out_ids[p : p + a]):
        return None, "token ids missing in the output"
    k = _first_wrong(span, proposal, out_ids, eog_at)
    if k is None:
        return True, ""
    if k < a:
        return False, "the probe's proposal differs from the tokens the target accepted"
    return False, "the probe's first rejected draft equals the target's token (it would have been accepted)"


def ngram_simple_draft(tokens: list[int], sampled: int, size_n: int, size_m: int) -> list[int]:
    """llama.cpp's common_ngram_simple_draft (common/ngram-map.cpp, b11434), line for line.

    The pattern is the last n−1 history tokens plus the sampled one; the history is searched backwards
    from cur_len−n−1 down to 1 (position 0 never matches); the draft copies up to m tokens that
    followed the match, and nothing when fewer than n would be copied.
    """
    cur_len = len(tokens)
    if cur_len <= size_n + size_m + 1:
        return []
    pattern = tokens[cur_len - size_n + 1 : cur_len] + [sampled]
    match_pos = 0
    for j in range(cur_len - size_n - 1, 0, -1):
        if tokens[j : j + len(pattern)] == pattern:
            match_pos = j
            break
    if match_pos == 0:
        return []
    copy_max = min(size_m, cur_len - (match_pos + size_n))
    if copy_max < size_n:
        return []
    return tokens[match_pos + size_n : match_pos + size_n + copy_max]


Proposal = list[tuple[int, list[tuple[int, float]]]]  # each drafted id with its position's top (id, logprob)
Proposer = Callable[[list[int], list[int], StepSpan], Awaitable[Proposal]]
NEAR_TIE = 0.25  # nats between a draft model's top-1 and the token the server's evidence names


def draft_model_fn(draft_greedy: DraftFn) -> Proposer:
    """A proposer that asks a draft model for the step's drafted count of greedy tokens."""

    async def propose(prompt_ids: list[int], out_ids: list[int], span: StepSpan) -> Proposal:
        return await draft_greedy(prompt_ids + out_ids[: span.position], span.drafted)

    return propose


def ngram_fn(size_n: int, size_m: int) -> Proposer:
    async def propose(prompt_ids: list[int], out_ids: list[int], span: StepSpan) -> Proposal:
        history = prompt_ids + out_ids[: span.position - 1]
        return [(i, []) for i in ngram_simple_draft(history, out_ids[span.position - 1], size_n, size_m)]

    return propose


def _first_wrong(span: StepSpan, ids: list[int], out_ids: list[int | None], eog_at: int | None) -> int | None:
    """Where a proposal first breaks the self-check (an index into it), or None: a draft the target
    accepted that the proposal does not have, or a first rejected draft equal to the target's token
    (except a drafted end-of-generation token, see check_step)."""
    a, p = span.accepted, span.position
    kept = out_ids[p : p + a + 1]
    for k in range(min(a, len(kept), len(ids))):
        if ids[k] != kept[k]:
            return k
    if span.drafted > a and len(kept) > a and len(ids) > a and ids[a] == kept[a] and p + a != eog_at:
        return a
    return None


async def _resolve_ties(
    span: StepSpan,
    prop: Proposal,
    out_ids: list[int | None],
    eog_at: int | None,
    again: Callable[[list[int], int], Awaitable[Proposal]],
    near_tie: float,
) -> tuple[Proposal, list[float]]:
    """Where a draft model's proposal breaks the self-check at a near-tie (its top-1 within `near_tie`
    nats of the token the server's evidence names), take that token and draft the rest again from it.

    The drafter inside the server computed the same distribution with other batch shapes, so between
    two almost equally likely tokens either can come out; the target's accepted tokens (or, at the first
    rejection, the fact that the draft was not the target's token) say which one the drafter took.
    Beyond the threshold nothing is changed: the step then disagrees, and says so.
    """
    margins: list[float] = []
    a, p = span.accepted, span.position
    for _ in range(span.drafted):
        ids = [i for i, _ in prop]
        k = _first_wrong(span, ids, out_ids, eog_at)
        if k is None or k >= len(prop):
            break
        top = prop[k][1]
        if not top:
            break
        best = max(lp for _, lp in top)
        if k < a:
            want = out_ids[p + k]
            choice = next(((i, lp) for i, lp in top if i == want), None)
        else:  # the first rejected draft: the drafter's token was not the target's
            choice = max(((i, lp) for i, lp in top if i != ids[k]), key=lambda x: x[1], default=None)
        if choice is None or best - choice[1] > near_tie:
            break
        margins.append(round(best - choice[1], 4))
        rest = await again(ids[:k] + [choice[0]], span.drafted - k - 1) if span.drafted - k - 1 > 0 else []
        prop = prop[:k] + [(choice[0], top)] + rest
    return prop, margins


async def probe(
    rec: SideRecorder,
    prompt_ids: list[int],
    propose: Proposer,
    text: TextFn,
    method: str,
    n_max: int | None = None,
    again: Callable[[list[int], int], Awaitable[Proposal]] | None = None,
    near_tie: float = NEAR_TIE,
) -> ProbeResult:
    """Rebuild every step's proposal with `propose`, check it, and keep the rejected text of those that agree.

    `again(context_after_prompt_and_kept, n)` drafts on from a chosen token (draft models only): with it,
    near-ties are resolved as _resolve_ties says, and each step records the margins it resolved.
    """
    result = ProbeResult(method)
    spans = step_spans(rec)
    if not spans:
        result.unavailable = "the candidate made no verification steps on this prompt"
        return result
    out_ids: list[int | None] = [t.token_id for t in rec.tokens]
    ended_eog = rec.finished is not None and rec.finished.stop_type == "eos" and rec.tokens
    eog_at = len(rec.tokens) - 1 if ended_eog else None
    for span in spans:
        st = ProbeStep(span.step, span.position, span.drafted, span.accepted)
        result.steps.append(st)
        if n_max and span.drafted > n_max:
            st.note = "two steps' counters arrived together: the split is not known"
            continue
        known = out_ids[: span.position]
        if span.position < 1 or any(i is None for i in known):
            st.note = "token ids missing before this step"
            continue
        context = [int(i) for i in known if i is not None]
        prop = await propose(prompt_ids, context, span)
        if again is not None:

            async def more(chosen: list[int], n: int, _ctx=context) -> Proposal:
                return await again(prompt_ids + _ctx + chosen, n)

            prop, st.near_ties = await _resolve_ties(span, prop, out_ids, eog_at, more, near_tie)
        await _check_and_name(st, span, [i for i, _ in prop], out_ids, eog_at, text)
    return result


async def _check_and_name(
    st: ProbeStep, span, proposal: list[int], out_ids: list[int | None], eog_at: int | None, text: TextFn
) -> None:
    """The step checked against the rebuilt proposal; its drafted, rejected and target text where it agrees."""
    st.draft_ids = proposal[: span.drafted]
    st.agrees, st.note = check_step(span, proposal, out_ids, eog_at)
    if st.agrees and st.near_ties:
        st.note = (
            f"near-tie resolved by the server's tokens (margin {', '.join(f'{m:.3f}' for m in st.near_ties)} nats)"
        )
    if st.draft_ids:
        st.draft_text = await text(st.draft_ids)
    if st.agrees and st.rejected > 0:
        st.rejected_text = await text(st.draft_ids[span.accepted :])
        target = out_ids[span.position + span.accepted] if span.position + span.accepted < len(out_ids) else None
        if target is not None:  # not its streamed bytes: a token ending in split UTF-8 arrives empty
            st.target_text = await text([target])


# -- running it on a finished prompt ------------------------------------------------------------------
def drafter_kind(speculative: dict) -> str | None:
    """Which of llama.cpp's drafters the candidate used, from what it reported ('draft-simple',
    'ngram-simple'), or None when the probe has no reconstruction for it."""
    kinds = {t.strip() for t in str(speculative.get("type") or "").split(",")}
    for k in ("draft-simple", "ngram-simple"):
        if k in kinds:
            return k
    return None


def ngram_sizes_from_argv(argv: list[str] | None) -> tuple[int, int] | None:
    """--spec-ngram-simple-size-n/-m from a launch command line (llama.cpp's defaults where absent)."""
    return LaunchSpec.from_argv(argv).ngram_sizes


async def probe_prompt(
    candidate,
    result,
    drafter=None,
    ngram: tuple[int, int] | None = None,
    n_max: int | None = None,
    near_tie: float = NEAR_TIE,
) -> ProbeResult:
    """Probe the candidate's side of one finished prompt (a core.runner.PromptResult).

    `candidate` is its backend (for the prompt's token ids and the text of draft tokens), `drafter` a
    backend serving the draft model (draft-simple), `ngram` the n-gram sizes (ngram-simple; llama.cpp's
    defaults 12/48 when not known). Never raises for a server that cannot do it: the result says why.
    """

    info = candidate.info.speculative if candidate.info is not None else {}
    kind = drafter_kind(info)
    rec = result.candidate
    if rec.failed is not None or rec.finished is None:
        return ProbeResult("none", unavailable="the candidate did not finish this prompt")
    if kind is None:
        what = info.get("type") or "none reported"
        return ProbeResult("none", unavailable=f"no reconstruction for this server's drafter ({what})")
    if not candidate.capabilities.token_ids:
        return ProbeResult(kind, unavailable=f"{candidate.kind} gives no token ids to rebuild drafts from")
    n_max = n_max or _int(info.get("n_max")) or rec.n_max_hint
    try:
        prompt_ids = await candidate.tokenize(result.rendered.get("candidate", ""))
        if kind == "draft-simple":
            if drafter is None:
                return ProbeResult(kind, unavailable="no draft model to ask (give --draft-model GGUF)")
            name = drafter.info.model if drafter.info is not None else drafter.url
            return await probe(
                rec,
                prompt_ids,
                draft_model_fn(drafter.greedy_ids),
                drafter.detokenize,
                f"draft model {name}, greedy",
                n_max=_int(n_max),
                again=drafter.greedy_ids,
                near_tie=near_tie,
            )
        n, m = ngram or (12, 48)
        assumed = "" if ngram else ", llama.cpp's default sizes assumed"
        return await probe(
            rec, prompt_ids, ngram_fn(n, m), candidate.detokenize, f"ngram-simple n={n} m={m}{assumed}", _int(n_max)
        )
    except SpectuiError as exc:
        return ProbeResult(kind, unavailable=describe(exc))


def _int(v) -> int | None:
    try:
        return int(v) if v is not None else None
    except (TypeError, ValueError):
        return None
