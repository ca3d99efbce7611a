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
from dataclasses import asdict, dataclass, field

from spectui.core.figures import SideRecorder

DraftFn = Callable[[list[int], int], Awaitable[list[tuple[int, list[tuple[int, float]]]]]]  # context, n -> proposal
TextFn = Callable[[list[int]], Awaitable[str]]  # ids -> their text


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
    def from_json(cls, d: dict) -> ProbeResult:
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
        proposal = [i for i, _ in prop]
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
    return result


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
    if not argv:
        return None
    n, m = 12, 48  # common/common.h: common_params_speculative_ngram_map size_n / size_m

    def after(flag: str, default: int) -> int:
        if flag in argv and argv.index(flag) + 1 < len(argv):
            try:
                return int(argv[argv.index(flag) + 1])
            except ValueError:
                return default
        return default

    return after("--spec-ngram-simple-size-n", n), after("--spec-ngram-simple-size-m", m)


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
    from spectui.core.errors import SpectuiError, describe

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
