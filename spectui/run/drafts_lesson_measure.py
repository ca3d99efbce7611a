"""The lesson's measuring phases (run.drafts_lesson, steps 4–5): the trained draft's acceptance per position and
cost on the held-out prompts and the n_max they pay for; `spectui prove` at the chosen n_max, the
certificate's verdict line and, on the F32 copy, the three-way table prove adds (run.three_way)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from spectui.core.errors import SetupError
from spectui.core.headline import from_certificate
from spectui.core.runner import run_prompts
from spectui.labs.drafts.lesson import Lesson, Phase, ThreeWay
from spectui.labs.drafts.train_eagle3 import per_position
from spectui.labs.theory.costs import measure
from spectui.labs.theory.draft_length import RunCost, choose_n_max, draft_cost
from spectui.labs.theory.terms import StepCosts
from spectui.run.lesson_serving import (
    LessonOptions,
    Say,
    Serving,
    Tools,
    backends_for,
    draft_extra,
    greedy_params,
    heldout_prompts,
    http_client,
    median_or_none,
    prove_argv,
    run_prove,
)
from spectui.store.bounded import load_json_object


async def verify_curve(plain, results, top: int):
    """The target's V(k), k = 1 … top, measured on the plain server (labs.theory.costs) on the context of the
    held-out answer with the most tokens: its prompt's text and the first half of the answer cached."""
    best = max(results, key=lambda r: len(r.baseline.tokens))
    out_ids = [t.token_id for t in best.baseline.tokens]
    if not out_ids or any(i is None for i in out_ids):
        return None
    text = " ".join(m.get("content", "") for m in best.prompt.messages) or (best.prompt.raw or "")
    ids = await plain.tokenize(text) + [int(i) for i in out_ids]
    cut = len(ids) - len(out_ids) // 2

    async def timer(p: list[int], n: int):
        return await plain.timed_completion(p, n)

    return await measure(timer, ids[:cut], ids[cut:], list(range(1, top + 1)), repeats=3)


def run_cost(results) -> RunCost:
    rc = RunCost()
    for r in results:
        b, c = r.baseline.figures, r.candidate.figures
        steps = int(c.metrics_steps) if c.metrics_steps else c.steps
        rc.add(c.tokens, c.decode_tps or 0.0, b.decode_tps or 0.0, steps, c.drafted, c.accepted)
    return rc


async def phase_measure(opts: LessonOptions, tools: Tools, les: Lesson, say: Say) -> None:
    if les.phase("measure") and les.choice is not None:
        say(f"measure: kept from the last run (n_max {les.choice.n_max})")
        return
    _, held = heldout_prompts(opts)
    n = opts.probe_n_max
    say(f"measure: the draft at n_max {n} on {len(held)} held-out prompts, then V(k) on the plain server")
    t0 = time.monotonic()
    sides = [("plain", tools.served, []), ("draft", tools.served, draft_extra(opts, les, n))]
    async with Serving(tools, opts.threads, sides) as srv, http_client() as client:
        plain, cand = await backends_for(client, srv.urls)
        results = await run_prompts(plain, cand, held, greedy_params(opts))
        curve = await verify_curve(plain, results, n + 1)
    shares = per_position(results)
    if not shares:
        raise SetupError(
            "the draft's per-position acceptance was not measured (no verification step, or no /metrics)",
            hint=f"see the servers' counters; the draft may not have drafted on {len(held)} prompt(s)",
        )
    target = curve.terms(k_max=n + 1) if curve is not None and curve.measured else StepCosts.ideal(0.0)
    if target.sources.get("verify", "").startswith("ideal"):
        say(
            "measure: V(k) was not measured: the choice below takes verification as free (V = 1), which favours longer drafts"
        )
    rc = run_cost(results)
    c, how = draft_cost(rc, target)
    costs = StepCosts(c or 0.0, target.verify, (), {**target.sources, "c": how})
    les.per_position = list(shares[:n])
    les.probe_n_max = n
    les.acceptance = {"accepted": rc.accepted, "drafted": rc.drafted, "steps": rc.steps}
    les.cost = {
        "c": costs.c,
        "c_source": how,
        "verify": list(costs.verify),
        "verify_source": target.sources.get("verify", ""),
    }
    les.choice = choose_n_max(les.per_position, costs)
    same = sum(1 for r in results if r.identical)
    tokens = sum(r.baseline.figures.tokens + r.candidate.figures.tokens for r in results)
    note = f"{same}/{len(results)} identical; n_max {les.choice.n_max} chosen"
    if target.sources.get("verify", "").startswith("ideal"):
        note += " (V(k) not measured: taken as 1)"
    les.record(Phase("measure", time.monotonic() - t0, srv.peak, tokens, note, "llama-server"))


def certificate_figures(doc: dict) -> dict:
    """The verdict line, the headline and the rates a certificate holds (its derived section)."""
    d = doc["derived"]
    overall = (d.get("speedup") or {}).get("overall") or {}
    rates: dict[str, list] = {"baseline": [], "candidate": []}
    for pp in d["greedy"]["per_prompt"]:
        for side in rates:
            rates[side] += [x for x in (pp.get("decode_tps") or {}).get(side) or [] if x]
    return {
        "verdict": d["verdict"]["line"],
        "headline": from_certificate(d).line,
        "speedup": overall.get("value", overall.get("median")),
        "plain_tps": median_or_none(rates["baseline"]),
        "spec_tps": median_or_none(rates["candidate"]),
    }


def _certificate_dir(out: Path, k: int) -> Path:
    base = out / f"certificate-nmax{k}"
    folder, i = base, 1
    while folder.exists() and any(folder.iterdir()):
        i += 1
        folder = base.with_name(f"{base.name}-{i}")
    return folder


async def phase_prove(opts: LessonOptions, tools: Tools, les: Lesson, say: Say) -> None:
    assert les.choice is not None
    k = les.choice.n_max
    kept = les.done.get("prove") or {}
    if les.phase("prove") and les.certificate and Path(les.certificate).is_file() and kept.get("n_max") == k:
        say(f"prove: kept from the last run ({les.certificate})")
        return
    path, held = heldout_prompts(opts)
    folder = _certificate_dir(opts.out, k)
    say(f"prove: `spectui prove` on {len(held)} held-out prompts at --spec-draft-n-max {k} → {folder}")
    t0 = time.monotonic()
    sides = [("plain", tools.served, []), ("draft", tools.served, draft_extra(opts, les, k))]
    log = opts.out / "prove.log"
    async with Serving(tools, opts.threads, sides) as srv:
        code = await asyncio.to_thread(run_prove, prove_argv(srv.urls, path, opts, folder), log)
    cert = folder / "certificate.json"
    if not cert.is_file():
        tail = (log.read_text(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise SetupError(f"spectui prove wrote no certificate (status {code}): {tail}", hint=f"see {log}")
    fig = certificate_figures(load_json_object(cert, "certificate"))
    les.certificate, les.verdict, les.headline = str(cert), fig["verdict"], fig["headline"]
    les.done["prove"] = {"n_max": k, "exit": code, "speedup": fig["speedup"]}
    three = folder / "three-way.json"  # prove's own table (run.three_way) where the served copy is F32
    if three.is_file():
        d = load_json_object(three, "three-way table")
        les.three_way = ThreeWay(**{k: v for k, v in d.items() if k in ThreeWay.__dataclass_fields__})
    note = f"exit {code}; {fig['headline']}"
    les.record(Phase("prove", time.monotonic() - t0, srv.peak, None, note, "llama-server"))
