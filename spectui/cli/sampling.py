"""`spectui sampling`: exact under sampling, seeded bytes and the two output distributions (labs.sampling)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

from spectui.backends.transport import stamped_client
from spectui.cli import options
from spectui.cli.commands import COMMANDS
from spectui.cli.common import (
    EXIT_DIFFERS,
    EXIT_OK,
    EXIT_SERVER,
    append_to_notebook,
    connect_pair,
    params_from,
    prompts_from,
)
from spectui.cli.outputs import check_notebook, check_output, session_failed
from spectui.cli.progress import Advance
from spectui.core.errors import InputError
from spectui.core.types import SIDES
from spectui.labs.sampling.exact import NOT_ENOUGH, sampling
from spectui.store.session_writer import SessionWriter

EXIT_UNDECIDED = 4  # spectui sampling: not enough samples to decide (never a pass)


async def cmd_sampling(args) -> int:
    params = _checked_params(args)
    prompt_list = prompts_from(args)
    check_output(args.save, "--save")  # every output checked before the run
    check_notebook(args)
    writer = None
    if args.save:
        writer = SessionWriter(args.save)
    try:
        results, infos = await _sample_both(args, params, prompt_list, writer)
    finally:
        if writer:
            writer.close()
    unwritten = args.notebook is not None and not append_to_notebook(args, _notebook_rows(results, infos, params))
    if args.json:
        print(json.dumps(_json_doc(results, infos, params, args), indent=2))
    else:
        _print_text(results, infos, params, args)
    unwritten |= session_failed(writer)
    return _exit_for(results, unwritten)


def _checked_params(args):
    """The request parameters, each bound checked before any server is asked."""
    if args.temperature == 0:
        raise InputError(
            "--temperature 0 is greedy decoding: `spectui compare` checks it byte for byte",
            hint="give a temperature above 0, e.g. --temperature 0.8",
        )
    if args.samples < 2:
        raise InputError(f"--samples must be at least 2, not {args.samples}")
    if args.max_tokens < 1:
        raise InputError(f"--max-tokens must be at least 1, not {args.max_tokens}")
    if args.top_p is not None and not 0 < args.top_p <= 1:
        raise InputError(f"--top-p must be in (0, 1], not {args.top_p}")
    return dataclasses.replace(params_from(args), top_p=args.top_p)


async def _sample_both(args, params, prompt_list, writer) -> tuple[list, dict]:
    """Every seed on both servers (labs.sampling.exact), with a progress bar; the results and the servers."""
    bar = Advance("spectui sampling")

    def progress(prompt, done, total):
        if not args.json:  # a bar with an ETA on a terminal, a line per tenth in a log
            bar(f"{prompt.id}: both sides, {total} seeds", done / total, f"sample {done}/{total}")

    try:
        async with stamped_client() as client:
            backends, infos = await connect_pair(client, args)
            if writer:
                writer.servers(infos)
            results = await sampling(
                backends["baseline"],
                backends["candidate"],
                prompt_list,
                params,
                args.samples,
                args.seed_base,
                args.distribution,
                writer,
                progress,
            )
    finally:
        bar.close()
    return results, infos


def _json_doc(results, infos, params, args) -> dict:
    return {
        "baseline": infos["baseline"].to_json(),
        "candidate": infos["candidate"].to_json(),
        "params": {
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "samples": args.samples,
            "seed_base": args.seed_base,
        },
        "prompts": [r.to_json() for r in results],
    }


def _print_text(results, infos, params, args) -> None:
    for side in SIDES:
        print(f"{side:<9} {infos[side].url} ({infos[side].build}) [{infos[side].describe_speedup()}]")
    print(
        f"temperature {params.temperature}, top_p {params.top_p or 'server default'}, {args.samples} seeds from "
        f"{args.seed_base}, first {params.max_tokens} tokens"
    )
    for r in results:
        print(r.text())


def _notebook_rows(results, infos, params) -> list[dict]:
    """One notebook row a prompt (its None fields left out, floats to 4 places)."""
    rows = []
    for r in results:
        j = r.to_json()
        row = {
            "date": dt.datetime.now(dt.UTC).replace(microsecond=0),
            "kind": "sampling",
            "prompt_id": r.prompt.id,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "samples": j["samples"],
            "seeded_identical": j["seeded_identical"],
            "verdict": j["verdict"],
            "p": r.test.p if r.test is not None else None,
            "max_tvd": max((t.tvd for t in r.positions), default=None),
            "smallest_detectable_tvd": j["smallest_detectable_tvd"],
            "acceptance_rate": j["acceptance_rate"],
            "baseline_build": infos["baseline"].build,
            "candidate_build": infos["candidate"].build,
            "candidate_config": infos["candidate"].describe_speedup(),
        }
        rows.append({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items() if v is not None})
    return rows


def _exit_for(results, unwritten: bool) -> int:
    """1 a side failed or a file was not written, 3 different, 4 not enough samples to decide, else 0."""
    if any(x.failed for r in results for x in r.runs) or unwritten:
        return EXIT_SERVER
    if any(r.verdict == "different" or r.seeded_mismatch_is_failure for r in results):
        return EXIT_DIFFERS  # a seeded mismatch counts only where seeded bytes are (or may be) promised

    return EXIT_UNDECIDED if any(r.verdict == NOT_ENOUGH for r in results) else EXIT_OK


def register(sub) -> None:
    p = sub.add_parser("sampling", help=COMMANDS["sampling"].help)
    options.add_pair(p, launch=False)
    options.add_prompt_choice(p)
    p.add_argument(
        "--top-p", type=options.finite, metavar="P", help="nucleus sampling, 0 < P <= 1 (default: the server's)"
    )
    p.add_argument("--samples", type=int, default=20, metavar="N", help="seeds (samples) per prompt and side (20)")
    p.add_argument("--seed-base", type=int, default=1000, metavar="S", help="seeds S, S+1, … (default 1000)")
    p.add_argument("--distribution", action="store_true", help="run the distribution pass even when every seed matched")
    options.add_json(p)
    p.add_argument("--save", metavar="PATH", help="save every sample as a session")
    options.add_notebook(p, "one measurement per prompt")
    options.add_prompt_subset(p)
    options.add_generation(p, seed=False)  # each sample's seed is --seed-base + i, its cache off
    options.add_time_limits(p)
    options.add_connection(p)
    p.set_defaults(max_tokens=16, temperature=0.8)
