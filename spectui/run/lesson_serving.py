"""What every phase of `spectui drafts lesson` shares (run.drafts_lesson, run.drafts_lesson_measure,
run.three_way): the lesson's options, the programs and files it needs (checked before anything runs), and
llama-servers for one phase — started together on 127.0.0.1, their peak memory read before they stop."""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from spectui.backends import spectypes
from spectui.backends.llamacpp import LlamaCppBackend
from spectui.core.errors import InputError, SetupError
from spectui.core.runner import connect
from spectui.core.types import GenerationParams
from spectui.labs.drafts import data as drafts_data
from spectui.labs.drafts.lesson import Lesson
from spectui.labs.drafts.lookup import server_extra
from spectui.labs.drafts.train_eagle3 import eagle3_extra
from spectui.machine import assets
from spectui.machine.gguf import require_gguf
from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv
from spectui.store import prompts as prompt_sets

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
    formats_table: Path | None = (
        None  # `spectui formats`' kept table: prove prints the n-way table under its certificate
    )


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
    if opts.draft not in DRAFTS:
        raise InputError(f"unknown draft {opts.draft!r}", hint=f"one of {', '.join(DRAFTS)}")
    candidate_flags = server_extra(None) if opts.draft == "lookup" else eagle3_extra(Path("head.gguf"), 1)
    note = spectypes.state_note(spectypes.chain_from_argv(candidate_flags))
    if note is not None and opts.runs < 2:  # prove refuses it: said here, before any data or training
        raise InputError(
            f"--runs {opts.runs}: the {opts.draft} draft's drafter keeps state between requests ({note}), so its "
            "proof needs a warm run of each prompt",
            hint="give --runs 2 or more",
        )
    if opts.out.exists() and not opts.out.is_dir():
        raise InputError(f"{opts.out} is a file", hint="give -o a folder for the lesson")
    found = assets.find_all()
    if found.llama_server is None:
        raise SetupError("llama-server is missing", hint="run `spectui setup`")
    target = opts.target or found.model
    if target is None:
        raise SetupError("no target model: spectui's SmolLM2 is not downloaded", hint="run `spectui setup`")
    target = require_gguf(target, "--target")  # a FIFO refused unopened, a non-model before any server
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
    out = [LlamaCppBackend(u, client) for u in urls]
    for b in out:
        await connect(b, 180)
    return out


def greedy_params(opts: LessonOptions):
    return GenerationParams(max_tokens=opts.max_tokens, temperature=0.0, seed=42, cache_prompt=False)


def http_client():
    return httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10))


def draft_extra(opts: LessonOptions, les: Lesson, n_max: int) -> list[str]:
    """The candidate's llama-server flags for the trained draft at this n_max."""
    if opts.draft == "eagle3":
        return eagle3_extra(Path(les.done["convert"]["gguf"]), n_max)

    return [*server_extra(Path(les.done["train"]["cache"])), "--spec-draft-n-max", str(n_max)]


def heldout_prompts(opts: LessonOptions) -> tuple[Path, list]:
    path = drafts_data.heldout_path(opts.out / "data.jsonl")
    _, held = prompt_sets.load_set(str(path))
    if not held:
        raise InputError(f"{path} holds no prompts", hint="rerun with --holdout above 0 in a new folder")
    return path, held


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
        *(["--formats-table", str(opts.formats_table)] if opts.formats_table else []),
    ]


def run_prove(argv: list[str], log: Path) -> int:
    with open(log, "w") as fh:
        return subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT).returncode
