"""Headless reports of a comparison: a readable table and one JSON document."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from spectui.core import terms_table
from spectui.core.compare import Divergence, escape_bytes
from spectui.core.figures import rate_basis_note
from spectui.core.headline import headline_for
from spectui.core.markdown import md_cell
from spectui.core.runner import PromptResult, Repeated, grouped
from spectui.core.stats import Spread, over_units
from spectui.core.types import SIDES, GenerationParams, ServerInfo


def fmt(v: float | None, spec: str = ".1f", missing: str = "—") -> str:
    return missing if v is None else format(v, spec)


def measured(rec, value):
    """A side's figure, or None where the side did not finish (a failed or cut-off side measured nothing)."""
    return value if rec.finished is not None else None


def acceptance_text(rec) -> str:
    f = rec.figures
    if not f.drafted:
        return "no drafts"
    return f"{f.acceptance_rate:.0%} ({f.accepted}/{f.drafted})"


def speedup_text(r: PromptResult) -> str:
    """A speed-up is never shown without the acceptance rate beside it."""
    s = r.speedup
    if s is None:
        return "—"

    note = rate_basis_note(r.baseline.figures, r.candidate.figures)
    mixed = f" ({note})" if note else ""
    if not r.candidate.figures.drafted:
        return f"{s:.2f}× (the candidate drafted nothing){mixed}"
    return f"{s:.2f}× at {acceptance_text(r.candidate)} accepted{mixed}"


def verdict_text(r: PromptResult) -> str:
    """The prompt's carried verdict (core.verdict), in the report's words; never judged here. Where replay
    judged the recorded events again and disagrees, that is said beside it (PromptResult.rejudged)."""
    text = _verdict_words(r)
    return f"{text} ⚠ {r.rejudged}" if r.rejudged else text


def _verdict_words(r: PromptResult) -> str:
    v = r.verdict
    if v is None:
        return "not judged (the prompt did not finish)"
    if v.status == "failed":
        return "not compared (a side failed)"
    if v.status == "incomplete":
        return "incomplete (the recording stops inside this prompt): no verdict"
    d = v.divergence
    if d is None:
        return "identical"
    what = f"; {d.detail}" if d.kind != "bytes" and d.detail else ""
    return f"DIFFERS at byte {d.byte} (token {_tok(d.baseline_token)} / {_tok(d.candidate_token)}{what})"


def _tok(i: int | None) -> str:
    return "end" if i is None else str(i)


def cache_text(params: GenerationParams) -> str:
    """The prompt-cache setting the requests asked for."""
    return "server default" if params.cache_prompt is None else ("on" if params.cache_prompt else "off")


def params_words(params: GenerationParams, order: str) -> str:
    """`max tokens 96, temperature 0.0, seed 42, order sequential, prompt cache off`"""
    return (
        f"max tokens {params.max_tokens}, temperature {params.temperature}, seed {params.seed}, "
        f"order {order}, prompt cache {cache_text(params)}"
    )


def mixed_params(results: list[PromptResult]) -> bool:
    """The results' prompts ran with different parameters or orders (a session that mixes them): then no
    one header line holds for the set, and each prompt names its own (prompt_params)."""
    return len({params_words(r.params, r.order or "?") for r in results if r.params is not None}) > 1


MIXED = "differ by prompt (each prompt's own are given with it)"


def prompt_params(r: PromptResult) -> str:
    return params_words(r.params, r.order or "?") if r.params is not None else "not recorded"


# what the run's order and prompt cache do to its figures, said beside them (Ctrl+O moved a speed-up
# 0.19× → 0.46× with no word; a cache left to the server's default changes TTFT with what ran before)
CONCURRENT_SHORT = "concurrent: each side's tok/s includes the other's load"
CONCURRENT_CAVEAT = (
    "order concurrent: both servers decoded at once on one machine, so each side's tok/s and the speed-up "
    "include the other's load (sequential, the default, measures each alone)"
)
CACHE_CAVEAT = (
    "prompt cache {cache}: a prompt prefix the server kept from an earlier request is not prefilled again, so "
    "TTFT and 'cached' depend on what ran before (off, the default, unless asked: --cache-prompt)"
)


def conditions_caveats(params: GenerationParams, order: str, results: list[PromptResult] | None = None) -> list[str]:
    """The caveats the order and the prompt cache put on the figures, where they apply (none for the defaults:
    sequential, cache off); `results` adds those of prompts recorded with their own."""
    pairs = {(order, params.cache_prompt)} | {
        (r.order or order, r.params.cache_prompt) for r in results or [] if r.params is not None
    }
    out = []
    if any(o == "concurrent" for o, _ in pairs):
        out.append(CONCURRENT_CAVEAT)
    caches = sorted({cache_text(GenerationParams(cache_prompt=c)) for _, c in pairs if c is not False})
    if caches:
        out.append(CACHE_CAVEAT.format(cache=" / ".join(caches)))
    return out


def server_line(role: str, info: ServerInfo) -> str:
    return f"{role:<9} {info.url}  build {info.build or '?'}  model {info.model or '?'}  [{info.describe_speedup()}]"


def text_report(
    infos: dict[str, ServerInfo],
    results: list[PromptResult],
    params: GenerationParams,
    order: str,
    terms: dict | None = None,
) -> str:
    """The console report; `terms`: the formula's measured terms (labs.theory.record), where saved."""
    lines = [
        server_line("baseline", infos["baseline"]),
        server_line("candidate", infos["candidate"]),
        f"params    max_tokens={params.max_tokens} temperature={params.temperature} seed={params.seed} "
        f"order={order} prompt cache={cache_text(params)}"
        if not (mixed := mixed_params(results))
        else f"params    {MIXED}",
        *(f"note      {c}" for c in conditions_caveats(params, order, results)),
        "",
    ]
    head = (
        f"{'prompt':<18} {'side':<9} {'TTFT ms':>8} {'tok/s':>7} {'srv tok/s':>9} {'tokens':>6} {'cached':>6}  "
        f"{'acceptance':<16} {'mean len':>8} {'α/pos':>6}"
    )
    lines.append(head)
    lines.append("-" * len(head))
    for r in results:
        lines += prompt_lines(r)
        if mixed:
            lines.append(f"{'':<18} params    {prompt_params(r)}")
    if any(r.candidate.figures.drafted for r in results):
        lines.append(ALPHA_NOTE)
    repeats = repeat_lines(results)
    lines += repeats
    ws = whole_set(results)
    if ws is not None:
        lines += ([] if repeats else [""]) + [f"{'whole set':<18} {ws.text()}"]
    lines += rejected_by_position(results)
    done = [r for r in results if r.identical is not None]
    same = sum(1 for r in done if r.identical)
    lines.append("")
    lines.append(
        f"{same}/{len(done)} outputs identical"
        + (f", {len(results) - len(done)} not compared" if len(done) < len(results) else "")
        + f"; builds: baseline {infos['baseline'].build or '?'}, candidate {infos['candidate'].build or '?'}"
    )
    lines.append(headline_for(results).line)  # both halves of the answer (core.headline), as the TUI's banner
    if terms is not None:
        lines += terms_table.text(terms)
    return "\n".join(lines)


def prompt_lines(r: PromptResult) -> list[str]:
    """One prompt's rows: each side's figures, its labels, its speed-up and verdict, where the outputs part."""
    lines: list[str] = []
    for name, rec in (("baseline", r.baseline), ("candidate", r.candidate)):
        f = rec.figures
        pid = (r.prompt.id + (f" #{r.run}" if r.runs > 1 else "")) if name == "baseline" else ""
        if rec.failed is not None:
            lines.append(f"{pid:<18} {name:<9} FAILED after {f.tokens} tokens: {rec.failed.message}")
            continue
        lines.append(
            f"{pid:<18} {name:<9} {fmt(f.ttft_ms):>8} {fmt(f.decode_tps):>7} {fmt(f.server_decode_tps):>9} "
            f"{f.tokens:>6} {fmt(f.prompt_cached, 'd'):>6}  {acceptance_text(rec):<16} {fmt(f.mean_accepted_length, '.2f'):>8}"
            f" {fmt(measured(rec, f.alpha_per_position), '.2f'):>6}"
        )
        if f.metrics_check and f.metrics_check != "ok" and f.drafted:
            lines.append(f"{'':<18} {'':<9} /metrics cross-check: {f.metrics_check}")
    labels = r.candidate.figures.labels
    if labels:
        lines.append(f"{'':<18} {'':<9} labels: {labels}")
    if r.prompts_differ_at is not None:
        lines.append(
            f"{'':<18}   prompts differ: the two servers rendered the chat template differently at "
            f"byte {r.prompts_differ_at}"
        )
    spread = "; 1 run: no spread measured" if r.runs == 1 and r.speedup is not None else ""
    lines.append(
        f"{'':<18} speed-up  {speedup_text(r)}{spread}   output: {verdict_text(r)}"
        + (f" (compared {r.compared})" if r.identical is not None else "")
    )
    if r.divergence is not None:
        lines += divergence_lines(r, r.divergence)
    lines += drafts_lines(r)
    return lines


def divergence_lines(r: PromptResult, d: Divergence) -> list[str]:
    """Where the two outputs part: both excerpts, a cache note, and the triage with its top tokens."""
    lines: list[str] = []
    lines.append(f"{'':<18}   baseline  …{escape_bytes(d.baseline_excerpt)}…")
    lines.append(f"{'':<18}   candidate …{escape_bytes(d.candidate_excerpt)}…")
    cb, cc = r.baseline.figures.prompt_cached, r.candidate.figures.prompt_cached
    if cb is not None and cc is not None and cb != cc:
        lines.append(f"{'':<18}   note: prompt tokens reused from cache differ ({cb} vs {cc})")
    if r.triage:
        t = r.triage
        lines.append(f"{'':<18}   {t.line()}")
        lp = t.logprobs or {}
        for side in SIDES:
            if lp.get(side):
                top = ", ".join(f"'{escape_bytes(str(tok).encode())}' {v:.3f}" for tok, v in lp[side])
                lines.append(f"{'':<18}     {side} top tokens at {lp.get('position')}: {top}")
        for n in t.notes:
            lines.append(f"{'':<18}     ({n})")
    return lines


# acceptance per drafted token (accepted/drafted) is not Leviathan's α: the table gives both
ALPHA_NOTE = (
    "acceptance: per drafted token (accepted/drafted); α/pos: per position, the α with Σ_{i=1..γ} α^i = "
    "accepted/steps at γ = drafted/steps (Leviathan's α)"
)


def repeat_text(g: Repeated) -> str:
    """`speed-up 0.29× [0.27–0.31] at 38% accepted (5 runs): slower` — the spread beside every speed-up;
    runs that failed are said and never counted."""
    sp = g.speedup
    failed = g.failed_runs
    if sp is None:
        if len(failed) == len(g.runs):
            return "speed-up not measured (a side failed in every run)"
        return f"speed-up not measured (no run gave both rates; {len(failed)} of {len(g.runs)} failed)"
    acc = [a for a in g.acceptance if a is not None]
    at = f" at {statistics.median(acc):.0%} accepted" if acc else " (the candidate drafted nothing)"
    lost = (
        f"; {len(failed)} of {len(g.runs)} runs failed (run {', '.join(map(str, failed))}), not counted"
        if failed
        else ""
    )
    if not sp.measured:
        return f"speed-up {sp.median:.2f}×{at} (1 run: no spread measured){lost}"
    return f"speed-up {sp.text(unit='×')}{at} ({sp.n} runs): {g.verdict}{lost}"


def repeat_outputs_text(g: Repeated) -> str:
    """The bytes over a prompt's runs, from the runs that were compared: a failed run is not 'identical'."""
    div, compared, n = g.divergent_runs, len(g.compared_runs), len(g.runs)
    if div:
        said = f"run {', '.join(map(str, div))} of {n} DIFFER"
    elif not compared:
        return f"not compared: no run finished on both sides ({n} run{'s' if n != 1 else ''})"
    else:
        said = f"identical in every run ({n})" if compared == n else f"identical in {compared} of {n} runs"
    return said + (f"; {n - compared} not compared (failed)" if compared < n else "")


@dataclass(frozen=True)
class WholeSet:
    """The run's one speed-up over a prompt set, with the acceptance of the same runs beside it: the
    text, JSON and Markdown reports and `spectui sessions` all show this one."""

    speedup: Spread
    prompts: int
    runs: int  # the paired runs it came from
    accepted: int
    drafted: int

    def acceptance(self) -> str:
        if not self.drafted:
            return "the candidate drafted nothing"
        return f"at {self.accepted / self.drafted:.0%} ({self.accepted}/{self.drafted}) accepted"

    def text(self) -> str:
        return (
            f"speed-up {self.speedup.text(unit='×')} {self.acceptance()} over {self.prompts} prompts "
            f"({self.runs} paired runs; the interval is over prompts)"
        )

    def to_json(self) -> dict:
        return {
            "speedup": self.speedup.to_json(),
            "prompts": self.prompts,
            "runs": self.runs,
            "accepted": self.accepted,
            "drafted": self.drafted,
            "acceptance_rate": self.accepted / self.drafted if self.drafted else None,
        }


def whole_set(results: list[PromptResult]) -> WholeSet | None:
    """Over two or more prompts with a speed-up: the prompt is the unit (one mean log ratio per prompt, the
    interval over prompts: its runs are not independent draws from the set); the acceptance pooled over
    the runs that gave a speed-up. None for one prompt (its own line is the run's figure)."""
    units = [[r.speedup for r in g.runs if r.speedup is not None] for g in grouped(results)]
    units = [u for u in units if u]
    if len(units) < 2:
        return None
    paired = [r for r in results if r.speedup is not None]
    return WholeSet(
        over_units(units),
        len(units),
        len(paired),
        sum(r.candidate.figures.accepted for r in paired),
        sum(r.candidate.figures.drafted for r in paired),
    )


def repeat_lines(results: list[PromptResult]) -> list[str]:
    groups = grouped(results)
    if not any(len(g.runs) > 1 for g in groups):
        return []
    out = [
        "",
        "repeated runs (interleaved, alternating which side goes first; speed-ups as geometric means, rates and "
        "TTFT as medians, with 95 % t-intervals on the "
        "log ratios)",
    ]
    for g in groups:
        out.append(f"{g.prompt.id:<18} {repeat_text(g)}")
        for side in SIDES:
            d, t = g.decode(side), g.ttft(side)
            out.append(
                f"{'':<18}   {side:<9} decode tok/s {d.text('.1f') if d else '—'}   TTFT ms {t.text('.0f') if t else '—'}"
            )
        if g.acceptance_moved:
            out.append(
                f"{'':<18}   acceptance moved between runs: {', '.join(fmt(a, '.0%') for a in g.acceptance)} "
                "(at temperature 0 it should not: a finding in itself)"
            )
        out.append(f"{'':<18}   outputs: {repeat_outputs_text(g)}")
    notes = {n for g in groups if (n := g.rate_note)}
    out.extend(f"{'':<18}   note: {n}" for n in sorted(notes))
    return out


def side_json(rec) -> dict:
    d = rec.figures.to_json(measured=rec.finished is not None)
    d["output"] = rec.output().decode("utf-8", errors="replace")
    d["failed"] = rec.failed.message if rec.failed is not None else None
    return d


def json_report(
    infos: dict[str, ServerInfo], results: list[PromptResult], params: GenerationParams, order: str
) -> dict:
    prompts = []
    mixed = mixed_params(results)
    for r in results:
        prompts.append(
            {
                "id": r.prompt.id,
                # a session that mixes parameters: each prompt's own (the top-level "params" are the first's)
                **({"params": _params_json(r.params, r.order or order)} if mixed and r.params is not None else {}),
                "category": r.prompt.category,
                "baseline": side_json(r.baseline),
                "candidate": side_json(r.candidate),
                "verdict": r.verdict.to_json() if r.verdict is not None else None,
                "identical": r.identical,
                "incomplete": r.incomplete,
                "compared": r.compared,
                "prompts_differ_at": r.prompts_differ_at,
                "first_divergence": r.divergence.to_json() if r.divergence else None,
                "speedup": r.speedup,
                "run": r.run,
                "triage": r.triage.to_json() if r.triage else None,
                "drafts": r.drafts.to_json() if r.drafts else None,
                "acceptance_rate": r.candidate.figures.acceptance_rate if r.candidate.finished is not None else None,
                # replay: the recorded verdict and the events judged again disagree (only then present)
                **({"rejudged": r.rejudged} if r.rejudged else {}),
            }
        )
    return {
        "baseline": infos["baseline"].to_json(),
        "candidate": infos["candidate"].to_json(),
        "params": _params_json(params, order),
        "params_differ_by_prompt": mixed,
        "notes": conditions_caveats(params, order, results),  # what the order and the cache do to the figures
        "prompts": prompts,
        "repeats": [g.to_json() for g in grouped(results)],
        "whole_set": ws.to_json() if (ws := whole_set(results)) is not None else None,
        "all_identical": (None if any(r.identical is None for r in results) else all(r.identical for r in results))
        if results
        else None,
    }


def _params_json(params: GenerationParams, order: str) -> dict:
    return {
        "max_tokens": params.max_tokens,
        "temperature": params.temperature,
        "seed": params.seed,
        "cache_prompt": params.cache_prompt,
        "order": order,
    }


def markdown_report(
    infos: dict[str, ServerInfo],
    results: list[PromptResult],
    params: GenerationParams,
    order: str,
    source: str | None = None,
    terms: dict | None = None,
) -> str:
    """A readable report: the acceptance rate beside every speed-up, and the build tags; `terms`: the
    formula's measured terms (labs.theory.record), where saved."""
    b, c = infos["baseline"], infos["candidate"]
    out = ["# spectui comparison", ""]
    if source:
        out += [f"Session: `{source}`", ""]
    out += [
        "| | URL | build | model | configuration |",
        "|---|---|---|---|---|",
        *(
            f"| {role} | {md_cell(i.url)} | {md_cell(i.build or '?')} | {md_cell(i.model or '?')} | "
            f"{md_cell(i.describe_speedup())} |"
            for role, i in (("baseline", b), ("candidate", c))
        ),
        "",
        f"Parameters: {params_words(params, order)}."
        if not mixed_params(results)
        else f"Parameters {MIXED}: "
        + "; ".join(f"{md_cell(r.prompt.id)}: {prompt_params(r)}" for r in results if r.run == 1)
        + ".",
        *(f"\n*Note: {md_cell(c)}.*" for c in conditions_caveats(params, order, results)),
        "",
        "| prompt | baseline tok/s | candidate tok/s | speed-up (acceptance per drafted token) | mean accepted length "
        "| α per position | TTFT ms (b / c) | output |",
        "|---|---|---|---|---|---|---|---|",
    ]
    out += [_md_prompt_row(r) for r in results]
    for r in results:
        out += _md_what_went_wrong(r)
    return "\n".join(out + _md_closing(results, b, c, terms))


def _md_closing(results: list[PromptResult], b: ServerInfo, c: ServerInfo, terms: dict | None) -> list[str]:
    """The report's end: the whole set's speed-up, how many outputs are identical, the builds, the headline;
    the α note where anything was drafted, and the formula's terms where saved."""
    out: list[str] = []
    ws = whole_set(results)
    if ws is not None:
        out += ["", f"Whole set: {ws.text()}."]
    done = [r for r in results if r.identical is not None]
    out += [
        "",
        f"{sum(1 for r in done if r.identical)}/{len(done)} outputs identical"
        + (f", {len(results) - len(done)} not compared" if len(done) < len(results) else "")
        + ". "
        f"Builds: baseline {md_cell(b.build or '?')}, candidate {md_cell(c.build or '?')}.",
        "",
        f"**{md_cell(headline_for(results).line)}**",
        "",
    ]
    if any(r.candidate.figures.drafted for r in results):
        out[-1:-1] = ["", md_cell(ALPHA_NOTE.replace("α/pos", "α per position"))]
    if terms is not None:
        out[-1:-1] = terms_table.markdown(terms)
    return out


def _md_prompt_row(r: PromptResult) -> str:
    """A prompt's row of the Markdown table: both rates, the speed-up, the draft's figures, TTFT, the verdict."""
    fb, fc = r.baseline.figures, r.candidate.figures
    b_tps, c_tps = measured(r.baseline, fb.decode_tps), measured(r.candidate, fc.decode_tps)
    return (
        f"| {md_cell(r.prompt.id)} | {fmt(b_tps)} | {fmt(c_tps)} | {speedup_text(r)} | "
        f"{fmt(measured(r.candidate, fc.mean_accepted_length), '.2f')} | "
        f"{fmt(measured(r.candidate, fc.alpha_per_position), '.2f')} | {fmt(fb.ttft_ms, '.0f')} / {fmt(fc.ttft_ms, '.0f')} | "
        f"{verdict_text(r)} |"
    )


def _md_what_went_wrong(r: PromptResult) -> list[str]:
    """Under the table: where a prompt's two outputs first differ, and a side that failed."""
    out: list[str] = []
    if r.divergence is not None:
        d = r.divergence
        out += [
            "",
            f"## {md_cell(r.prompt.id)}: first difference at byte {d.byte}",
            "",
            "```",
            f"baseline  …{escape_bytes(d.baseline_excerpt)}…",
            f"candidate …{escape_bytes(d.candidate_excerpt)}…",
            "```",
        ]
        cb, cc = r.baseline.figures.prompt_cached, r.candidate.figures.prompt_cached
        out.append(f"\nPrompt tokens reused from cache: baseline {cb}, candidate {cc}.")
    for rec in (r.baseline, r.candidate):
        if rec.failed is not None:
            out += [
                "",
                f"**{md_cell(r.prompt.id)}: {rec.name} failed after {rec.figures.tokens} tokens:** "
                f"{md_cell(rec.failed.message)}",
            ]
    return out


def drafts_lines(r, examples: int = 5) -> list[str]:
    """The draft probe's summary and a few steps: what the draft guessed where the target said no."""
    d = r.drafts
    if not d:
        return []
    out = [f"{'':<18}   drafts: {d.summary()}"]
    toks = r.candidate.tokens
    shown = 0
    for s in d.steps:
        if shown >= examples:
            break
        if not s.agrees or not s.rejected_text:
            continue
        at = s.position + s.accepted
        # the server's text of the target's token; a recording without it falls back on the streamed
        # bytes, which are empty for a token whose UTF-8 was completed by a later one
        wrote = s.target_text.encode() or (toks[at].data if at < len(toks) else b"")
        target = f"'{escape_bytes(wrote)}'" if wrote else "a token whose bytes came with the next one"
        out.append(
            f"{'':<18}     step {s.step} at token {s.position}: kept {s.accepted}/{s.drafted}, "
            f"draft guessed '{escape_bytes(s.rejected_text.encode())}', target wrote {target}"
        )
        shown += 1
    return out


def rejected_by_position(results: list[PromptResult], examples: int = 2) -> list[str]:
    """Where in a draft chain the target says no, per category of prompt: for each chain position of the
    first rejected draft (1 = the first draft), how many steps the probe rebuilt, with examples."""
    table: dict[str, dict[int, list[str]]] = {}
    for r in results:
        for s in r.drafts.steps if r.drafts else []:
            if s.agrees and s.rejected_text:
                cat = table.setdefault(r.prompt.category or "uncategorised", {})
                cat.setdefault(s.accepted + 1, []).append(s.rejected_text)
    if not table:
        return []
    out = ["", "rejected drafts by chain position of the first rejection (from --probe-drafts):"]
    for category, by_pos in sorted(table.items()):
        parts = []
        for pos in sorted(by_pos):
            texts = by_pos[pos]
            shown = ", ".join(f"'{escape_bytes(t.encode())[:24]}'" for t in texts[:examples])
            parts.append(f"{pos}: {len(texts)} ({shown})")
        out.append(f"  {category:<16} " + "; ".join(parts))
    return out
