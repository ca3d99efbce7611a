"""c and R(k) for a head that drafts inside its target (llama.cpp --spec-type draft-eagle3), measured.

An EAGLE-3 head has no model of its own that a llama-server could serve: it drafts from the target's hidden
states. llama.cpp times its drafting itself: common/speculative.cpp wraps each implementation's draft() in
common_time_meas(impl->t_draft_us) and counts the tokens it drafted (n_gen_tokens), and
common_speculative_print_stats logs both after every request at trace level (LOG_TRC: `-lv 4`):

    statistics draft-eagle3: … #gen tokens = 137, … dur(b,g,a) = 0.013, 1550.146, 0.099 ms

So the candidate's own command line is started once more beside it ("the twin": same target, head, threads,
n-max; another port; -lv 4), asked to decode the run's context, and the draft time per drafted token is read
from the change in those two counters per request: the head's decode steps and their sampling as the
candidate runs them. c is that over t (the target's decode step). The candidate itself is never restarted
with -lv 4, so its own runs are not slowed by logging. The twin drafts with --spec-draft-p-min 0: the terms'
c is one draft *decode* (n_dec(d)·c, labs.theory.terms), and a draft that stops early under p_min decodes
d + 1 times for d tokens (speculative.cpp, common_speculative_impl_draft_eagle3::draft: the boundary decode,
then one a token kept short of n_max), so time per drafted token would count that extra decode twice; with
p_min 0 every draft reaches n_max, n_max decodes for n_max tokens, and time per token is time per decode.

R(k): the head's process() runs on every batch the target decodes (the encoder on the k tokens' features,
then one decoder batch; speculative.cpp process()), and llama.cpp times it nowhere. The candidate's prompt
batch of k tokens includes it, the baseline's does not: R(k) = (candidate's prompt_ms(k) − the target's)
/ t, from the batches the cost measurement already sends both (k = 1 and the largest k), clipped at 0.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence

from spectui.backends.launchspec import LaunchSpec, without_flags
from spectui.backends.llamacpp import LlamaCppBackend
from spectui.core.errors import describe
from spectui.labs.theory.curve import CostCurve, Samples
from spectui.machine.launcher import Launcher, ServerProcess

HEAD_TYPES = ("draft-eagle3",)
_STATS = re.compile(
    r"statistics\s+(?P<kind>[\w-]+):.*?#gen tokens =\s*(?P<gen>\d+).*?dur\(b,g,a\) = "
    r"(?P<b>[\d.]+), (?P<g>[\d.]+), (?P<a>[\d.]+) ms"
)
_LOG_FLAGS = frozenset({"--port", "--host", "-lv", "--verbosity", "--log-verbosity", "--log-file"})
_P_MIN_FLAGS = frozenset({"--spec-draft-p-min", "--draft-p-min"})


def head_type(spec: LaunchSpec) -> str | None:
    """The head kind the candidate was launched with (None: not a head drafting inside the target)."""
    t = spec.spec_type or ""
    return next((h for h in HEAD_TYPES if h in t.split(",")), None)


def draft_counters(lines: Sequence[str], kind: str) -> tuple[int, float] | None:
    """(tokens drafted, ms spent drafting) so far, from the last statistics line for `kind` in a llama-server log."""
    for line in reversed(lines):
        m = _STATS.search(line)
        if m and m["kind"] == kind:
            return int(m["gen"]), float(m["g"])
    return None


def twin_argv(argv: Sequence[str], port: int) -> list[str]:
    """The candidate's command line on another port, logging at trace level (-lv 4) so its statistics show,
    drafting to n_max every step (--spec-draft-p-min 0) so that its time per drafted token is per decode."""
    kept = without_flags(list(argv), _LOG_FLAGS | _P_MIN_FLAGS)
    return [*kept, "--host", "127.0.0.1", "--port", str(port), "-lv", "4", "--spec-draft-p-min", "0"]


def per_token(before: tuple[int, float] | None, after: tuple[int, float] | None) -> float | None:
    """ms per drafted token over one request (None where it drafted nothing or no statistics were logged)."""
    if before is None or after is None or after[0] <= before[0]:
        return None
    return (after[1] - before[1]) / (after[0] - before[0])


def reeval_from_batches(curve: CostCurve) -> dict[int, Samples] | None:
    """k → the candidate's prompt batch minus the target's (ms, per repeat): what the head's process() adds to
    a batch of k tokens. A repeat may come out below 0 (two noisy times); the curve clips the median, or a
    run's own value, at 0 (CostCurve.draft_ms) — clipping each repeat first would bias the median upward."""
    cand = curve.candidate_batch or {}
    ks = [k for k in sorted(cand) if k in curve.target_batch]
    if not ks:
        return None
    out = {}
    for k in ks:
        c, t = cand[k].values, curve.target_batch[k].values
        out[k] = Samples(tuple(c[i % len(c)] - t[i % len(t)] for i in range(max(len(c), len(t)))))
    return out


async def add_head_decode(
    curve: CostCurve,
    client,
    candidate: LaunchSpec,
    prefix: list[int],
    repeats: int,
    say: Callable[[str], None] | None = None,
    decode_tokens: int = 24,
) -> None:
    """Measure the head's draft time per drafted token on the candidate's twin (curve.draft_decode: c's
    numerator) and R(k) from the batches already timed (curve.draft_batch); sources say how, or why not."""
    kind = head_type(candidate)
    if kind is None or curve.target_step is None or not prefix:
        return
    reeval = reeval_from_batches(curve)
    if reeval:
        curve.draft_batch = reeval
        curve.sources["reeval"] = (
            f"measured: the candidate's prompt batch of k tokens minus the target's, over t (what the {kind} "
            "head's process() adds to each batch the target decodes: its encoder and a decoder batch; "
            "llama.cpp times it nowhere), k = " + ", ".join(str(k) for k in reeval) + ", clipped at 0"
        )
    try:
        got = await _draft_times_on_twin(client, candidate, kind, prefix, repeats, say, decode_tokens)
    except Exception as exc:  # the twin did not start or answer: c stays unmeasured, said why
        curve.sources["c"] = f"not measured: the {kind} twin failed ({describe(exc)}); c = 0 assumed"
        return
    if not got:
        curve.sources["c"] = f"not measured: the {kind} twin logged no drafting statistics (drafted nothing?)"
        return
    curve.draft_decode = Samples(tuple(got))
    curve.sources["c"] = (
        f"measured: the {kind} head's draft time per drafted token (llama.cpp's own t_draft_us / n_gen_tokens, "
        f"common/speculative.cpp, logged at -lv 4) on a twin of the candidate (its command line, another port, p_min 0: one decode a drafted token), "
        f"{len(got)} requests of {decode_tokens} tokens on the run's context, over t"
    )


async def _draft_times_on_twin(
    client, candidate: LaunchSpec, kind: str, prefix: list[int], repeats: int, say, decode_tokens: int
) -> list[float]:
    """The head's draft ms per drafted token, one a request, from the statistics a twin of the candidate (its
    command line, another port, -lv 4) logs as each slot is released; the twin stopped after."""
    launcher = Launcher()
    proc = launcher.add(ServerProcess("head-twin", []))
    proc.argv = twin_argv(candidate.argv, proc.port)
    if say is not None:
        say(f"timing the {kind} head's drafting on a twin of the candidate (-lv 4, {proc.url}) …")
    try:
        await asyncio.to_thread(launcher.start_all, 120)
        twin = LlamaCppBackend(proc.url, client)
        got: list[float] = []
        for _ in range(max(repeats, 3)):
            before = draft_counters(list(proc.log), kind) or (0, 0.0)
            await twin.timed_completion(prefix, decode_tokens)
            await asyncio.sleep(0.2)  # the statistics line is logged as the slot is released
            ms = per_token(before, draft_counters(list(proc.log), kind))
            if ms is not None:
                got.append(ms)
        return got
    finally:
        await asyncio.to_thread(launcher.stop_all)
