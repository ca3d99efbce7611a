"""`spectui drafts train-lookup`: the whole lookup-draft path on this machine, step by step.

1. a plain llama-server (the target) answers the training prompts → DIR/data.jsonl (speculators rows:
   exact token ids and text; resumable), the held-out prompts → DIR/data.heldout.toml
2. the answers' text → DIR/corpus.txt
3. llama-lookup-create → DIR/lookup.bin (the static n-gram cache)
4. two more llama-servers, ngram-cache speculation without and with --lookup-cache-static, and the
   held-out prompts on all three (cache_prompt off, greedy): identical to the plain server? accepted drafts?

Every server is started here on 127.0.0.1 at a free port and stopped at the end, whatever happens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from spectui.backends.llamacpp import LlamaCppBackend
from spectui.core.errors import InputError, SetupError
from spectui.core.runner import connect
from spectui.core.types import GenerationParams
from spectui.labs.drafts import data as drafts_data
from spectui.labs.drafts import lookup as lookup_draft
from spectui.machine import assets
from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv
from spectui.store import notebook
from spectui.store import prompts as prompt_sets
from spectui.store.claim import claim_folder, locked
from spectui.store.locations import atomic_write


@dataclass
class Outcome:
    out_dir: Path
    steps: list[tuple[str, list[str]]] = field(default_factory=list)  # (what, argv) of every program run
    data: drafts_data.DataResult | None = None
    corpus_bytes: int = 0
    cache: lookup_draft.CacheStats | None = None
    cache_path: Path | None = None
    heldout: int = 0
    proof: lookup_draft.Proof | None = None
    infos: dict = field(default_factory=dict)  # server name → ServerInfo

    def to_json(self) -> dict:
        return {
            "out_dir": str(self.out_dir),
            "steps": [{"what": w, "argv": a} for w, a in self.steps],
            "data": self.data.to_json() if self.data else None,
            "corpus_bytes": self.corpus_bytes,
            "cache": asdict(self.cache) if self.cache else None,
            "cache_path": str(self.cache_path) if self.cache_path else None,
            "heldout_prompts": self.heldout,
            "proof": self.proof.to_json() if self.proof else None,
        }

    def text(self) -> str:
        lines = ["steps (argv lists, run in this order):"]
        lines += [f"  {w}: {' '.join(a)}" for w, a in self.steps]
        if self.data:
            d = self.data
            lines.append(
                f"data: {d.train_total} training prompts answered by the target ({d.written} now, "
                f"{d.skipped_done} already there) → {d.out}; {self.heldout} held out → {d.heldout}"
            )
        if self.cache:
            c = self.cache
            lines.append(
                f"lookup cache: {self.cache_path} ({c.bytes:,} bytes): {c.ngrams:,} 2-grams, "
                f"{c.continuations:,} continuations, {c.observations:,} corpus tokens hashed "
                f"(corpus {self.corpus_bytes:,} bytes)"
            )
        if self.proof:
            lines += ["", lookup_draft.proof_text(self.proof)]
        return "\n".join(lines)

    def notebook_rows(self, profile: str | None = None) -> list[dict]:
        """One measurement per held-out prompt and candidate, as compare writes them, marked as this lab's."""
        rows: list[dict] = []
        if self.proof is None:
            return rows
        for static, results, name in (
            (True, self.proof.results_with, "with-static"),
            (False, self.proof.results_without, "no-static"),
        ):
            infos = {"baseline": self.infos["plain"], "candidate": self.infos[name]}
            for m in notebook.measurements(results, infos, profile):
                m["lab"] = "drafts-lookup"
                m["lookup_cache_static"] = str(self.cache_path) if static else "none"
                rows.append(m)
        return rows


Say = Callable[[str], None]


async def _tools(model: Path | None, say: Say, advance) -> tuple[Path, Path, Path]:
    """llama-server, the target model (`model` or spectui's) and llama-lookup-create (built where missing),
    or one line saying what is missing."""
    found = assets.find_all()
    model = model or found.model
    server = found.llama_server
    if server is None or model is None:
        raise SetupError("llama-server or the model is missing", hint="run `spectui setup`")
    if not Path(model).is_file():
        raise InputError(f"model {model} does not exist")
    tool = found.lookup_create
    if tool is None:
        tool = await asyncio.to_thread(assets.ensure_lookup_create, say, advance)
    return server, model, tool


def _split_prompts(prompts_source: str, limit: int | None, holdout: float, out_dir: Path):
    """The prompt set split into training and held-out prompts, and the output folder made; one line where
    no prompt is held out or the folder is a file."""
    source, items = prompt_sets.load_set(prompts_source)
    items = prompt_sets.pick(items, limit)
    plan = drafts_data.plan(items, holdout)
    if not plan.heldout:
        raise InputError(
            f"no prompt is held out of {len(plan.train)}", hint="give --holdout above 0 and at least 2 prompts"
        )
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir} is a file", hint="give -o a folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    return source, items, plan


async def _build_cache(outcome: Outcome, data_path: Path, tool: Path, model: Path, say: Say, advance) -> Path:
    """Steps 2–3: the target's answers as one corpus, and llama-lookup-create's static n-gram cache from it."""
    out_dir = outcome.out_dir
    corpus = out_dir / "corpus.txt"
    text = drafts_data.corpus_text(drafts_data.read_records(data_path))
    atomic_write(corpus, text)
    outcome.corpus_bytes = len(text.encode())
    cache = out_dir / "lookup.bin"
    say(f"step 2–3: corpus {corpus} ({outcome.corpus_bytes:,} bytes) → llama-lookup-create → {cache}")
    argv, outcome.cache = await asyncio.to_thread(
        lookup_draft.build_cache, tool, Path(model), corpus, cache, out_dir / "lookup-create.log", advance
    )
    outcome.steps.append(("llama-lookup-create", argv))
    outcome.cache_path = cache
    return cache


async def run_pipeline(
    out_dir: Path,
    prompts_source: str,
    model: Path | None = None,
    max_tokens: int = 128,
    holdout: float = 0.2,
    limit: int | None = None,
    threads: int = 1,
    say: Say = print,
    advance=None,
) -> Outcome:
    """The folder claimed (new, empty or spectui's) and locked, then the run."""
    claim_folder(out_dir, "-o", "drafts train-lookup")
    with locked(out_dir, "-o"):
        return await _run_pipeline(out_dir, prompts_source, model, max_tokens, holdout, limit, threads, say, advance)


async def _run_pipeline(out_dir, prompts_source, model, max_tokens, holdout, limit, threads, say, advance) -> Outcome:
    server, model, tool = await _tools(model, say, advance)
    source, items, plan = _split_prompts(prompts_source, limit, holdout, out_dir)
    outcome = Outcome(out_dir, heldout=len(plan.heldout))
    params = GenerationParams(max_tokens=max_tokens, temperature=0.0, seed=42, cache_prompt=False)

    def spec(name: str, extra: list[str]) -> ServerProcess:
        return ServerProcess(name, llama_server_argv(server, model, 0, threads=threads, extra=extra))

    launcher = Launcher()
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10)) as client:
            plain = launcher.add(spec("plain", []))
            plain.argv[plain.argv.index("--port") + 1] = str(plain.port)
            outcome.steps.append(("the target, plain", plain.argv))
            say(f"starting the target on {plain.url}")
            await asyncio.to_thread(plain.start)
            await asyncio.to_thread(plain.wait_healthy, 120)
            target = LlamaCppBackend(plain.url, client)
            outcome.infos["plain"] = await connect(target, 120)

            data_path = out_dir / "data.jsonl"
            say(f"step 1: the target answers {len(plan.train)} training prompts → {data_path}")

            def progress(done: int, total: int, pid: str) -> None:
                if advance is not None:
                    advance(f"answering {total} prompts", done / total if total else 1.0, pid)

            outcome.data = await drafts_data.generate(
                target, items, data_path, "speculators", params, holdout, source, progress
            )
            if outcome.data.failed:
                pid, why = outcome.data.failed[0]
                raise SetupError(f"{len(outcome.data.failed)} prompt(s) failed ({pid}: {why})", hint="run it again")

            cache = await _build_cache(outcome, data_path, tool, model, say, advance)

            servers = {
                "no-static": launcher.add(spec("no-static", lookup_draft.server_extra(None))),
                "with-static": launcher.add(spec("with-static", lookup_draft.server_extra(cache))),
            }
            for name, s in servers.items():
                s.argv[s.argv.index("--port") + 1] = str(s.port)
                outcome.steps.append((f"candidate, ngram-cache {name}", s.argv))
            say("step 4: serving ngram-cache without and with the static cache")
            for s in servers.values():
                await asyncio.to_thread(s.start)
            for s in servers.values():
                await asyncio.to_thread(s.wait_healthy, 120)
            backends = {name: LlamaCppBackend(s.url, client) for name, s in servers.items()}
            for name, b in backends.items():
                outcome.infos[name] = await connect(b, 120)
            say(f"proving on {len(plan.heldout)} held-out prompts (greedy, prompt cache off)")
            outcome.proof = await lookup_draft.prove(
                target, backends["no-static"], backends["with-static"], plan.heldout, params
            )
    finally:
        await asyncio.to_thread(launcher.stop_all)
    return outcome
