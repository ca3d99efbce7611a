"""A candidate run's verification steps, read from its recorder (core.figures.SideRecorder): what each step
drafted and accepted, the plain steps, the draft limit each ran under, and the step groups' times — what
labs.theory.terms checks the formula against."""

from __future__ import annotations

from dataclasses import dataclass

from spectui.core.figures import per_position_alpha


@dataclass(frozen=True)
class RunSteps:
    """What the candidate did, step by step: each verification step's drafted and accepted counts, the
    tokens from plain steps (empty drafts), the draft limit, and per-position acceptance shares."""

    drafted: tuple[int, ...]
    accepted: tuple[int, ...]
    plain: int
    n_max: int | None = None
    by_position: tuple[float, ...] | None = None  # share of steps that accepted position i (1-based i)
    by_position_source: str = ""
    group_d: tuple[int, ...] = ()  # per step group in stream order (plain steps 0): drafted
    group_t: tuple[float, ...] = ()  # and its duration in ms (arrival of its tokens after the last group's)
    caps: tuple[int | None, ...] = ()  # per verification step: n_remaining − 1 when it drafted (None: unknown)
    undrafted: int = 0  # plain steps with n_remaining − 1 = 0: no draft call (the last token)

    @property
    def steps(self) -> int:
        return len(self.drafted)

    @property
    def tokens(self) -> int:
        return sum(self.accepted) + self.steps + self.plain

    @property
    def gamma(self) -> float:
        return sum(self.drafted) / self.steps if self.steps else 0.0

    @property
    def tokens_per_step(self) -> float:
        """E measured: 1 + Σ_i (share of steps accepting position i) = 1 + accepted/steps."""
        if self.by_position:
            return 1 + sum(self.by_position)
        return 1 + sum(self.accepted) / self.steps if self.steps else 1.0

    @property
    def alpha(self) -> float:
        return per_position_alpha(sum(self.accepted), sum(self.drafted), self.steps) or 0.0

    def cost(self, costs) -> float:  # costs: labs.theory.terms.StepCosts (which imports this module)
        """The run's decode time in target steps, as the cost terms predict it."""
        caps = self.caps or (None,) * len(self.drafted)
        total = sum(costs.step(d, _limit(self.n_max, cap)) for d, cap in zip(self.drafted, caps, strict=False))
        plain = self.plain - self.undrafted
        return total + plain * costs.step(0, self.n_max) + self.undrafted * costs.undrafted_step()


def _limit(n_max: int | None, cap: int | None) -> int | None:
    """The draft limit a step ran under: the server's n_max, or n_remaining − 1 where lower."""
    if cap is None:
        return n_max
    return cap if n_max is None else min(n_max, cap)


def edge_caps(tokens_per_group: list[int], is_step: list[bool], n_predict: int | None) -> tuple[list, int]:
    """For each step group in stream order (after the first token, which the prompt batch gives): the
    draft cap n_remaining − 1 of each verification step, and how many plain steps had none left (no draft
    call). llama-server's n_remaining is n_predict minus the tokens made before the step
    (server-context.cpp:517-536). ([], 0) where n_predict is unknown."""
    if not n_predict or n_predict <= 0:
        return [], 0
    made, caps, undrafted = 1, [], 0
    for n, step in zip(tokens_per_group, is_step, strict=True):
        cap = n_predict - made - 1
        if step:
            caps.append(cap)
        elif cap <= 0:
            undrafted += 1
        made += n
    return caps, undrafted


def run_steps(rec) -> RunSteps | None:
    """The RunSteps of a candidate's recorder (a core.figures.SideRecorder), None where it drafted nothing.
    Tokens after the first: the first comes with the prompt, outside the decode window."""
    steps = list(rec.steps)
    if not steps:
        return None
    f = rec.figures
    tokens = list(rec.tokens)
    later = max(0, len(tokens) - 1)
    drafted = tuple(s.drafted for s in steps)
    accepted = tuple(s.accepted for s in steps)
    plain = max(0, later - sum(accepted) - len(steps))
    fin = rec.finished
    n_max = _n_max_of(rec)
    n_steps = int(f.metrics_steps) if f.metrics_steps else len(steps)
    if f.accepted_per_position and n_steps:
        by_pos, source = tuple(v / n_steps for v in f.accepted_per_position), "the server's per-position counters"
    else:
        width = max(drafted)
        by_pos = tuple(sum(1 for a in accepted if a >= i) / len(steps) for i in range(1, width + 1))
        source = "the stream's labels"
    gd, gt, sizes, numbers = _step_groups(tokens, {s.step: s.drafted for s in steps})
    n_predict = fin.settings.get("n_predict") if fin is not None else None
    caps: tuple[int | None, ...] = ()
    undrafted = 0
    if isinstance(n_predict, int) and not isinstance(n_predict, bool):
        by_group, undrafted = edge_caps(sizes, [n is not None for n in numbers], n_predict)
        cap_of = dict(zip([n for n in numbers if n is not None], by_group, strict=False))
        caps = tuple(cap_of.get(s.step) for s in steps)
        undrafted = min(undrafted, plain)
    return RunSteps(drafted, accepted, plain, n_max, by_pos, source, tuple(gd), tuple(gt), caps, undrafted)


def _n_max_of(rec) -> int | None:
    """The candidate's draft cap (speculative.n_max) as its final event says it, else the recorder's hint."""
    fin = rec.finished
    if fin is not None:
        v = fin.settings.get("speculative.n_max")
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            return int(v)
    return int(rec.n_max_hint) if rec.n_max_hint else None


def _step_groups(tokens: list, drafted_by_step: dict) -> tuple[list[int], list[float], list[int], list[int | None]]:
    """The tokens after the first as groups in stream order (a verification step's tokens share its number, a
    plain token is its own): each group's drafted count, the ms since the group before, its token count, and
    its step number (None: a plain token)."""
    gd: list[int] = []
    gt: list[float] = []
    last_t, last_key = None, None
    sizes: list[int] = []
    numbers: list[int | None] = []
    for i, t in enumerate(tokens):
        key = ("s", t.step) if t.step is not None else ("p", i)
        if i == 0:
            last_t, last_key = t.t_ns, key
            continue
        if key == last_key:
            if sizes:
                sizes[-1] += 1
            continue
        gd.append(drafted_by_step.get(t.step, 0) if t.step is not None else 0)
        gt.append((t.t_ns - last_t) / 1e6)
        sizes.append(1)
        numbers.append(t.step)
        last_t, last_key = t.t_ns, key
    return gd, gt, sizes, numbers
