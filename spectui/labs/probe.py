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

DraftFn = Callable[[list[int], int], Awaitable[list[int]]]  # (context ids, n) -> the drafter's n proposals
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
    agrees: bool | None = None  # None: the step could not be checked (note says why)
    note: str = ""

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
        tail = f", {unchecked} not checkable" if unchecked else ""
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
                            s.get("agrees") if isinstance(s.get("agrees"), bool) else None,
                            str(s.get("note") or ""),
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


def check_step(span: StepSpan, proposal: list[int], out_ids: list[int | None]) -> tuple[bool | None, str]:
    """The self-check: accepted drafts equal the kept tokens; the first rejected draft differs from the
    target's token there. None where the ids needed are missing."""
    d, a, p = span.drafted, span.accepted, span.position
    if len(proposal) < d:
        return False, f"the probe proposed {len(proposal)} of the {d} drafted tokens"
    kept = out_ids[p : p + a + 1]
    if any(i is None for i in kept[:a]):
        return None, "token ids missing in the output"
    if [int(i) for i in kept[:a] if i is not None] != proposal[: len(kept[:a])]:
        return False, "the probe's proposal differs from the tokens the target accepted"
    if d > a and len(kept) > a and kept[a] is not None and proposal[a] == kept[a]:
        return False, "the probe's first rejected draft equals the target's token (it would have been accepted)"
    return True, ""


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


def draft_model_fn(draft_greedy: DraftFn) -> Callable[[list[int], list[int], StepSpan], Awaitable[list[int]]]:
    """A proposer that asks a draft model for the step's drafted count of greedy tokens."""

    async def propose(prompt_ids: list[int], out_ids: list[int], span: StepSpan) -> list[int]:
        return await draft_greedy(prompt_ids + out_ids[: span.position], span.drafted)

    return propose


def ngram_fn(size_n: int, size_m: int) -> Callable[[list[int], list[int], StepSpan], Awaitable[list[int]]]:
    async def propose(prompt_ids: list[int], out_ids: list[int], span: StepSpan) -> list[int]:
        history = prompt_ids + out_ids[: span.position - 1]
        return ngram_simple_draft(history, out_ids[span.position - 1], size_n, size_m)

    return propose


async def probe(
    rec: SideRecorder,
    prompt_ids: list[int],
    propose: Callable[[list[int], list[int], StepSpan], Awaitable[list[int]]],
    text: TextFn,
    method: str,
    n_max: int | None = None,
) -> ProbeResult:
    """Rebuild every step's proposal with `propose`, check it, and keep the rejected text of those that agree."""
    result = ProbeResult(method)
    spans = step_spans(rec)
    if not spans:
        result.unavailable = "the candidate made no verification steps on this prompt"
        return result
    out_ids: list[int | None] = [t.token_id for t in rec.tokens]
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
        proposal = await propose(prompt_ids, [int(i) for i in known if i is not None], span)
        st.draft_ids = proposal[: span.drafted]
        st.agrees, st.note = check_step(span, proposal, out_ids)
        if st.draft_ids:
            st.draft_text = await text(st.draft_ids)
        if st.agrees and st.rejected > 0:
            st.rejected_text = await text(st.draft_ids[span.accepted :])
    return result


def per_position_examples(results: list[tuple[str, ProbeResult]], limit: int = 3) -> dict[str, dict[int, list[str]]]:
    """Rejected text by prompt category and by the chain position of the first rejection (1-based):
    which positions of a draft chain the target turns down, with examples."""
    out: dict[str, dict[int, list[str]]] = {}
    for category, pr in results:
        for s in pr.steps:
            if s.agrees and s.rejected_text:
                ex = out.setdefault(category or "uncategorised", {}).setdefault(s.accepted + 1, [])
                if len(ex) < limit:
                    ex.append(s.rejected_text)
    return out
