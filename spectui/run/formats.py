"""`spectui formats`: each weight format's copy of a model made with llama-quantize, then measured here, one
format at a time (its plain server and an n-gram candidate on the same file, requests one at a time):

- the plain decode rate (the plain server's, over the lesson's prompts and runs);
- V(k) for k = 1 … K as the server verifies: the terms lab's measurement (labs.theory.costs.measure: prompt
  batches of k tokens on a cached prefix) plus every position's logits (labs.theory.outputs, the
  verification-batch probe);
- whether lossless speculation keeps the bytes: ngram-simple 3/8 against the plain server (run.session, B C /
  C B), the verdicts, the margin at a divergence (run.triage), the speed-up over the prompts.

The table and the recommendation are labs.formats.table's; the JSON is written atomically.
"""

from __future__ import annotations

import asyncio
import datetime
import math
import os
import platform
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from spectui.backends.launchspec import LaunchSpec
from spectui.core.errors import InputError, SetupError, describe
from spectui.core.headline import runs_words
from spectui.core.runner import PromptResult, grouped, render_prompt
from spectui.core.stats import over_units, ratio_interval, speed_call
from spectui.core.types import GenerationParams, Prompt
from spectui.labs.formats.kernels import DEFAULT_FORMATS, KNOWN_FORMATS
from spectui.labs.formats.table import FormatRow, FormatsLesson, SpecOutcome, recommend
from spectui.labs.theory import costs, outputs
from spectui.labs.theory.curve import NGRAM
from spectui.machine import assets
from spectui.run.lesson_serving import Serving, Tools, backends_for, http_client
from spectui.run.session import RunOptions, RunSession
from spectui.store.bounded import load_json_file
from spectui.store.locations import atomic_write, data_dir

Say = Callable[[str], None]
# the candidate: lossless n-gram drafting (llama.cpp accepts only the target's own greedy tokens), 3/8 as the
# cpu-demo profile's `ngram` comparison
NGRAM_ARGS = ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", "8"]

FORMATS_MAX = 16 << 20  # a kept table is a few KiB; a formats table far larger is not one


@dataclass
class FormatsOptions:
    model: Path | None = None  # default: spectui's SmolLM2
    formats: tuple[str, ...] = DEFAULT_FORMATS
    prompts: str = "default"  # a prompt set (store.prompts)
    limit: int = 4  # prompts of the set
    max_tokens: int = 64
    runs: int = 3  # runs a prompt (B C / C B)
    k_max: int = 8
    repeats: int = 3  # V(k) repeats, interleaved
    threads: int = 1
    out: Path | None = None  # the JSON kept (default: default_path(model))
    verify: bool = True  # measure V(k)
    extra: dict = field(default_factory=dict)


def default_path(model: Path) -> Path:
    """Where the lesson keeps its table for `model`: the data folder's formats/NAME.json."""
    return data_dir() / "formats" / f"{model.name.removesuffix('.gguf')}.json"


def check_formats(names: tuple[str, ...]) -> tuple[str, ...]:
    """The formats asked for, in llama-quantize's spelling; InputError naming one it does not make."""
    known = {f.upper(): f for f in KNOWN_FORMATS}
    out = []
    for n in names:
        f = known.get(n.strip().upper())
        if f is None:
            raise InputError(f"unknown weight format {n!r}", hint=f"one of {', '.join(KNOWN_FORMATS)}")
        if f not in out:
            out.append(f)
    if not out:
        raise InputError("no formats given", hint=f"for example --formats {','.join(DEFAULT_FORMATS[:2])}")
    return tuple(out)


def resolve(opts: FormatsOptions) -> tuple[Path, Path, Path]:
    """llama-server, llama-quantize and the model, checked before anything runs."""
    server, quantize = assets.find_llama_server(), assets.find_llama_quantize()
    if server is None or quantize is None:
        raise SetupError("llama-server or llama-quantize is missing", hint="run `spectui setup`")
    model = opts.model or assets.find_model()
    if model is None:
        raise SetupError("no model: spectui's SmolLM2 is not downloaded", hint="run `spectui setup` or give MODEL")
    if not model.is_file():
        raise InputError(f"model {model} does not exist", hint="give a GGUF file")
    return server, quantize, model


async def lesson(opts: FormatsOptions, prompts: list[Prompt], say: Say = print) -> FormatsLesson:
    """Every format made, measured in turn; the lesson with its recommendation (not yet written)."""
    server, quantize, model = resolve(opts)
    rows: list[FormatRow] = []
    for fmt in opts.formats:
        try:
            path = await asyncio.to_thread(assets.ensure_format, quantize, model, fmt, say)
        except SetupError as exc:
            say(f"{fmt}: {exc}")
            rows.append(FormatRow(fmt, refused=str(exc)))
            continue
        size = path.stat().st_size
        row = FormatRow(fmt, file=str(path), size_bytes=size)
        say(f"{fmt}: {path.name} ({size / 2**20:.0f} MiB) — plain and n-gram servers …")
        try:
            await measure_format(row, server, path, opts, prompts, say)
        except Exception as exc:  # a server that fails costs this row, never the table
            row.failed = describe(exc)
            say(f"{fmt}: not measured — {row.failed}")
        rows.append(row)
    settings = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {_cpus()} CPUs",
        "threads": opts.threads,
        "prompts": f"{opts.prompts} (first {len(prompts)})",
        "max_tokens": opts.max_tokens,
        "runs": opts.runs,
        "k_max": opts.k_max if opts.verify else None,
        "candidate": "ngram-simple 3/8 against the plain server of the same file",
        "llama_server": str(server),
    }
    return FormatsLesson(str(model), rows, settings, recommend(rows))


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


async def measure_format(
    row: FormatRow, server: Path, path: Path, opts: FormatsOptions, prompts: list[Prompt], say: Say
) -> None:
    """One format's row: its plain and n-gram servers up together on 127.0.0.1, requests one at a time."""
    tools = Tools(server, path, path)
    params = GenerationParams(max_tokens=opts.max_tokens, temperature=0.0, seed=42, cache_prompt=False)
    sides = [("plain", path, []), ("ngram", path, list(NGRAM_ARGS))]
    async with Serving(tools, opts.threads, sides) as srv, http_client() as client:
        plain, ngram = await backends_for(client, srv.urls)
        launched = {
            "baseline": LaunchSpec.from_argv(srv.procs[0].argv),
            "candidate": LaunchSpec.from_argv(srv.procs[1].argv),
        }
        session = RunSession(
            plain,
            ngram,
            params,
            RunOptions(repeat=opts.runs, triage=True, triage_limit=2, launched=launched),
            client=client,
        )
        results = await session.run(prompts)
        fill_spec(row, results)
        if opts.verify:
            await measure_verify(row, plain, launched["baseline"], results, opts, say)
    sp = row.speedup or {}
    said = f"{sp['value']:.2f}×" if sp.get("value") else "—"
    say(
        f"{row.format}: plain {row.plain_tps or 0:.1f} tok/s · V({len(row.verify)}) "
        f"{row.verify[-1] if row.verify else float('nan'):.2f} · identical {row.identical}/{row.compared} · n-gram {said}"
    )


def fill_spec(row: FormatRow, results: list[PromptResult]) -> None:
    """The plain rate, each prompt's verdicts and margins, and the speed-up over the prompts, from a run."""
    rates = [r.baseline.figures.decode_tps for r in results if r.measured and r.baseline.figures.decode_tps]
    row.plain_tps = statistics.median(rates) if rates else None
    units = []
    drafted = accepted = 0
    for g in grouped(results):
        ratios = [r.speedup for r in g.runs if r.speedup]
        if ratios:
            units.append(ratios)
        compared = [r for r in g.runs if r.identical is not None]
        differ = [r for r in compared if r.identical is False]
        first = differ[0] if differ else None
        tri = next((r.triage for r in differ if r.triage is not None), None)
        margin = None
        if tri is not None and isinstance(tri.logprobs, dict):
            m = tri.logprobs.get("margin")
            margin = abs(m) if isinstance(m, int | float) else None
        row.spec.append(
            SpecOutcome(
                g.prompt.id,
                len(g.runs),
                sum(1 for r in compared if r.identical),
                len(compared),
                math.exp(statistics.fmean(math.log(x) for x in ratios)) if ratios else None,
                first.divergence.byte if first is not None and first.divergence is not None else None,
                margin,
                tri.cause if tri is not None else None,
            )
        )
        for r in g.runs:
            if r.measured:
                drafted += r.candidate.figures.drafted or 0
                accepted += r.candidate.figures.accepted or 0
    row.acceptance = accepted / drafted if drafted else None
    if units:
        s = over_units(units) if len(units) >= 2 else ratio_interval(units[0])
        runs = runs_words(sum(len(u) for u in units), len(units))
        row.speedup = {"value": s.median, "low": s.low, "high": s.high, "word": speed_call(s.low, s.high), "runs": runs}


async def measure_verify(row: FormatRow, plain, spec: LaunchSpec, results, opts: FormatsOptions, say: Say) -> None:
    """V(1) … V(K) on the plain server, as it verifies: the terms lab's batches plus every position's logits."""
    last = next((r for r in reversed(results) if r.measured and r.baseline.tokens), None)
    if last is None:
        row.verify_source = "not measured: no plain run finished"
        return
    rendered = last.rendered.get("baseline") or await render_prompt(plain, last.prompt)
    prompt_ids = await plain.tokenize(rendered)
    out = [t.token_id for t in last.baseline.tokens if t.token_id is not None]
    ids = prompt_ids + out
    prefix_len = len(prompt_ids) + len(out) // 2
    prefix, continuation = ids[:prefix_len], ids[prefix_len:]
    ks = range(1, opts.k_max + 1)
    say(f"{row.format}: V(k) for k = 1…{opts.k_max} on a {prefix_len}-token cached prefix, {opts.repeats} repeats …")
    curve = await costs.measure(plain.timed_completion, prefix, continuation, ks, drafting=NGRAM, repeats=opts.repeats)
    await outputs.add_outputs(curve, plain, spec, prefix, ks, opts.repeats, say)
    if not curve.measured:
        row.verify_source = curve.sources.get("verify", "not measured")
        return
    row.verify = list(curve.terms().verify)
    row.verify_source = curve.sources.get("verify", "")


def write(les: FormatsLesson, path: Path) -> Path:
    return atomic_write(path, les.dumps())


def read(path: Path) -> FormatsLesson:
    """A kept table; InputError in one line where the file is missing, not JSON or not a formats table (read
    through the one bounded loader: a FIFO, a huge or deeply nested file is refused before parsing)."""
    if not Path(path).exists():
        raise InputError(f"formats table {path} does not exist", hint="run `spectui formats` first")
    doc = load_json_file(path, "formats table", FORMATS_MAX)
    if not isinstance(doc, dict):
        raise InputError(f"{path}: not a spectui formats table (a JSON {type(doc).__name__})")
    try:
        return FormatsLesson.from_json(doc)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InputError(f"{path}: {exc}", hint="give the JSON `spectui formats` wrote") from None
