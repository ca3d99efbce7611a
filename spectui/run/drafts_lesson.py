"""`spectui drafts lesson`: the trained-draft lesson as one command (issue 37, item 2), each phase timed, its peak
memory and tokens kept in DIR/lesson.json (labs.drafts.lesson):

1. data: a plain llama-server (the target) answers the prompts → DIR/data.jsonl, a share held out →
   DIR/data.heldout.toml (labs.drafts.data; resumable)
2. train: an EAGLE-3 head in the torch environment (labs.drafts.train_eagle3's trainer, `spectui setup
   --vllm`), or a lookup draft (llama-lookup-create's static n-gram cache from the answers)
3. convert (EAGLE-3): llama.cpp's convert_hf_to_gguf.py --target-model-dir → DIR/head.gguf
4. measure: plain and speculative servers on the held-out prompts at a probe n_max: the draft's acceptance
   per position, its cost c (from that run) and the target's V(k) (labs.theory.costs on the plain server);
   --spec-draft-n-max chosen from them (labs.theory.draft_length)
5. plain-quantised (where the servers run another copy of the weights, --f32): plain quantised against plain
   served, paired, for the three-way table
6. prove: `spectui prove` on the held-out prompts against the target served plain and with the draft at the
   chosen n_max → DIR/certificate-nmaxK/certificate.json and its verdict line

A phase whose output is in DIR and recorded in lesson.json is not run again. Servers bind 127.0.0.1 at free
ports and are stopped when their phase ends, whatever happens.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from spectui.core.errors import InputError, SetupError
from spectui.labs.drafts import data as drafts_data
from spectui.labs.drafts.lesson import Lesson, Phase, ThreeWay, read_lesson, write_lesson

Say = Callable[[str], None]
DRAFTS = ("eagle3", "lookup")


@dataclass
class LessonOptions:
    out: Path  # the CLI's default: labs.drafts.lesson.default_dir (the data folder's lessons/)
    prompts: str = ""  # the prompt set the target answers (a share held out)
    draft: str = "eagle3"
    target: Path | None = None  # GGUF (default: spectui's SmolLM2)
    f32: bool = False  # serve the target's F32 copy (verification nearly free on a CPU)
    max_tokens: int = 128
    holdout: float = 0.1
    limit: int | None = None
    epochs: int = 3
    draft_vocab: int = 8192
    ttt: int = 3
    max_steps: int = 0
    probe_n_max: int = 5
    runs: int = 2
    threads: int = 1


@dataclass
class Tools:
    server: Path
    target: Path
    served: Path
    python: Path | None = None  # the torch environment's (EAGLE-3)
    script: Path | None = None  # llama.cpp's convert_hf_to_gguf.py (EAGLE-3)
    lookup_tool: Path | None = None  # llama-lookup-create (lookup)
    extra: dict = field(default_factory=dict)


def resolve_tools(opts: LessonOptions, say: Say = print) -> Tools:
    """Every program and file the lesson needs, checked before anything runs; one line where one is missing."""
    from spectui.machine import assets

    if opts.draft not in DRAFTS:
        raise InputError(f"unknown draft {opts.draft!r}", hint=f"one of {', '.join(DRAFTS)}")
    if opts.out.exists() and not opts.out.is_dir():
        raise InputError(f"{opts.out} is a file", hint="give -o a folder for the lesson")
    found = assets.find_all()
    if found.llama_server is None:
        raise SetupError("llama-server is missing", hint="run `spectui setup`")
    target = opts.target or found.model
    if target is None:
        raise SetupError("no target model: spectui's SmolLM2 is not downloaded", hint="run `spectui setup`")
    if not target.is_file():
        raise InputError(f"target {target} does not exist", hint="give --target a GGUF file")
    tools = Tools(found.llama_server, target, target)
    if opts.draft == "eagle3":
        tools.python = assets.find_vllm_python()
        if tools.python is None:
            raise SetupError(
                "the torch environment (torch + transformers) is missing", hint="run `spectui setup --vllm`"
            )
        tools.script = assets.find_convert_script()
        if tools.script is None:
            raise SetupError("llama.cpp's convert_hf_to_gguf.py is missing", hint="run `spectui setup`")
    if opts.f32 and found.llama_quantize is None:
        raise SetupError("llama-quantize is missing (it makes the F32 copy)", hint="run `spectui setup`")
    if opts.draft == "lookup":  # built from the pinned source where missing (a minute, once)
        tools.lookup_tool = found.lookup_create or assets.ensure_lookup_create(say, None)
    if opts.f32 and found.llama_quantize is not None:
        tools.served = assets.ensure_f32(found.llama_quantize, target, say)
    return tools


def peak_mib(pid: int | None) -> float | None:
    """A live process's peak resident set (VmHWM, Linux); None where it cannot be read."""
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class Serving:
    """llama-servers for one phase: started together, healthy, their peak memory read before they stop."""

    def __init__(self, tools: Tools, threads: int, sides: list[tuple[str, Path, list[str]]]) -> None:
        from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv

        self.launcher = Launcher()
        self.procs = []
        for name, model, extra in sides:
            s = self.launcher.add(
                ServerProcess(name, llama_server_argv(tools.server, model, 0, threads=threads, extra=extra))
            )
            s.argv[s.argv.index("--port") + 1] = str(s.port)
            self.procs.append(s)
        self.peak: float | None = None

    async def __aenter__(self) -> Serving:
        try:
            for s in self.procs:
                await asyncio.to_thread(s.start)
            for s in self.procs:
                await asyncio.to_thread(s.wait_healthy, 180)
        except BaseException:
            await asyncio.to_thread(self.launcher.stop_all)
            raise
        return self

    async def __aexit__(self, *exc) -> None:
        peaks = [p for p in (peak_mib(s.pid) for s in self.procs) if p is not None]
        self.peak = max(peaks) if peaks else None
        await asyncio.to_thread(self.launcher.stop_all)

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.procs]


async def backends_for(client, urls: list[str]):
    from spectui.backends.llamacpp import LlamaCppBackend
    from spectui.core.runner import connect

    out = [LlamaCppBackend(u, client) for u in urls]
    for b in out:
        await connect(b, 180)
    return out


def greedy_params(opts: LessonOptions):
    from spectui.core.types import GenerationParams

    return GenerationParams(max_tokens=opts.max_tokens, temperature=0.0, seed=42, cache_prompt=False)


def http_client():
    import httpx

    return httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10))


async def phase_data(opts: LessonOptions, tools: Tools, les: Lesson, say: Say, advance=None) -> None:
    from spectui.store import prompts as prompt_sets

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
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


async def phase_train(opts: LessonOptions, tools: Tools, les: Lesson, say: Say, advance=None) -> None:
    if opts.draft == "lookup":
        return await _train_lookup(opts, tools, les, say, advance)
    from spectui.labs.drafts import train_eagle3

    done = les.done.get("train") or {}
    if les.phase("train") and done.get("head") and Path(done["head"]).is_dir():
        say(f"train: the head is kept from the last run ({done['head']})")
        return
    data = opts.out / "data.jsonl"
    t_opts = train_eagle3.Options(
        tools.target, data, opts.out, opts.draft_vocab, opts.ttt, opts.epochs, opts.threads, max_steps=opts.max_steps
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
    from spectui.labs.drafts import lookup as lookup_draft
    from spectui.store.locations import atomic_write

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
    from spectui.labs.drafts import train_eagle3

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


def draft_extra(opts: LessonOptions, les: Lesson, n_max: int) -> list[str]:
    """The candidate's llama-server flags for the trained draft at this n_max."""
    if opts.draft == "eagle3":
        from spectui.labs.drafts.train_eagle3 import eagle3_extra

        return eagle3_extra(Path(les.done["convert"]["gguf"]), n_max)
    from spectui.labs.drafts.lookup import server_extra

    return [*server_extra(Path(les.done["train"]["cache"])), "--spec-draft-n-max", str(n_max)]


def heldout_prompts(opts: LessonOptions) -> tuple[Path, list]:
    from spectui.store import prompts as prompt_sets

    path = drafts_data.heldout_path(opts.out / "data.jsonl")
    _, held = prompt_sets.load_set(str(path))
    if not held:
        raise InputError(f"{path} holds no prompts", hint="rerun with --holdout above 0 in a new folder")
    return path, held


async def run_lesson(opts: LessonOptions, say: Say = print, advance=None) -> Lesson:
    """Every phase in order, the record written after each; returns the lesson."""
    from spectui.run.drafts_lesson_measure import phase_measure, phase_plain_quantised, phase_prove

    tools = resolve_tools(opts, say)
    opts.out.mkdir(parents=True, exist_ok=True)
    les = read_lesson(opts.out)
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
        lambda: phase_plain_quantised(opts, tools, les, say),
        lambda: phase_prove(opts, tools, les, say),
    ]
    for step in steps:
        await step()
        write_lesson(opts.out, les)
    say(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return les


def median_or_none(xs) -> float | None:
    vals = [x for x in xs if x]
    return statistics.median(vals) if vals else None


def prove_argv(urls: list[str], heldout: Path, opts: LessonOptions, out: Path) -> list[str]:
    """`spectui prove` on the held-out prompts against the two servers (this Python, `-m spectui`)."""
    return [
        sys.executable,
        "-m",
        "spectui",
        "prove",
        "--baseline",
        urls[0],
        "--candidate",
        urls[1],
        "--prompts",
        str(heldout),
        "--runs",
        str(opts.runs),
        "--sampled",
        "0",
        "--no-notebook",
        "--no-terms",
        "--max-tokens",
        str(opts.max_tokens),
        "-o",
        str(out),
    ]


def run_prove(argv: list[str], log: Path) -> int:
    with open(log, "w") as fh:
        return subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT).returncode


__all__ = ["LessonOptions", "ThreeWay", "run_lesson"]
