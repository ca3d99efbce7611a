"""`spectui prefix` and `spectui cache`: prefix caching, cold vs warm turns, and a llama.cpp slot's saved cache
(labs.prefix)."""

from __future__ import annotations

import json
import time

import httpx

from spectui.backends.llamacpp import LlamaCppBackend
from spectui.backends.transport import stamped_client
from spectui.cli import options
from spectui.cli.commands import COMMANDS
from spectui.cli.common import EXIT_DIFFERS, EXIT_OK, EXIT_SERVER, connect_pair, params_from
from spectui.core.errors import InputError
from spectui.core.types import SIDES
from spectui.labs.prefix import FOLLOW_UPS, prefix_table, restore_experiment, run_prefix, same_server


async def cmd_prefix(args) -> int:
    turns = _turns(args)
    params = params_from(args)
    async with stamped_client() as client:
        backends, infos = await connect_pair(client, args)
        result, cleared = await run_prefix(backends["baseline"], backends["candidate"], turns, params)
        restore = None
        if args.restore_check:
            restore = await restore_experiment(backends["candidate"], [{"role": "user", "content": turns[0]}], params)
    if args.json:
        doc = {
            "baseline": infos["baseline"].to_json(),
            "candidate": infos["candidate"].to_json(),
            "cleared": cleared,
            "turns": [t.to_json() for t in result],
            "identical": all(t.verdict.identical for t in result),
            "restore_check": restore,
        }
        print(json.dumps(doc, indent=2))
    else:
        _print_text(result, infos, cleared, restore)
    if any(t.baseline.failed or t.candidate.failed for t in result):
        return EXIT_SERVER
    if any(t.verdict.identical is None for t in result):
        return EXIT_SERVER
    return EXIT_OK if all(t.verdict.identical for t in result) else EXIT_DIFFERS


def _turns(args) -> list[str]:
    """The conversation's user turns: --prompt N times, or the bundled follow-ups; two distinct servers."""
    if args.turns < 1:
        raise InputError("--turns must be at least 1")
    if why := same_server(args.baseline, args.candidate):
        raise InputError(why)
    return [args.prompt] * args.turns if args.prompt else [FOLLOW_UPS[i % len(FOLLOW_UPS)] for i in range(args.turns)]


def _print_text(result, infos, cleared, restore: dict | None) -> None:
    for name in SIDES:
        print(f"{name:<9} {infos[name].url} ({infos[name].build}); before the run: {cleared[name]}")
    print(prefix_table(result, infos["candidate"].backend))
    if restore:
        r = restore
        print(
            f"\nsaved conversation cache: {r['tokens_saved']} tokens, {(r['file_bytes'] or 0) / 1e6:.1f} MB, "
            f"saved in {r['save_ms']:.1f} ms, restored in {r['restore_ms']:.1f} ms"
        )
        print(
            f"next turn recomputed: TTFT {r['recomputed']['ttft_ms']:.0f} ms, "
            f"{r['recomputed']['prompt_tokens_processed']} prompt tokens processed"
        )
        print(
            f"next turn restored:   TTFT {r['restored']['ttft_ms']:.0f} ms, "
            f"{r['restored']['prompt_tokens_processed']} processed, {r['restored']['prompt_tokens_reused']} reused; "
            f"output {'identical' if r['identical'] else 'DIFFERENT'} to the recomputed one"
        )


async def cmd_cache(args) -> int:
    if args.action in ("save", "restore") and not args.file:
        raise InputError(f"spectui cache {args.action} needs --file NAME")
    if args.file and ("/" in args.file or args.file.startswith(".")):
        raise InputError("--file is a plain file name inside the server's --slot-save-path folder")
    async with httpx.AsyncClient() as client:
        t0 = time.perf_counter()
        done = await LlamaCppBackend(args.url, client).slot_action(args.action, args.slot, args.file)
        wall = (time.perf_counter() - t0) * 1000

    def count(n: int | None) -> str:
        return "?" if n is None else str(n)

    size = f"{done.file_bytes / 1e6:.1f} MB" if done.file_bytes is not None else "? MB"
    ms = done.ms if done.ms is not None else wall
    if args.action == "save":
        print(f"saved slot {args.slot}: {count(done.tokens)} tokens, {size} to {done.filename} in {ms:.1f} ms")
    elif args.action == "restore":
        print(f"restored slot {args.slot}: {count(done.tokens)} tokens, {size} from {done.filename} in {ms:.1f} ms")
    else:
        print(f"erased slot {args.slot}: {count(done.tokens)} tokens")
    return EXIT_OK


def register(sub) -> None:
    p = sub.add_parser(
        "prefix",
        help=COMMANDS["prefix"].help,
        description="The baseline's prompt cache is off (every turn recomputed), the candidate's on; each turn's "
        "TTFT, prompt tokens reused, and whether the two answers are the same bytes.",
    )
    options.add_pair(p, launch=False)
    p.add_argument("--turns", type=int, default=3, metavar="N", help="conversation turns (default 3)")
    p.add_argument("--prompt", metavar="TEXT", help="send this (long) prompt N times instead of a conversation")
    p.add_argument(
        "--restore-check",
        action="store_true",
        help="also save the candidate's conversation cache and time the next turn restored vs recomputed "
        "(needs --slot-save-path)",
    )
    options.add_json(p)
    options.add_generation(p)
    options.add_connection(p)

    p = sub.add_parser("cache", help=COMMANDS["cache"].help)
    p.add_argument("action", choices=("save", "restore", "erase"))
    p.add_argument("url", metavar="URL")
    p.add_argument("--slot", type=int, default=0, metavar="N")
    p.add_argument("--file", metavar="NAME", help="file name inside the server's --slot-save-path")
