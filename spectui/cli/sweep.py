"""`spectui sweep`: throughput and speed-up against concurrency, where the payoff collapses (labs.sweep)."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

from spectui.backends.detect import api_key_from
from spectui.backends.transport import stamped_client
from spectui.cli import options
from spectui.cli.commands import COMMANDS
from spectui.cli.common import (
    EXIT_DIFFERS,
    EXIT_OK,
    EXIT_SERVER,
    append_to_notebook,
    check_pair_source,
    connect_pair,
    params_from,
    prompts_from,
)
from spectui.cli.compare import pair_from
from spectui.cli.outputs import check_notebook, check_output, write_failed
from spectui.cli.progress import Advance
from spectui.core.report import cache_text
from spectui.core.types import SIDES, ServerInfo
from spectui.labs.sweep.levels import parse_levels, svg_chart, sweep, sweep_alone, text_table
from spectui.store.locations import atomic_write


async def cmd_sweep(args) -> int:
    levels = parse_levels(args.concurrency)
    check_pair_source(args, "sweep")
    params = params_from(args)
    prompt_list = prompts_from(args)
    check_output(args.save, "--save", kinds=("sweep result",))  # every output checked before the run
    check_output(args.svg, "--svg")
    check_notebook(args)
    result, infos, alone = await _sweep(args, prompt_list, levels, params)
    doc = _json_doc(result, infos, params, alone)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        _print_text(result, infos, params, alone)
    unwritten = _write_files(args, doc, result, infos)  # after the report: a file not written never costs it
    if args.notebook is not None:
        unwritten |= not append_to_notebook(args, _notebook_rows(result, infos))
    if any(lv.identical is None for lv in result) or unwritten:
        return EXIT_SERVER
    return EXIT_OK if all(lv.identical for lv in result) else EXIT_DIFFERS


async def _sweep(args, prompt_list, levels, params) -> tuple[list, dict, bool]:
    """Every level on the pair (run.pair): both up together, or each side alone; the levels, the servers, and
    whether it ran one at a time."""
    pair = pair_from(args)
    alone = pair.alone is not None
    async with stamped_client(max(levels) * 2 + 4) as client:
        if alone:
            result, infos = await _sweep_alone(pair, client, args, prompt_list, levels, params)
        else:
            async with pair.up(None if args.json else _say) as (args.baseline, args.candidate):
                result, infos = await _sweep_together(client, args, prompt_list, levels, params)
    return result, infos, alone


def _json_doc(result, infos, params, alone: bool) -> dict:
    doc = {
        "baseline": infos["baseline"].to_json(),
        "candidate": infos["candidate"].to_json(),
        "params": {
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "seed": params.seed,
            "cache_prompt": params.cache_prompt,
        },
        "levels": [lv.to_json() for lv in result],
    }
    if alone:  # measured one after the other: never both servers up
        doc["params"]["order"] = "one-at-a-time"
    return doc


def _print_text(result, infos, params, alone: bool) -> None:
    for side in SIDES:
        print(f"{side:<9} {infos[side].url} ({infos[side].build}) [{infos[side].describe_speedup()}]")
    # the prompt cache changes TTFT with what ran before: named, as the TUI's sweep names it
    print(f"prompt cache {cache_text(params)} (--cache-prompt off|on|server; off unless asked)")
    if alone:
        print("one server at a time: each side measured alone, one after the other; speed-ups paired per level")
    print(text_table(result))


def _write_files(args, doc: dict, result, infos) -> bool:
    """--save (the JSON) and --svg (the plot), each written atomically; True where one was not written."""
    unwritten = False
    kept = "the report above is complete"
    if args.save:
        try:
            atomic_write(Path(args.save).expanduser(), json.dumps(doc, indent=2) + "\n")
        except OSError as exc:
            write_failed(f"--save {args.save}", exc, kept)
            unwritten = True
    if args.svg:
        try:
            atomic_write(
                Path(args.svg).expanduser(), svg_chart(result, f"{infos['candidate'].describe_speedup()} vs baseline")
            )
        except OSError as exc:
            write_failed(f"--svg {args.svg}", exc, kept)
            unwritten = True
    return unwritten


def _notebook_rows(result, infos) -> list[dict]:
    """One notebook row a level (its None fields left out, floats to 4 places)."""
    rows = []
    for lv in result:
        m = {
            "date": dt.datetime.now(dt.UTC).replace(microsecond=0),
            "kind": "sweep",
            "concurrency": lv.concurrency,
            "baseline_build": infos["baseline"].build,
            "candidate_build": infos["candidate"].build,
            "candidate_config": infos["candidate"].describe_speedup(),
            "baseline_tokens_per_s": lv.throughput("baseline"),
            "candidate_tokens_per_s": lv.throughput("candidate"),
            "acceptance_rate": lv.candidate.acceptance_rate if not lv.candidate.failed else None,
            "speedup": lv.speedup,
            "outputs": lv.outputs_text(),
            "speedup_low": lv.spread.low if lv.spread else None,
            "speedup_high": lv.spread.high if lv.spread else None,
            "runs": max(1, len(lv.runs)),
            "identical": lv.identical,
        }
        rows.append({k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items() if v is not None})
    return rows


def _say(line: str) -> None:
    print(f"spectui: {line}", file=sys.stderr)


async def _sweep_together(client, args, prompt_list, levels, params) -> tuple[list, dict]:
    """Both servers up: each level's requests to the baseline, then the same to the candidate."""
    backends, infos = await connect_pair(client, args)
    for name, info in infos.items():
        if info.slots is not None and info.slots < max(levels):
            print(
                f"spectui: warning: {name} has {info.slots} slot(s); requests beyond that queue "
                f"(start it with -np {max(levels)})",
                file=sys.stderr,
            )
    bar = Advance("spectui sweep")
    finished: list[int] = []

    def progress(level):
        finished.append(level.concurrency)
        if not args.json:  # levels done over all levels: the big ones take longest, so it is coarse
            bar(
                f"levels {','.join(map(str, levels))}",
                len(finished) / len(levels),
                f"concurrency {level.concurrency} done",
            )

    try:
        result = await sweep(
            backends["baseline"], backends["candidate"], prompt_list, levels, params, progress, args.repeat
        )
    finally:
        bar.close()
    return result, infos


async def _sweep_alone(pair, client, args, prompt_list, levels, params) -> tuple[list, dict]:
    """--one-at-a-time: the baseline alone at every level, then the candidate alone (labs.sweep.levels.sweep_alone)."""
    servers = pair.servers
    say = (lambda line: print(f"spectui: {line}", file=sys.stderr)) if not args.json else None
    if say is not None:
        why = "asked for" if args.one_at_a_time else pair.alone
        say(f"[{pair.title}] one server at a time ({why}); the batch-time prediction needs both up: not made")
    key = api_key_from(args.api_key_env)
    result, infos = await sweep_alone(
        lambda side: pair.side(side, client, key, args.ready_timeout), prompt_list, levels, params, args.repeat, say
    )
    return result, {s: infos.get(s) or ServerInfo(servers[s].url) for s in SIDES}


def register(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help=COMMANDS["sweep"].help,
        description="Each concurrency level's requests to the baseline, then the same to the candidate: "
        "throughput, the speed-up and the bytes per level (with --one-at-a-time, speed-ups paired per level).",
    )
    options.add_pair(p)
    p.add_argument("--concurrency", default="1,2,4,8", metavar="N,N,…", help="levels (default 1,2,4,8)")
    p.add_argument("--prompts", default="default", metavar="SET|FILE", help="prompt set, cycled to fill each level")
    options.add_repeat(p, "each level")
    options.add_json(p)
    p.add_argument("--svg", metavar="PATH", help="write the plot as an SVG image")
    p.add_argument("--save", metavar="PATH", help="save the sweep results (JSON) to PATH")
    options.add_notebook(p, "one measurement per level")
    options.add_prompt_subset(p)
    options.add_generation(p)
    options.add_time_limits(p)
    options.add_cache_prompt(p)
    options.add_connection(p)
