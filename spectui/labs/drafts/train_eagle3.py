"""`spectui drafts train-eagle3`: an EAGLE-3 head for the target, trained on this CPU, converted, served, checked.

1. the training records minus any prompt of the held-out set (DATA.heldout.toml, written by `drafts data`)
   → DIR/train.jsonl; the held-out prompts never reach the trainer
2. the trainer (eagle3_train.py) runs as a child of the torch environment's Python (`spectui setup --vllm`),
   one thread by default (measured faster than two on this shared 2-core machine): features, vocabulary,
   test-time training, DIR/head/ in SpecForge's LlamaForCausalLMEagle3 layout. torch never enters spectui.
3. llama.cpp's own convert_hf_to_gguf.py --target-model-dir → DIR/head.gguf ("Detected EAGLE-3 draft model")
4. a plain llama-server and one with `-md DIR/head.gguf --spec-type draft-eagle3` answer the held-out prompts
   (greedy, prompt cache off): success only if the head drafted, had drafts accepted, and every output is
   identical to the plain server's.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from spectui.backends.llamacpp import LlamaCppBackend
from spectui.core.errors import InputError, SetupError
from spectui.core.runner import connect, run_prompts
from spectui.core.types import GenerationParams
from spectui.labs.drafts import data as drafts_data
from spectui.labs.drafts import lookup as lookup_draft
from spectui.machine import assets
from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv
from spectui.store import prompts as prompt_sets
from spectui.store.claim import claim_folder, locked
from spectui.store.locations import atomic_write

TRAINER = Path(__file__).with_name("eagle3_train.py")
Say = Callable[[str], None]


@dataclass
class Options:
    target: Path
    data: Path
    out: Path
    draft_vocab: int = 8192
    ttt: int = 3
    epochs: int = 3
    threads: int = 1
    heldout: Path | None = None  # a prompt set; default DATA.heldout.toml
    serve_model: Path | None = None  # the GGUF llama-server runs (default: --target when it is a GGUF)
    n_max: int = 3
    max_tokens: int = 128
    max_steps: int = 0  # stop training after N steps (tests)
    aux: str = ""
    lr: float = 5e-4
    eval_data: Path | None = None  # answers to prompts never trained on: top-1 per TTT step each epoch


@dataclass
class Outcome:
    out_dir: Path
    steps: list[tuple[str, list[str]]] = field(default_factory=list)
    records: int = 0
    dropped_heldout: int = 0
    train: dict = field(default_factory=dict)  # the trainer's `done` event
    seconds: dict = field(default_factory=dict)  # phase → wall seconds
    gguf: Path | None = None
    gguf_bytes: int = 0
    convert_lines: list[str] = field(default_factory=list)
    proof: lookup_draft.SideTotals | None = None
    per_position: list[float] | None = None  # accepted at draft position i / verification steps
    results: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        p = self.proof
        return p is not None and p.accepted > 0 and p.differs == 0 and p.no_verdict == 0 and p.identical > 0

    def to_json(self) -> dict:
        return {
            "out_dir": str(self.out_dir),
            "steps": [{"what": w, "argv": a} for w, a in self.steps],
            "records": self.records,
            "dropped_heldout": self.dropped_heldout,
            "train": self.train,
            "seconds": self.seconds,
            "gguf": str(self.gguf) if self.gguf else None,
            "gguf_bytes": self.gguf_bytes,
            "proof": self.proof.to_json() if self.proof else None,
            "accepted_per_position": self.per_position,
            "ok": self.ok,
        }

    def text(self) -> str:
        t = self.train
        lines = ["steps (argv lists, run in this order):"]
        lines += [f"  {w}: {' '.join(a)}" for w, a in self.steps]
        if t:
            acc = t.get("train_accuracy") or [[]]
            lines.append(
                f"trained: {t['trainable']:,} parameters on {t['answer_tokens']:,} answer tokens of {t['records']} "
                f"records ({self.dropped_heldout} held-out records dropped); aux layers {t['aux_layers']}; "
                f"draft vocabulary {t['draft_vocab']:,} covering {t['coverage']:.1%} of the training answer tokens; "
                f"last epoch's training top-1 per TTT step "
                + ", ".join(f"{a:.0%}" if a is not None else "—" for a in acc[-1])
            )
            held = [e for e in t.get("eval_accuracy") or [] if e]
            if held:
                lines.append(
                    "top-1 per TTT step on answers never trained on, after the last epoch: "
                    + ", ".join(f"{a:.0%}" if a is not None else "—" for a in held[-1])
                )
            lines.append(f"trainer: {t['threads']} thread(s), peak memory {t['max_rss_mib']:,} MiB")
        if self.seconds:
            lines.append("time: " + ", ".join(f"{k} {v:.0f} s" for k, v in self.seconds.items()))
        if self.gguf:
            lines.append(f"converted: {self.gguf} ({self.gguf_bytes:,} bytes)")
        if self.proof:
            p = self.proof
            pos = ", ".join(f"{x:.0%}" for x in self.per_position) if self.per_position else "—"
            lines.append(
                f"held-out prompts: {p.accepted}/{p.drafted} drafted tokens accepted "
                f"({(p.acceptance_rate or 0):.0%}), per draft position {pos}; outputs: {p.identical} identical"
                + (f", {p.differs} DIFFER" if p.differs else "")
                + (f", {p.no_verdict} no verdict" if p.no_verdict else "")
                + (f"; one run a prompt: {p.speedup_median:.2f}× (not a claim)" if p.speedup_median else "")
            )
        lines.append(
            "verdict: the head converts, loads, drafts, is accepted and keeps every held-out output identical"
            if self.ok
            else "verdict: NOT proven (see above)"
        )
        return "\n".join(lines)


def split_heldout(data: Path, heldout: Path | None, out: Path) -> tuple[Path, list, int, int]:
    """DIR/train.jsonl: the records whose prompt is not held out; returns (its path, the held-out prompts,
    records kept, records dropped). A record is held out by its prompt id or by the same messages."""
    if not data.is_file():
        raise InputError(f"training data {data} does not exist", hint="write it with `spectui drafts data`")
    hp = heldout or drafts_data.heldout_path(data)
    if not hp.is_file():
        raise InputError(
            f"no held-out prompts: {hp} does not exist",
            hint="write the data with `spectui drafts data --holdout 0.1`, or give --heldout PROMPTS",
        )
    _, held = prompt_sets.load_set(str(hp))
    if not held:
        raise InputError(f"{hp} holds no prompts", hint="hold some out: `spectui drafts data --holdout 0.1`")
    ids = {p.id for p in held}
    texts = {m["content"] for p in held for m in (p.messages or []) if m.get("role") == "user"}
    kept, dropped = [], 0
    for rec in drafts_data.read_records(data):
        text = rec.get("text") or json.dumps(rec.get("conversations") or rec.get("messages") or "")
        if drafts_data.record_id(rec) in ids or any(t and t in text for t in texts):
            dropped += 1
            continue
        kept.append(json.dumps(rec, ensure_ascii=False))
    if not kept:
        raise InputError(f"{data} has no record left once the held-out prompts are removed")
    path = out / "train.jsonl"
    atomic_write(path, "\n".join(kept) + "\n")
    return path, held, len(kept), dropped


def run_trainer(python: Path, opts: Options, train: Path, log: Path, advance=None) -> tuple[list[str], dict]:
    """The child process; its JSON events drive the progress bar; returns (argv, its `done` event)."""
    argv = [str(python), str(TRAINER), "--target", str(opts.target), "--data", str(train), "--out", str(opts.out)]
    argv += ["--draft-vocab", str(opts.draft_vocab), "--ttt", str(opts.ttt), "--epochs", str(opts.epochs)]
    argv += ["--threads", str(opts.threads), "--lr", str(opts.lr)]
    argv += ["--aux", opts.aux] if opts.aux else []
    argv += ["--max-steps", str(opts.max_steps)] if opts.max_steps else []
    argv += ["--eval", str(opts.eval_data)] if opts.eval_data else []
    env = {**os.environ, "OMP_NUM_THREADS": str(opts.threads), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "0"}
    done: dict = {}
    error = ""
    with open(log, "w") as errf:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errf, text=True, env=env)
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("event") == "progress" and advance is not None:
                what = "features" if ev["phase"] == "features" else f"training, epoch {ev.get('epoch')}"
                frac = ev.get("step", ev.get("done", 0)) / max(1, ev["total"])
                advance(f"{what} (ETA {ev.get('eta', 0):.0f} s)", frac, "")
            elif ev.get("event") == "done":
                done = ev
            elif ev.get("event") == "error":
                error = ev.get("message", "")
        code = proc.wait()
    if code != 0 or not done:
        raise SetupError(f"training the EAGLE-3 head failed (status {code}): {error or trainer_failure(log, opts.out)}",
                         hint=f"see {log}")  # fmt: skip
    return argv, done


_DAMAGED = re.compile(r"UnpicklingError|PytorchStreamReader|EOFError|invalid load key|failed finding central directory")


def trainer_failure(log: Path, out: Path) -> str:
    """What the trainer's log says went wrong, in one line: a damaged file it was loading is named (a
    checkpoint.pt cut by a full disk used to end in the unpickler's last line alone)."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    if not lines:
        return "no output"
    loading = [ln.split("spectui-trainer: loading ", 1)[1] for ln in lines if "spectui-trainer: loading " in ln]
    if loading and any(_DAMAGED.search(ln) for ln in lines):
        return f"{loading[-1]} is corrupt ({lines[-1] if not lines[-1].startswith('spectui-trainer') else lines[-2]}): delete it to start afresh"
    return lines[-1]


def convert(
    python: Path, script: Path, head: Path, target_dir: Path, out: Path, log: Path
) -> tuple[list[str], list[str]]:
    """llama.cpp's converter, written beside and renamed into place; returns (argv, its EAGLE-3 log lines)."""
    tmp = out.with_name(out.stem + ".part.gguf")
    argv = [str(python), str(script), str(head), "--outfile", str(tmp), "--target-model-dir", str(target_dir)]
    with open(log, "w") as fh:
        code = subprocess.run(
            argv, stdout=fh, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"}
        ).returncode
    text = log.read_text(errors="replace")
    if code != 0 or not tmp.is_file() or "Detected EAGLE-3 draft model" not in text:
        tmp.unlink(missing_ok=True)
        tail = text.strip().splitlines()[-1:] or ["no output"]
        raise SetupError(f"convert_hf_to_gguf.py did not convert the head: {tail[0]}", hint=f"see {log}")
    os.replace(tmp, out)
    return argv, [ln.split("hf-to-gguf:", 1)[-1] for ln in text.splitlines() if "EAGLE-3" in ln]


def per_position(results) -> list[float] | None:
    """Σ accepted at draft position i / Σ verification steps, over the candidate's runs (llama.cpp /metrics)."""
    acc: list[float] = []
    steps = 0.0
    for r in results:
        f = r.candidate.figures
        if not f.accepted_per_position or not f.metrics_steps:
            continue
        steps += f.metrics_steps
        for i, a in enumerate(f.accepted_per_position):
            acc += [0.0] * (i + 1 - len(acc))
            acc[i] += a
    return [a / steps for a in acc] if steps else None


def eagle3_extra(head: Path, n_max: int) -> list[str]:
    """llama-server flags serving a converted head beside its target (common/arg.cpp --spec-type, -md)."""
    return ["-md", str(head), "--spec-type", "draft-eagle3", "--spec-draft-n-max", str(n_max)]


def resolve(opts: Options) -> tuple[Path, Path, Path, Path]:
    """(torch Python, converter, llama-server, the GGUF served), or one clear error saying what to do."""
    if not opts.target.exists():
        raise InputError(f"target {opts.target} does not exist", hint="give a GGUF file or a Hugging Face folder")
    if opts.target.is_dir() and not (opts.target / "config.json").is_file():
        raise InputError(f"{opts.target} has no config.json", hint="give a GGUF file or a Hugging Face folder")
    python = assets.find_vllm_python()
    if python is None:
        raise SetupError("the torch environment is missing", hint="run `spectui setup --vllm` (torch for CPU, once)")
    script = assets.find_convert_script()
    server = assets.find_llama_server()
    if script is None or server is None:
        raise SetupError("llama.cpp's source or llama-server is missing", hint="run `spectui setup`")
    serve = opts.serve_model or (opts.target if opts.target.is_file() else assets.find_model())
    if serve is None or not serve.is_file():
        raise InputError("no GGUF to serve the target with", hint="give --model GGUF (the target's weights)")
    return python, script, server, serve


async def run_pipeline(opts: Options, say: Say = print, advance=None) -> Outcome:
    """The folder claimed (new, empty or spectui's: its inputs may sit in it) and locked, then the run."""
    inputs = [
        p for p in (opts.data, drafts_data.heldout_path(opts.data), opts.heldout, opts.target, opts.serve_model) if p
    ]
    claim_folder(opts.out, "-o", "drafts train-eagle3", inputs)
    with locked(opts.out, "-o"):
        return await _run_pipeline(opts, say, advance)


async def _run_pipeline(opts: Options, say: Say, advance) -> Outcome:
    python, script, server, serve = resolve(opts)
    outcome = Outcome(opts.out)
    train, held, outcome.records, outcome.dropped_heldout = split_heldout(opts.data, opts.heldout, opts.out)
    say(f"training on {outcome.records} records ({outcome.dropped_heldout} held out) in {python.parent.parent}")
    t0 = time.monotonic()
    argv, outcome.train = await asyncio.to_thread(run_trainer, python, opts, train, opts.out / "train.log", advance)
    outcome.steps.append(("train (torch, CPU)", argv))
    outcome.seconds = {**outcome.train.get("seconds", {}), "trainer total": time.monotonic() - t0}
    outcome.gguf = opts.out / "head.gguf"
    say(f"converting {outcome.train['head']} with {script.name} --target-model-dir")
    t1 = time.monotonic()
    argv, outcome.convert_lines = await asyncio.to_thread(
        convert,
        python,
        script,
        Path(outcome.train["head"]),
        Path(outcome.train["target_dir"]),
        outcome.gguf,
        opts.out / "convert.log",
    )
    outcome.seconds["convert"] = time.monotonic() - t1
    outcome.steps.append(("convert (llama.cpp)", argv))
    outcome.gguf_bytes = outcome.gguf.stat().st_size
    params = GenerationParams(max_tokens=opts.max_tokens, temperature=0.0, seed=42, cache_prompt=False)
    launcher = Launcher()
    t2 = time.monotonic()
    try:
        specs = {
            "plain": ServerProcess("plain", llama_server_argv(server, serve, 0, threads=opts.threads)),
            "eagle3": ServerProcess(
                "eagle3",
                llama_server_argv(server, serve, 0, threads=opts.threads, extra=eagle3_extra(outcome.gguf, opts.n_max)),
            ),
        }
        for name, s in specs.items():
            launcher.add(s)
            s.argv[s.argv.index("--port") + 1] = str(s.port)
            outcome.steps.append((f"serve, {name}", s.argv))
        say("serving the target plain and with the head (--spec-type draft-eagle3)")
        for s in specs.values():
            await asyncio.to_thread(s.start)
        for s in specs.values():
            await asyncio.to_thread(s.wait_healthy, 120)
        async with httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10)) as client:
            plain, cand = (LlamaCppBackend(s.url, client) for s in specs.values())
            await connect(plain, 120)
            await connect(cand, 120)
            say(f"checking on {len(held)} held-out prompts (greedy, prompt cache off)")
            outcome.results = await run_prompts(plain, cand, held, params)
    finally:
        await asyncio.to_thread(launcher.stop_all)
    outcome.seconds["serve + check"] = time.monotonic() - t2
    totals = lookup_draft.SideTotals("draft-eagle3")
    for r in outcome.results:
        totals.add(r)
    outcome.proof = totals
    outcome.per_position = per_position(outcome.results)
    return outcome
