"""`spectui drafts lesson`: the trained-draft lesson as one command, each phase timed, its peak
memory and tokens kept in DIR/lesson.json (labs.drafts.lesson):

1. data: a plain llama-server (the target) answers the prompts → DIR/data.jsonl, a share held out →
   DIR/data.heldout.toml (labs.drafts.data; resumable)
2. train: an EAGLE-3 head in the torch environment (labs.drafts.train_eagle3's trainer, `spectui setup
   --vllm`), or a lookup draft (llama-lookup-create's static n-gram cache from the answers)
3. convert (EAGLE-3): llama.cpp's convert_hf_to_gguf.py --target-model-dir → DIR/head.gguf
4. measure: plain and speculative servers on the held-out prompts at a probe n_max: the draft's acceptance
   per position, its cost c (from that run) and the target's V(k) (labs.theory.costs on the plain server);
   --spec-draft-n-max chosen from them (labs.theory.draft_length)
5. prove: `spectui prove` on the held-out prompts against the target served plain and with the draft at the
   chosen n_max → DIR/certificate-nmaxK/certificate.json and its verdict line; on the F32 copy (--f32) prove
   also runs the quantised target plain against the plain F32 server (run.three_way): the three-way table

A phase whose output is in DIR and recorded in lesson.json is not run again. Servers bind 127.0.0.1 at free
ports and are stopped when their phase ends, whatever happens.
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from pathlib import Path

from spectui.core.errors import InputError, SetupError
from spectui.labs.drafts import data as drafts_data
from spectui.labs.drafts import lookup as lookup_draft
from spectui.labs.drafts import train_eagle3
from spectui.labs.drafts.lesson import LESSON_NAME, Lesson, Phase, read_lesson, write_lesson
from spectui.run.drafts_lesson_measure import phase_measure, phase_prove
from spectui.run.lesson_serving import (
    LessonOptions,
    Say,
    Serving,
    Tools,
    backends_for,
    greedy_params,
    http_client,
    resolve_tools,
)
from spectui.store import prompts as prompt_sets
from spectui.store.claim import check_folder, claim_folder, locked
from spectui.store.locations import atomic_write


async def phase_data(opts: LessonOptions, tools: Tools, les: Lesson, say: Say, advance=None) -> None:
    data = opts.out / "data.jsonl"
    if les.phase("data") and data.is_file() and drafts_data.heldout_path(data).is_file():
        say(f"data: kept from the last run ({data})")
        return
    if not opts.prompts:
        raise InputError("the lesson has no data yet and no prompts to write it from", hint="give --prompts SOURCE")
    source, items = prompt_sets.load_set(opts.prompts)
    items = prompt_sets.pick(items, opts.limit)
    if not drafts_data.plan(items, opts.holdout).heldout:
        raise InputError(f"no prompt is held out of {len(items)}", hint="give --holdout above 0 and at least 2 prompts")
    say(f"data: the target answers {len(items)} prompts ({opts.holdout:.0%} held out for the proof)")

    def progress(done: int, total: int, pid: str) -> None:
        if advance is not None:
            advance(f"data: answering {total} prompts", done / total if total else 1.0, pid)

    t0 = time.monotonic()
    async with Serving(tools, opts.threads, [("plain", tools.target, [])]) as srv, http_client() as client:
        (b,) = await backends_for(client, srv.urls)
        d = await drafts_data.generate(
            b, items, data, "speculators", greedy_params(opts), opts.holdout, source, progress
        )
    if d.failed:
        raise SetupError(f"{len(d.failed)} prompt(s) failed: {d.failed[0][1]}", hint="run the lesson again to retry")
    note = f"{d.train_total} training prompts answered ({d.written} now), {d.heldout_count} held out"
    les.record(Phase("data", time.monotonic() - t0, srv.peak, d.tokens, note, "llama-server"))
    les.done["data"] = {"path": str(data), "heldout": str(d.heldout), "train_prompts": d.train_total}


def _child_peak() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


async def phase_train(opts: LessonOptions, tools: Tools, les: Lesson, say: Say, advance=None) -> None:
    if opts.draft == "lookup":
        return await _train_lookup(opts, tools, les, say, advance)

    done = les.done.get("train") or {}
    if les.phase("train") and done.get("head") and Path(done["head"]).is_dir():
        say(f"train: the head is kept from the last run ({done['head']})")
        return
    data = opts.out / "data.jsonl"
    t_opts = train_eagle3.Options(  # by keyword: the trainer's options grow as it is improved
        target=tools.target,
        data=data,
        out=opts.out,
        draft_vocab=opts.draft_vocab,
        ttt=opts.ttt,
        epochs=opts.epochs,
        threads=opts.threads,
        max_steps=opts.max_steps,
    )
    train, _, kept, dropped = train_eagle3.split_heldout(data, None, opts.out)
    say(f"train: an EAGLE-3 head on {kept} records ({dropped} held out) in {tools.python}")
    t0 = time.monotonic()
    assert tools.python is not None
    _, done = await asyncio.to_thread(
        train_eagle3.run_trainer, tools.python, t_opts, train, opts.out / "train.log", advance
    )
    acc = (done.get("train_accuracy") or [[]])[-1]
    note = (
        f"{done.get('trainable', 0):,} parameters, draft vocabulary {done.get('draft_vocab', 0):,} covering "
        f"{done.get('coverage', 0):.1%}; last epoch's top-1 per TTT step "
        + ", ".join(f"{a:.0%}" if a is not None else "—" for a in acc)
    )
    les.record(
        Phase("train", time.monotonic() - t0, done.get("max_rss_mib"), done.get("answer_tokens"), note, "the trainer")
    )
    les.done["train"] = done


async def _train_lookup(opts: LessonOptions, tools: Tools, les: Lesson, say: Say, advance=None) -> None:
    cache = opts.out / "lookup.bin"
    if les.phase("train") and cache.is_file():
        say(f"train: the lookup cache is kept from the last run ({cache})")
        return
    records = drafts_data.read_records(opts.out / "data.jsonl")
    corpus = opts.out / "corpus.txt"
    atomic_write(corpus, drafts_data.corpus_text(records))
    say(f"train: llama-lookup-create on the answers of {len(records)} records → {cache}")
    before, t0 = _child_peak(), time.monotonic()
    assert tools.lookup_tool is not None
    _, stats = await asyncio.to_thread(
        lookup_draft.build_cache,
        tools.lookup_tool,
        tools.target,
        corpus,
        cache,
        opts.out / "lookup-create.log",
        advance,
    )
    after = _child_peak()
    note = f"{stats.ngrams:,} contexts, {stats.continuations:,} continuations, {stats.bytes:,} bytes"
    les.record(
        Phase(
            "train",
            time.monotonic() - t0,
            after if after > before else None,
            stats.observations,
            note,
            "llama-lookup-create",
        )
    )
    les.done["train"] = {"cache": str(cache)}


async def phase_convert(opts: LessonOptions, tools: Tools, les: Lesson, say: Say) -> None:
    gguf = opts.out / "head.gguf"
    if opts.draft != "eagle3":
        return
    if les.phase("convert") and gguf.is_file():
        say(f"convert: kept from the last run ({gguf})")
        return
    done = les.done["train"]
    say(f"convert: {done['head']} with {Path(str(tools.script)).name} --target-model-dir")
    before, t0 = _child_peak(), time.monotonic()
    assert tools.python is not None and tools.script is not None
    _, lines = await asyncio.to_thread(
        train_eagle3.convert,
        tools.python,
        tools.script,
        Path(done["head"]),
        Path(done["target_dir"]),
        gguf,
        opts.out / "convert.log",
    )
    after = _child_peak()
    note = f"{gguf.name}, {gguf.stat().st_size:,} bytes; " + "; ".join(x.strip() for x in lines[:2])
    les.record(Phase("convert", time.monotonic() - t0, after if after > before else None, None, note, "the converter"))
    les.done["convert"] = {"gguf": str(gguf)}


async def run_lesson(opts: LessonOptions, say: Say = print, advance=None) -> Lesson:
    """Every phase in order, the record written after each; returns the lesson. The folder is claimed
    (store.claim: new, empty or spectui's) and locked, and its lesson.json read and checked, before any
    tool is looked for or server started."""
    check_folder(opts.out, "-o", legacy_mark=LESSON_NAME)
    tools = None if opts.out.is_dir() else resolve_tools(opts, say)  # a new folder is made once tools are found
    claim_folder(opts.out, "-o", "drafts lesson", legacy_mark=LESSON_NAME)
    with locked(opts.out, "-o"):
        les = read_lesson(opts.out)
        return await _run_locked(opts, tools or resolve_tools(opts, say), les, say, advance)


async def _run_locked(opts: LessonOptions, tools: Tools, les: Lesson | None, say: Say, advance) -> Lesson:
    if les is not None and (les.draft != opts.draft or Path(les.target) != tools.target):
        raise InputError(
            f"{opts.out} holds a lesson of a {les.draft} draft for {Path(les.target).name}",
            hint="give -o another folder (or the same --draft and --target to resume it)",
        )
    if les is None:
        les = Lesson(opts.draft, str(tools.target), str(tools.served))
    elif Path(les.served) != tools.served:  # another copy served: the measurements after training are redone
        les.served = str(tools.served)
        les.phases = [p for p in les.phases if p.name in ("data", "train", "convert")]
        les.per_position = les.cost = les.choice = les.verdict = les.certificate = les.three_way = None
    say(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    steps = [
        lambda: phase_data(opts, tools, les, say, advance),
        lambda: phase_train(opts, tools, les, say, advance),
        lambda: phase_convert(opts, tools, les, say),
        lambda: phase_measure(opts, tools, les, say),
        lambda: phase_prove(opts, tools, les, say),
    ]
    for step in steps:
        await step()
        write_lesson(opts.out, les)
    say(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return les


__all__ = ["LessonOptions", "run_lesson"]
