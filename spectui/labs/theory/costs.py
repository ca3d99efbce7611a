"""The formula's terms measured on the servers being compared: the target's cost to verify k tokens in one
batch, the draft's cost per token, and the draft's re-evaluation of each verified batch.

How, with llama-server's own timings (backends.llamacpp_timing), on requests of token ids made after the
run, each pinned to slot 0 with the prompt cache on:

- the prefix (the run's prompt and the first half of its output: the run's context length) is sent once,
  so the slot holds it; each measuring request repeats the prefix and adds k more tokens (the run's own
  output from there), so the server processes exactly k tokens in one batch on the cached prefix, and
  `prompt_ms` times that batch. A reply whose cache_n or prompt_n is not what was asked is left out
  (and counted). Two requests in a row start their k tokens differently, so the cache never covers them;
- one plain decode step t of the target: `predicted_ms / (predicted_n − 1)` of the k = 1 requests to the
  baseline, which go on for `decode_tokens` more tokens;
- V(k), in target steps, is one decode step plus what k − 1 more tokens add to a batch:
  1 + (prompt_ms(k) − prompt_ms(1)) / t. V(1) = 1 by construction; the ideal formula says V(k) = 1;
- c: the draft model's own decode step over t, on its own llama-server (machine.drafter, as the draft
  probe runs it), at the same context; R(k): that server's prompt_ms for k tokens over t — llama.cpp
  re-runs the draft model on every batch the target decoded. n-gram drafting runs no model: c = 0 and
  R = 0, said so, not measured;
- the candidate gets only k = 1 and k = K requests with n_predict 1: the first token comes from the
  prompt batch and the request ends before any draft, so its speculation counters do not move (checked
  before and after); its prompt_ms for k tokens is shown beside the target's plus the draft's.

Baseline, draft server and candidate are measured in turn for each k, repeats interleaved (k rising, then
falling), so a change in the machine's load falls on all of them alike. Where a server gives no
per-request prompt timings (vLLM, SGLang, other OpenAI-compatible servers), its term is not measured and
the ideal formula's value stands in for it, labelled.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

import httpx

from spectui.backends.launchspec import LaunchSpec
from spectui.backends.llamacpp_timing import CompletionTimings
from spectui.core.errors import describe
from spectui.core.runner import render_prompt
from spectui.labs.theory import terms
from spectui.labs.theory.curve import DRAFT_MODEL, NGRAM, OTHER, CostCurve, Samples, drafting_kind, is_local
from spectui.labs.theory.head_cost import add_head_decode
from spectui.labs.theory.outputs import add_draft_decode, add_outputs
from spectui.labs.theory.steps import RunSteps, run_steps
from spectui.labs.theory.terms import StepCosts
from spectui.machine.drafter import start_drafter

Timer = Callable[[list[int], int], Awaitable[CompletionTimings]]  # (prompt ids, n_predict) → the reply's timings


async def measure(
    target: Timer,
    prefix: list[int],
    continuation: list[int],
    ks: Sequence[int],
    *,
    draft: Timer | None = None,
    candidate: Timer | None = None,
    drafting: str = DRAFT_MODEL,
    repeats: int = 3,
    decode_tokens: int = 8,
    sources: dict[str, str] | None = None,
) -> CostCurve:
    """Measure the batch times for each k (1 is always measured) on the target, the draft server and the
    candidate (k = 1 and the largest k only), `repeats` times, interleaved."""
    ks = sorted(set(ks) | {1})
    top = ks[-1]
    pool = list(continuation)
    while len(pool) < top + 3:  # the k new tokens' content hardly matters to their cost: cycle the prefix
        pool += prefix[: top + 3 - len(pool)] or [0]
    servers: dict[str, Timer] = {"target": target}
    if draft is not None:
        servers["draft"] = draft
    if candidate is not None:
        servers["candidate"] = candidate
    times, steps, left_out, reasons = await _time_batches(servers, prefix, pool, ks, repeats, decode_tokens)

    def table(name: str) -> dict[int, Samples]:
        return {k: Samples(tuple(v)) for k, v in times.get(name, {}).items() if v}

    src = dict(sources or {})
    src.setdefault("verify", "measured: the baseline's prompt_ms for k tokens on a cached prefix")
    curve = CostCurve(
        context=len(prefix),
        repeats=repeats,
        target_step=Samples(tuple(steps["target"])) if steps["target"] else None,
        target_batch=table("target"),
        draft_step=Samples(tuple(steps["draft"])) if steps["draft"] else None,
        draft_batch=table("draft") if draft is not None else None,
        candidate_batch=table("candidate") if candidate is not None else None,
        drafting=drafting,
        sources=src,
        left_out=left_out,
    )
    if left_out:
        curve.notes.append(f"{left_out} measuring replies left out ({'; '.join(reasons)})")
    _say_terms(curve, drafting, draft is not None)
    return curve


async def _time_batches(
    servers: dict[str, Timer], prefix: list[int], pool: list[int], ks: list[int], repeats: int, decode_tokens: int
) -> tuple[dict[str, dict[int, list[float]]], dict[str, list[float]], int, list[str]]:
    """Each server's prompt_ms per k (and the target's and draft's decode steps on the k = 1 requests), k
    rising then falling, repeats interleaved; with how many replies were left out (cache_n or prompt_n not
    as asked) and why, for the first two. `ks`: sorted; the candidate gets only the first and the last."""
    top = ks[-1]
    times: dict[str, dict[int, list[float]]] = {name: {} for name in servers}
    steps: dict[str, list[float]] = {"target": [], "draft": []}
    last_first: dict[str, int | None] = {}
    left_out, reasons = 0, list[str]()
    for name, timer in servers.items():
        await timer(prefix, 1)  # the slot now holds the prefix
        last_first[name] = None
    for r in range(repeats):
        for k in ks if r % 2 == 0 else list(reversed(ks)):
            for name, timer in servers.items():
                if name == "candidate" and k not in (1, top):
                    continue
                off = next(o for o in range(3) if pool[o] != last_first[name])
                new = pool[off : off + k]
                last_first[name] = new[0]
                plain = k == 1 and name in ("target", "draft")
                got = await timer(prefix + new, 1 + decode_tokens if plain else 1)
                if got.cache_n != len(prefix) or got.prompt_n != k:
                    left_out += 1
                    if len(reasons) < 2:
                        reasons.append(
                            f"{name}: asked for {k} tokens on {len(prefix)} cached, got prompt_n {got.prompt_n} "
                            f"on cache_n {got.cache_n}"
                        )
                    continue
                if name == "candidate" and got.drafted:
                    reasons.append(f"the candidate drafted {got.drafted} tokens on a one-token request")
                times[name].setdefault(k, []).append(got.prompt_ms)
                if plain and got.decode_ms_per_token:
                    steps[name].append(got.decode_ms_per_token)
    return times, steps, left_out, reasons


def _say_terms(curve: CostCurve, drafting: str, has_draft: bool) -> None:
    """Label the terms not measured (and why), the draft model's measured ones, and note the candidate's own
    batch times beside the baseline's plus the draft's."""
    if len(curve.target_batch) < 2 or 1 not in curve.target_batch:
        curve.sources["verify"] = (
            "not measured: the baseline did not reuse the cached prefix (is its prompt cache off?): ideal V(k) = 1"
        )
    elif curve.target_step is None:
        curve.sources["verify"] = "not measured: the baseline gave no decode time: ideal V(k) = 1"
    if drafting == DRAFT_MODEL and has_draft:
        curve.sources.setdefault("c", "measured: the draft model's decode step on its own llama-server, over t")
        curve.sources.setdefault("reeval", "measured: the draft model's prompt_ms for k tokens, over t")
    if curve.candidate_batch and curve.measured:
        for k in sorted(curve.candidate_batch):
            own = curve.candidate_batch[k].median
            parts = curve.target_ms(k) + (curve.draft_ms(k) if drafting == DRAFT_MODEL else 0.0)
            curve.notes.append(
                f"the candidate's own {k}-token batch: {own:.1f} ms; the baseline's"
                + (" plus the draft model's: " if drafting == DRAFT_MODEL and curve.draft_batch else ": ")
                + f"{parts:.1f} ms"
            )


def ideal_sources(drafting: str, why: str) -> dict[str, str]:
    """Where a term cannot be measured: the ideal formula's value, labelled with the reason."""
    out = {"verify": f"not measured ({why}): ideal V(k) = 1", "reeval": f"not measured ({why}): ideal R = 0"}
    if drafting == NGRAM:
        out["c"] = "n-gram drafting: no draft model, c = 0"
        out["reeval"] = "n-gram drafting: no model re-evaluates the batch, R = 0"
    else:
        out["c"] = f"not measured ({why})"
    return out


async def measure_on_servers(
    client,
    baseline,
    candidate,
    ids: list[int],
    prefix_len: int,
    ks: Sequence[int],
    drafting: str,
    draft_model=None,
    repeats: int = 3,
    say: Callable[[str], None] | None = None,
    check_candidate: bool = True,
    draft_named: str = "named with --draft-model",
    launched: Mapping[str, LaunchSpec] | None = None,
) -> CostCurve:
    """The terms for one context (`ids`: the run's prompt and output tokens; the first `prefix_len` are the
    cached prefix), measured on the live servers after the run. The draft model runs on a llama-server of
    its own (spectui's bundled draft unless `draft_model` names one) where the candidate drafts with a
    model and runs on this machine; the candidate is sent only one-token requests, and its speculation
    counters are read before and after to show they did not move. `launched`: each side's command line where
    spectui launched it: the draft server runs with the candidate's threads and offload, the probe of every
    position's outputs with the baseline's."""
    prefix, continuation = ids[:prefix_len], ids[prefix_len:]
    if not baseline.capabilities.prompt_timings:
        why = f"the baseline ({baseline.kind}) reports no per-request prompt timings"
        return CostCurve(prefix_len, 0, None, {}, drafting=drafting, sources=ideal_sources(drafting, why))
    sources: dict[str, str] = {}
    if baseline.info and candidate.info and baseline.info.model != candidate.info.model:
        sources["verify"] = (
            f"measured on the baseline, which serves {baseline.info.model}, not the candidate's "
            f"{candidate.info.model}: not the candidate's target"
        )
    launcher, draft_timer, draft_path, which = await _draft_terms(
        client, candidate, drafting, draft_model, draft_named, launched, sources, say
    )

    target_timer: Timer = baseline.timed_completion
    cand_timer: Timer | None = None
    if check_candidate and candidate.capabilities.prompt_timings:
        cand_timer = candidate.timed_completion
    before = await candidate.counters() if cand_timer is not None else None
    try:
        if say is not None:
            say(
                f"measuring the cost terms on a {prefix_len}-token context, k = {min(ks)}…{max(ks)}, {repeats} repeats …"
            )
        curve = await measure(
            target_timer,
            prefix,
            continuation,
            ks,
            draft=draft_timer,
            candidate=cand_timer,
            drafting=drafting,
            repeats=repeats,
            sources=sources,
        )
    finally:
        if launcher is not None:
            launcher.stop_all()
    sides = (client, baseline, candidate, launched or {})
    await _probe_corrections(curve, sides, drafting, (draft_path, which), prefix, ks, repeats, say)
    after = await candidate.counters() if before is not None else None
    if after is not None:
        curve.notes.append(_counters_note(before, after))
    return curve


async def _probe_corrections(
    curve: CostCurve, sides: tuple, drafting: str, draft: tuple, prefix: list[int], ks, repeats: int, say
) -> None:
    """After the batch times: every position's outputs timed on the probe (V(k) as the server verifies), and
    the draft's own decode — a draft model's on the probe, an EAGLE-3 head's on a twin of the candidate.
    `sides`: (client, baseline, candidate, launched specs); `draft`: (the draft model's file, how it was had)."""
    client, baseline, candidate, launched = sides
    draft_path, which = draft
    await add_outputs(curve, baseline, launched.get("baseline", LaunchSpec()), prefix, ks, repeats, say)
    if draft_path is not None:
        await add_draft_decode(curve, draft_path, launched.get("candidate", LaunchSpec()), prefix, repeats, say)
        curve.notes.append(f"the draft model timed: {which}")
    elif drafting == OTHER and is_local(candidate.url):
        spec = launched.get("candidate", LaunchSpec())
        await add_head_decode(curve, client, spec, prefix, repeats, say)


async def _draft_terms(client, candidate, drafting: str, draft_model, draft_named: str, launched, sources: dict, say):
    """How the draft's terms (c, R) are had: n-gram drafting and other kinds without a model are labelled
    not measured, as is a candidate on another machine; a draft model is started on a llama-server of its own.
    Returns that server's launcher, its timer, the draft model's file (for the probe of its decode as the
    candidate runs it) and which draft it is (None for each where no draft server runs)."""
    launcher = None
    draft_timer: Timer | None = None
    draft_path = None
    which = None
    if drafting == NGRAM:
        sources["c"] = "n-gram drafting: no draft model, a lookup in the token history (c = 0, not measured)"
        sources["reeval"] = "n-gram drafting: no model re-evaluates the batch (R = 0)"
    elif drafting == DRAFT_MODEL and not is_local(candidate.url):
        sources["c"] = "not measured: the candidate is not on this machine, its draft would be timed on other hardware"
        sources["reeval"] = "not measured (the candidate is not on this machine): R = 0 assumed"
    elif drafting == DRAFT_MODEL:
        settings = (launched or {}).get("candidate", LaunchSpec()).draft_server_args()
        which = (
            draft_named
            if draft_model
            else "spectui's bundled draft: llama-server does not say which the candidate loaded"
        )
        launcher, draft_timer, draft_path = await _draft_server(client, draft_model, settings, which, sources, say)
    else:
        sources["c"] = f"not measured: {drafting} drafting has no separate model spectui can time (c = 0 assumed)"
        sources["reeval"] = "not measured: R = 0 assumed"
    return launcher, draft_timer, draft_path, which


async def _draft_server(client, draft_model, settings: list[str], which: str, sources: dict, say):
    """The draft model on a llama-server of its own with the candidate's settings: (its launcher, a timer
    of its requests, its model file); its sources written into `sources`."""
    if say is not None:
        say("starting the draft model on a llama-server of its own, to time it …")
    launcher, drafter = await start_drafter(client, draft_model, settings=settings)
    name = drafter.info.model if drafter.info else "the draft model"
    how = (
        f"with the candidate's {' '.join(settings)}"
        if settings
        else "at -t 1, no offload: the candidate's own settings not known"
    )
    sources["c"] = (
        f"measured: {name}'s decode step on its own llama-server, {how}, over t ({which}); it includes that "
        "server's per-token loop (its full sampler chain, detokenising), which a draft decode inside the "
        "candidate does not run (a top-k 10 sampler, common/speculative.cpp): c is biased up by it"
    )
    sources["reeval"] = f"measured: {name}'s prompt_ms for k tokens on its own llama-server, over t"

    async def timer(p: list[int], n: int) -> CompletionTimings:
        return await drafter.timed_completion(p, n)

    return launcher, timer, (drafter.info.model_path if drafter.info else None)


def _counters_note(before, after) -> str:
    moved = [
        name
        for name in ("drafted", "accepted", "steps")
        if getattr(before, name) is not None and getattr(after, name) != getattr(before, name)
    ]
    if moved:
        return "the candidate's speculation counters moved during the measurement: " + ", ".join(moved)
    return (
        "the candidate's speculation counters (drafted, accepted, steps) did not move: measured after the run, "
        "on separate one-token requests that draft nothing"
    )


async def check_prompt(
    client,
    baseline,
    candidate,
    runs: list,
    draft_model=None,
    repeats: int = 3,
    say: Callable[[str], None] | None = None,
    measure_terms: bool = True,
    draft_named: str = "named with --draft-model",
    launched: Mapping[str, LaunchSpec] | None = None,
):
    """The terms measured for one prompt's runs (core.runner.PromptResult) and the formula checked against
    them: (TheoryCheck or None where the candidate drafted nothing, the CostCurve or None)."""
    last = next((r for r in reversed(runs) if r.speedup), None)
    if last is None:
        return None, None
    rec = last.candidate
    steps = run_steps(rec)
    if steps is None:
        return None, None
    settings = rec.finished.settings if rec.finished is not None else {}
    kind = drafting_kind(settings.get("speculative.types") or settings.get("speculative.type"))
    if not measure_terms:
        return terms.check_runs(runs, StepCosts.ideal(0.0, "not measured (--no-measure)")), None
    if client is None:  # a driver that holds no HTTP client of its own (the TUI): one for the draft server
        async with httpx.AsyncClient() as own:
            return await check_prompt(
                own, baseline, candidate, runs, draft_model, repeats, say, measure_terms, draft_named, launched
            )
    measure_kw = dict(draft_model=draft_model, repeats=repeats, say=say, draft_named=draft_named, launched=launched)
    curve = await _terms_on_context(client, baseline, candidate, last, steps, kind, measure_kw)
    if curve.measured and last.baseline.figures.decode_tps:
        during = 1000.0 / last.baseline.figures.decode_tps
        now = curve.step_ms()
        if abs(now / during - 1) > 0.2:
            curve.notes.append(
                f"a target step took {during:.1f} ms during the run and {now:.1f} ms during the measurement: the "
                "machine's load moved; the terms are ratios measured together, the run's speed-up was measured then"
            )
    return terms.check_runs(runs, curve.terms(), curve.terms_each()), curve


async def _terms_on_context(client, baseline, candidate, last, steps: RunSteps, kind: str, measure_kw: dict):
    """The cost terms measured on the run's own context (its prompt and output tokens, k up to the draft
    limit), or the ideal's, labelled with why they could not be."""
    out = [t.token_id for t in last.candidate.tokens]
    if not baseline.capabilities.prompt_timings:  # the term that is missing, not a step on the way to it
        why = f"the baseline ({baseline.kind}) reports no per-request prompt timings (llama.cpp's prompt_ms)"
        curve = CostCurve(0, 0, None, {}, drafting=kind, sources=ideal_sources(kind, why))
    elif any(i is None for i in out) or not candidate.capabilities.token_ids:
        why = f"the {candidate.kind} candidate's stream gave no token ids to rebuild the run's context"
        curve = CostCurve(0, 0, None, {}, drafting=kind, sources=ideal_sources(kind, why))
    else:
        rendered = last.rendered.get("baseline") or await render_prompt(baseline, last.prompt)
        try:
            prompt_ids = await baseline.tokenize(rendered)
        except Exception as exc:  # Unsupported or a server error: the terms stay the ideal's, labelled
            curve = CostCurve(0, 0, None, {}, drafting=kind, sources=ideal_sources(kind, describe(exc)))
        else:
            ids = prompt_ids + [int(i) for i in out]
            top = (steps.n_max or max(steps.drafted)) + 1
            prefix_len = len(prompt_ids) + len(out) // 2
            return await measure_on_servers(
                client, baseline, candidate, ids, prefix_len, range(1, top + 1), kind, **measure_kw
            )
    return curve


def curve_text(curve: CostCurve) -> str:
    """The measured times and the terms made of them, as a table."""
    if not curve.measured:
        lines = ["cost terms not measured:"] + [f"  {k}: {v}" for k, v in curve.sources.items()]
        return "\n".join(lines + [f"  {n}" for n in curve.notes])
    t = curve.step_ms()
    terms = curve.terms()
    spread = curve.target_step.values if curve.target_step else ()
    lines = [
        f"measured after the run on a {curve.context}-token cached prefix, {curve.repeats} repeats (medians):",
        f"  one target decode step t = {t:.2f} ms (baseline; {min(spread):.1f}–{max(spread):.1f})",
    ]
    if curve.draft_step is not None:
        ds = curve.draft_step
        lines.append(
            f"  one draft decode step = {ds.median:.2f} ms ({min(ds.values):.1f}–{max(ds.values):.1f}) on its server"
            + (
                f"; {curve.draft_decode.median:.2f} ms as the candidate runs it (probe, no server loop)"
                if curve.draft_decode
                else ""
            )
            + f": c = {terms.c:.3f}"
        )
    elif curve.drafting == NGRAM:
        lines.append("  n-gram drafting: no draft model runs, c = 0 (not measured: a lookup in the token history)")
    head = f"  {'k':>3} {'target ms':>10}"
    if curve.output_extra:
        head += f" {'+all outputs':>12}"
    head += f" {'V(k)':>6}"
    if curve.draft_batch:
        head += f" {'draft ms':>9} {'R(k)':>6}"
    if curve.candidate_batch:
        head += f" {'candidate ms':>12}"
    lines.append(head)
    for k in curve.ks:
        row = f"  {k:>3} {curve.target_batch[k].median:>10.2f}"
        if curve.output_extra:
            row += f" {curve.target_ms(k) - curve.prompt_batch_ms(k):>+12.2f}"
        row += f" {terms.V(k):>6.2f}"
        if curve.draft_batch:
            row += f" {curve.draft_ms(k):>9.2f} {terms.R(k):>6.2f}"
        if curve.candidate_batch:
            got = curve.candidate_batch.get(k)
            row += f" {got.median:>12.2f}" if got else f" {'':>12}"
        lines.append(row)
    lines.append(f"  V(k): {curve.sources.get('verify', 'measured')}")
    lines += [f"  {n}" for n in curve.notes]
    return "\n".join(lines)
