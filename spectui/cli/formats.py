"""`spectui formats [MODEL]`: the weight-formats lesson — each format's copy of the model made with
llama-quantize, measured here one format at a time (plain decode, V(k) as the server verifies, whether a
lossless n-gram candidate keeps the bytes), one table and the format where speculation pays and the bytes stay
(run.formats does the work; labs.formats holds the table and the recommendation)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from spectui.cli import options
from spectui.cli.commands import COMMANDS
from spectui.cli.common import EXIT_OK, EXIT_SERVER
from spectui.cli.outputs import check_output
from spectui.core.errors import InputError
from spectui.labs.formats import table
from spectui.labs.formats.kernels import DEFAULT_FORMATS
from spectui.run import formats
from spectui.store import prompts as prompt_sets


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return v


def register(sub) -> None:
    p = sub.add_parser(
        "formats",
        help=COMMANDS["formats"].help,
        description="Make each weight format's copy of MODEL (llama-quantize --allow-requantize, kept in the "
        "cache), then measure one format at a time on this machine: the plain decode rate, V(k) for k = 1…K as "
        "the server verifies, and whether a lossless n-gram candidate keeps the bytes. Prints one table and the "
        "format where speculation pays and the bytes stay, and keeps it as JSON.",
    )
    p.add_argument("model", nargs="?", metavar="MODEL", help="a GGUF (default: spectui's SmolLM2)")
    p.add_argument(
        "--formats",
        metavar="LIST",
        default=",".join(DEFAULT_FORMATS),
        help=f"llama-quantize types, comma-separated (default {','.join(DEFAULT_FORMATS)}; F32, F16 … by name)",
    )
    p.add_argument("--prompts", default="default", metavar="SET", help="prompt set or file (default: default)")
    p.add_argument("--limit", type=_positive_int, default=4, metavar="N", help="first N prompts (4)")
    p.add_argument("--max-tokens", type=_positive_int, default=64, metavar="N", help="tokens an answer (64)")
    p.add_argument("--runs", type=_positive_int, default=3, metavar="N", help="runs a prompt, B C / C B (3)")
    p.add_argument("--k-max", type=_positive_int, default=8, metavar="K", help="V(k) for k = 1…K (8)")
    p.add_argument("--repeats", type=_positive_int, default=3, metavar="N", help="V(k) repeats (3)")
    p.add_argument("--no-verify", action="store_true", help="skip V(k) (no recommendation on speculation then)")
    p.add_argument("--threads", type=_positive_int, default=1, metavar="N", help="threads a server (1)")
    p.add_argument("-o", "--output", metavar="FILE", help="the JSON kept (default: the data folder's formats/)")
    p.add_argument("--show", metavar="FILE", help="print a kept table (no measuring)")
    p.add_argument("--markdown", action="store_true", help="print the table in Markdown")
    options.add_json(p)


async def cmd_formats(args) -> int:
    if args.show:
        les = formats.read(Path(args.show))
        _print(les, args, table)
        return EXIT_OK
    if args.k_max < 2 and not args.no_verify:
        raise InputError("--k-max must be at least 2 (V(1) = 1 by construction)")
    opts = formats.FormatsOptions(
        model=Path(args.model) if args.model else None,
        formats=formats.check_formats(tuple(f for f in args.formats.split(",") if f.strip())),
        prompts=args.prompts,
        limit=args.limit,
        max_tokens=args.max_tokens,
        runs=args.runs,
        k_max=args.k_max,
        repeats=args.repeats,
        threads=args.threads,
        verify=not args.no_verify,
    )
    _, _, model = formats.resolve(opts)
    out = check_output(args.output or formats.default_path(model), "-o", ("formats table",))
    assert out is not None
    prompts = _prompts(args)

    def say(line: str) -> None:
        print(f"spectui formats: {line}", file=sys.stderr)

    les = await formats.lesson(opts, prompts, say)
    written = formats.write(les, out)
    _print(les, args, table)
    if not args.json:
        print(f"kept: {written}")
    measured = [r for r in les.rows if r.refused is None and r.failed is None]
    return EXIT_OK if measured else EXIT_SERVER


def _prompts(args):
    _, items = prompt_sets.load_set(args.prompts)
    if not items:
        raise InputError(f"prompt set {args.prompts!r} holds no prompts")
    return items[: args.limit]


def _print(les, args, table) -> None:
    rec = les.recommendation or table.recommend(les.rows)
    if args.json:
        print(json.dumps(les.to_json(), indent=2))
    elif args.markdown:
        print(table.table_markdown(les.rows), end="")
        print("\n".join(table.recommendation_lines(rec)))
    else:
        s = les.settings
        print(
            f"weight formats of {Path(les.model).name}, measured {s.get('date', '?')} on {s.get('machine', '?')}, "
            f"-t {s.get('threads', '?')}, {s.get('prompts', '?')}, {s.get('max_tokens', '?')} tokens, "
            f"{s.get('runs', '?')} runs a prompt:"
        )
        print(table.table_text(les.rows, rec), end="")
