"""`spectui drafts …`: what a trained draft costs (cost), training data written by the target (data),
and a lookup draft learned from the target's outputs, served and proven here (train-lookup)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import httpx

from spectui.backends.detect import api_key_from, resolve
from spectui.backends.registry import KIND_CHOICES
from spectui.cli.commands import COMMANDS
from spectui.cli.common import EXIT_DIFFERS, EXIT_OK, EXIT_SERVER, append_to_notebook
from spectui.cli.drafts_lesson import cmd_lesson, register_lesson
from spectui.cli.outputs import check_gguf, check_notebook
from spectui.cli.progress import Advance
from spectui.core.errors import InputError
from spectui.core.runner import connect
from spectui.core.types import checked_params
from spectui.labs.drafts import cost as drafts
from spectui.labs.drafts import train_eagle3, train_lookup
from spectui.labs.drafts.cost import GPUS, PROFILE_GPU, CostInputs  # GPUS: --gpu's choices, in every drafts parser
from spectui.labs.drafts.cost_text import text as cost_text
from spectui.labs.drafts.data import check_own, generate
from spectui.labs.drafts.lesson import measured_text, read_lesson
from spectui.labs.memory.shape import read_shape
from spectui.store import prompts as prompt_sets
from spectui.store.claim import locked
from spectui.store.profiles import load_profiles

COUNT_MAX = 1 << 30  # no count a drafts command takes comes near this; a larger one is a typo or an attack
MAX_TOKENS_MAX = 1 << 20  # tokens an answer: beyond any context a server here holds


def _positive_int(text: str, hi: int = COUNT_MAX) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    if v > hi:
        raise argparse.ArgumentTypeError(f"{text!r} must be at most {hi:,}")
    return v


def _at_most(hi: int):
    """A whole-number option from 1 to `hi` (its name shown in argparse's errors as a count)."""

    def count(text: str) -> int:
        return _positive_int(text, hi)

    count.__name__ = "count"
    return count


_max_tokens = _at_most(MAX_TOKENS_MAX)


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 0 and below 1")
    return v


def _server_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=KIND_CHOICES, default="auto", help="server kind (default: detect)")
    p.add_argument("--api-key-env", metavar="NAME", help="environment variable holding a bearer token")
    p.add_argument("--ready-timeout", type=float, default=120.0, metavar="SEC", help="wait for a loading server")


def register(sub) -> None:
    """The `drafts` subcommand and its actions (called by cli.main.build_parser), in the lesson's order: what
    a draft costs to train, the data, a lookup draft, an EAGLE-3 head, and the whole lesson."""
    d = sub.add_parser("drafts", help=COMMANDS["drafts"].help)
    dsub = d.add_subparsers(dest="drafts_command", parser_class=type(d))
    _add_cost(dsub)
    _add_data(dsub)
    _add_train_lookup(dsub)
    _add_train_eagle3(dsub)
    _register_lesson(dsub)


def _add_cost(dsub) -> None:
    p = dsub.add_parser("cost", help="trainable parameters, memory, disk and time of Medusa, EAGLE-1/3, draft models")
    p.add_argument(
        "--target", required=True, metavar="MODEL", help="the target: a GGUF file, or an HF folder / config.json"
    )
    p.add_argument("--profile", metavar="NAME", help="a hardware profile: its GPU memory (fits?) and track GPU")
    p.add_argument("--gpu", choices=sorted(GPUS), help="time training on this GPU (datasheet BF16 throughput)")
    p.add_argument("--gpus", type=_positive_int, default=1, metavar="N", help="GPUs to spread training over (1)")
    p.add_argument("--mfu", type=_fraction, default=0.4, metavar="F", help="share of peak throughput reached (0.4)")
    p.add_argument(
        "--baseline", metavar="URL", help="the target served here: time its forward passes from its prompt throughput"
    )
    p.add_argument(
        "--draft", metavar="MODEL", help="a draft model to distil (GGUF or HF folder) for the draft-model row"
    )
    p.add_argument("--seq-len", type=_positive_int, default=2048, metavar="N", help="training sequence length (2048)")
    p.add_argument("--batch", type=_positive_int, default=1, metavar="N", help="sequences a step (1)")
    p.add_argument("--samples", type=_positive_int, default=5000, metavar="N", help="training samples (5000)")
    p.add_argument(
        "--tokens-per-sample", type=_positive_int, metavar="N", help="average tokens a sample (default: --seq-len)"
    )
    p.add_argument("--epochs", type=_positive_int, default=1, metavar="N")
    p.add_argument("--medusa-heads", type=_positive_int, default=4, metavar="K", help="Medusa heads (4)")
    p.add_argument("--medusa-layers", type=_positive_int, default=1, metavar="L", help="ResBlocks a head (1)")
    p.add_argument(
        "--draft-vocab", type=_positive_int, default=32000, metavar="N", help="EAGLE-3 draft vocabulary (32000)"
    )
    p.add_argument(
        "--ttt-steps", type=_positive_int, default=3, metavar="N", help="EAGLE-3 test-time-training steps (3)"
    )
    p.add_argument(
        "--target-dtype", choices=("bf16", "fp16", "fp32", "fp8"), default="bf16", help="the frozen target's dtype"
    )
    p.add_argument("--lesson", metavar="DIR", help="beside the estimate, what `spectui drafts lesson -o DIR` measured")
    p.add_argument("--json", action="store_true")
    _server_options(p)


def _add_data(dsub) -> None:
    p = dsub.add_parser("data", help="training data written by the target (self-distillation), resumable")
    p.add_argument("--baseline", required=True, metavar="URL", help="the target, served")
    p.add_argument(
        "--prompts",
        required=True,
        metavar="SOURCE",
        help="a prompt set name or file (TOML, ShareGPT, Spec-Bench, OpenAI chat log)",
    )
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="JSON Lines to append to (a rerun resumes it)")
    p.add_argument("--format", choices=("sharegpt", "conversations", "messages", "speculators"), default="sharegpt")
    p.add_argument("--max-tokens", type=_max_tokens, default=512, metavar="N", help="tokens an answer (512)")
    p.add_argument("--temperature", type=float, default=0.0, metavar="T", help="0 is greedy (default)")
    p.add_argument("--seed", type=int, default=42, metavar="S")
    p.add_argument(
        "--holdout", type=_fraction, default=0.1, metavar="F", help="share of prompts held out for the proof (0.1)"
    )
    p.add_argument("--limit", type=_positive_int, metavar="N", help="only the first N prompts")
    p.add_argument("--idle-timeout", type=float, default=120.0, metavar="SEC")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    _server_options(p)


def _add_train_lookup(dsub) -> None:
    p = dsub.add_parser("train-lookup", help="a lookup draft from the target's outputs: data, cache, serve, prove")
    p.add_argument("--prompts", required=True, metavar="SOURCE", help="prompts for the corpus; a share is held out")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="folder for data, corpus, cache and logs")
    p.add_argument("--model", metavar="GGUF", help="the target (default: spectui's SmolLM2)")
    p.add_argument("--max-tokens", type=_max_tokens, default=128, metavar="N", help="tokens an answer (128)")
    p.add_argument("--holdout", type=_fraction, default=0.2, metavar="F", help="share held out for the proof (0.2)")
    p.add_argument("--limit", type=_positive_int, metavar="N", help="only the first N prompts")
    p.add_argument("--threads", type=_positive_int, default=1, metavar="N", help="threads a server (1)")
    p.add_argument("--notebook", nargs="?", const="", metavar="PATH", help="append the proof to the lab notebook")
    p.add_argument("--profile", metavar="NAME", help="profile name recorded in the notebook")
    p.add_argument("--json", action="store_true")


def _add_train_eagle3(dsub) -> None:
    p = dsub.add_parser(
        "train-eagle3", help="an EAGLE-3 head trained on this CPU (torch env), converted, served, checked identical"
    )
    p.add_argument("--target", required=True, metavar="GGUF|HF_DIR", help="the target's weights")
    p.add_argument("--data", required=True, metavar="DATA.jsonl", help="records `spectui drafts data` wrote")
    p.add_argument("-o", "--output", required=True, metavar="HEAD_DIR", help="folder for the head, GGUF and logs")
    p.add_argument(
        "--draft-vocab",
        type=_positive_int,
        default=8192,
        metavar="N",
        help="draft vocabulary (8192; >= target's: full)",
    )
    p.add_argument("--ttt", type=_positive_int, default=3, metavar="K", help="test-time-training steps (3)")
    p.add_argument("--epochs", type=_positive_int, default=3, metavar="E", help="passes over the data (3)")
    p.add_argument("--threads", type=_positive_int, default=1, metavar="N", help="trainer and server threads (1)")
    p.add_argument("--heldout", metavar="PROMPTS", help="held-out prompts (default: DATA.heldout.toml)")
    p.add_argument("--model", metavar="GGUF", help="the GGUF served (default: --target when it is one)")
    p.add_argument("--n-max", type=_at_most(64), default=3, metavar="N", help="--spec-draft-n-max when serving (3)")
    p.add_argument("--max-tokens", type=_max_tokens, default=128, metavar="N", help="tokens a held-out answer (128)")
    p.add_argument("--max-steps", type=_positive_int, metavar="N", help="stop training after N steps (a quick try)")
    p.add_argument("--aux-layers", metavar="L1,L2,L3", help="target layers whose inputs feed the head ([2, n/2, n-3])")
    p.add_argument("--lr", type=float, default=5e-4, metavar="LR", help="learning rate (5e-4)")
    p.add_argument("--json", action="store_true")


def _register_lesson(dsub) -> None:
    register_lesson(dsub, _positive_int, _fraction, _max_tokens, _at_most)


def cmd_drafts(args):
    action = getattr(args, "drafts_command", None)
    if action is None:
        raise InputError(
            "spectui drafts needs an action: cost, data, train-lookup, train-eagle3 or lesson",
            hint="see spectui drafts --help",
        )
    if action == "lesson":
        return cmd_lesson(args)
    return {"cost": cmd_cost, "data": cmd_data, "train-lookup": cmd_train_lookup, "train-eagle3": cmd_train_eagle3}[
        action
    ](args)


async def _connect(url: str, args, client):
    backend, found = await resolve(args.backend, url, client, api_key_from(args.api_key_env))
    if args.backend == "auto" and not getattr(args, "json", False):
        print(f"spectui: {url} is {found}", file=sys.stderr)
    await connect(backend, args.ready_timeout)
    return backend


async def cmd_cost(args) -> int:
    shape = read_shape(args.target)
    draft = read_shape(args.draft) if args.draft else None
    inputs, memory = _on_gpu(args, _cost_inputs(args))
    if args.baseline:
        async with httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10)) as client:
            backend = await _connect(args.baseline, args, client)
            tps, how = await drafts.measure_prompt_throughput(backend)
        inputs = replace(inputs, prompt_tps=tps, prompt_tps_source=how)
    report = drafts.estimate(shape, inputs, draft, args.profile, memory)

    if args.lesson:
        if not Path(args.lesson).is_dir():
            raise InputError(f"--lesson {args.lesson} is not a folder", hint="give the -o of `spectui drafts lesson`")
        _print_with_lesson(report, Path(args.lesson), args.json)
    else:
        print(json.dumps(report.to_json(), indent=2) if args.json else cost_text(report))
    return EXIT_OK


def _cost_inputs(args):
    """The training run the estimate is for, as the options give it."""
    return CostInputs(
        seq_len=args.seq_len,
        batch=args.batch,
        samples=args.samples,
        tokens_per_sample=args.tokens_per_sample,
        epochs=args.epochs,
        medusa_heads=args.medusa_heads,
        medusa_layers=args.medusa_layers,
        draft_vocab=args.draft_vocab,
        ttt_steps=args.ttt_steps,
        target_bytes={"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}[args.target_dtype],
        mfu=args.mfu,
        gpu=args.gpu,
        gpus=args.gpus,
    )


def _on_gpu(args, inputs):
    """The GPU the training is timed on (--gpu, else the profile's track GPU) and its memory in GiB (the
    profile's floor, else the GPU's datasheet; None: no fits? column)."""
    memory = None
    if args.profile:
        profiles, _ = load_profiles()
        if args.profile not in profiles:
            raise InputError(f"no profile named {args.profile!r}", hint=f"profiles: {', '.join(profiles)}")
        memory = profiles[args.profile].min_gpu_memory_gib or None
        if inputs.gpu is None and args.profile in PROFILE_GPU:
            inputs = replace(inputs, gpu=PROFILE_GPU[args.profile])
    if inputs.gpu and memory is None:
        memory = GPUS[inputs.gpu][1]
    return inputs, memory


def _print_with_lesson(report, folder, as_json: bool) -> None:
    """`drafts cost --lesson DIR`: the estimate, then what the trained draft measured (labs.drafts.lesson)."""
    if as_json:
        les = read_lesson(folder)
        print(json.dumps({**report.to_json(), "lesson": les.to_json() if les else None}, indent=2))
    else:
        print(cost_text(report) + "\n\n" + measured_text(folder))


async def cmd_data(args) -> int:
    source, items = prompt_sets.load_set(args.prompts)
    items = prompt_sets.pick(items, args.limit)
    params = checked_params(args.max_tokens, args.temperature, args.seed, False, args.idle_timeout, 3600.0)
    bar = Advance("spectui drafts data")

    def progress(done: int, total: int, pid: str) -> None:
        if not args.json:
            bar(f"answering {total} prompts", done / total if total else 1.0, pid)

    out = Path(args.output).expanduser()
    check_own(out)  # a file that is not drafts data is refused before its lock is made beside it
    with locked(out, "-o"):  # a second `drafts data -o` on the same file refuses instead of answering twice
        async with httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10)) as client:
            backend = await _connect(args.baseline, args, client)
            try:
                result = await generate(backend, items, out, args.format, params, args.holdout, source, progress)
            finally:
                bar.close()
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(data_summary(result))
    for pid, why in result.failed:
        print(f"spectui: prompt {pid} failed (a rerun retries it): {why}", file=sys.stderr)
    return EXIT_SERVER if result.failed else EXIT_OK


def data_summary(r) -> str:
    lines = [
        f"wrote {r.written} record(s) to {r.out}"
        + (f" ({r.skipped_done} already there)" if r.skipped_done else "")
        + (f"; {r.tokens} answer tokens" if r.tokens else ""),
    ]
    if r.cut_bytes:
        lines.append(f"cut a torn last line ({r.cut_bytes} bytes) left by an interrupted run")
    if r.duplicates:
        lines.append(f"dropped {len(r.duplicates)} duplicate prompt(s): {', '.join(r.duplicates[:5])}")
    if r.heldout:
        lines.append(f"held out {r.heldout_count} prompt(s) for the proof: {r.heldout}")
    if r.failed:
        lines.append(f"{len(r.failed)} prompt(s) failed; run the same command again to retry them")
    return "\n".join(lines)


async def cmd_train_lookup(args) -> int:
    check_gguf(args.model, "--model")  # before any server is started to find out
    check_notebook(args)  # a --notebook that cannot be written is said now, not after the whole run
    bar = Advance("spectui drafts train-lookup")
    say = bar.sayer(quiet=args.json)

    try:
        outcome = await train_lookup.run_pipeline(
            Path(args.output),
            args.prompts,
            model=Path(args.model) if args.model else None,
            max_tokens=args.max_tokens,
            holdout=args.holdout,
            limit=args.limit,
            threads=args.threads,
            say=say,
            advance=None if args.json else bar,
        )
    finally:
        bar.close()
    if args.json:
        print(json.dumps(outcome.to_json(), indent=2))
    else:
        print(outcome.text())
    if args.notebook is not None:
        append_to_notebook(args, outcome.notebook_rows(args.profile))
    return EXIT_OK if outcome.proof is not None and outcome.proof.all_identical else EXIT_DIFFERS


async def cmd_train_eagle3(args) -> int:
    if args.aux_layers is not None:
        parts = args.aux_layers.split(",")
        if len(parts) != 3 or not all(x.strip().isdigit() for x in parts):
            raise InputError(f"--aux-layers {args.aux_layers!r} is not three layer numbers", hint="e.g. 2,15,27")
    opts = train_eagle3.Options(
        target=Path(args.target),
        data=Path(args.data),
        out=Path(args.output),
        draft_vocab=args.draft_vocab,
        ttt=args.ttt,
        epochs=args.epochs,
        threads=args.threads,
        heldout=Path(args.heldout) if args.heldout else None,
        serve_model=Path(args.model) if args.model else None,
        n_max=args.n_max,
        max_tokens=args.max_tokens,
        max_steps=args.max_steps or 0,
        aux=args.aux_layers or "",
        lr=args.lr,
    )
    bar = Advance("spectui drafts train-eagle3")
    say = bar.sayer(quiet=args.json)

    try:
        outcome = await train_eagle3.run_pipeline(opts, say=say, advance=None if args.json else bar)
    finally:
        bar.close()
    print(json.dumps(outcome.to_json(), indent=2) if args.json else outcome.text())
    return EXIT_OK if outcome.ok else EXIT_DIFFERS
