"""`spectui drafts lesson`: data from the target → a trained draft → (converted) → served at the n_max its measured
acceptance pays for → `spectui prove` on the held-out prompts (run.drafts_lesson does the work)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from spectui.cli.common import EXIT_DIFFERS, EXIT_OK
from spectui.cli.outputs import check_gguf
from spectui.cli.progress import Advance
from spectui.core.errors import InputError
from spectui.labs.drafts.lesson import PROBE_N_MAX, default_dir
from spectui.machine.assets import find_model
from spectui.run import formats
from spectui.run.drafts_lesson import LessonOptions, run_lesson


def register_lesson(dsub, positive_int, fraction, max_tokens, at_most) -> None:
    """The `drafts lesson` parser (called by cli.drafts.register with its number checks)."""
    p = dsub.add_parser(
        "lesson", help="the trained-draft lesson end to end: data, train, convert, serve, prove, each phase measured"
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        help="the lesson's folder; a rerun resumes it (default: the data folder's lessons/)",
    )
    p.add_argument("--prompts", metavar="SOURCE", help="prompts the target answers (needed until the data exists)")
    p.add_argument("--draft", choices=("eagle3", "lookup"), default="eagle3", help="train-eagle3 or train-lookup")
    p.add_argument("--target", metavar="GGUF", help="the target (default: spectui's SmolLM2)")
    p.add_argument("--f32", action="store_true", help="serve the target's F32 copy; adds the three-way table")
    p.add_argument(
        "--for-format",
        nargs="?",
        const="",
        metavar="JSON",
        help="train and serve the format `spectui formats` recommends: its kept table (default: the one it keeps "
        "for the target); run `spectui formats` first",
    )
    p.add_argument("--max-tokens", type=max_tokens, default=128, metavar="N", help="tokens an answer (128)")
    p.add_argument("--holdout", type=fraction, default=0.1, metavar="F", help="share held out for the proof (0.1)")
    p.add_argument("--limit", type=positive_int, metavar="N", help="only the first N prompts")
    p.add_argument("--epochs", type=positive_int, default=3, metavar="E", help="EAGLE-3 passes over the data (3)")
    p.add_argument("--draft-vocab", type=positive_int, default=8192, metavar="N", help="EAGLE-3 draft vocabulary")
    p.add_argument("--ttt", type=positive_int, default=3, metavar="K", help="EAGLE-3 test-time-training steps (3)")
    p.add_argument("--max-steps", type=positive_int, metavar="N", help="stop training after N steps (a quick try)")
    p.add_argument(
        "--probe-n-max",
        type=at_most(PROBE_N_MAX),
        default=5,
        metavar="N",
        help=f"n_max while measuring acceptance (5; at most {PROBE_N_MAX})",
    )
    p.add_argument("--runs", type=positive_int, default=2, metavar="N", help="interleaved runs a prompt in the proof")
    p.add_argument("--threads", type=positive_int, default=1, metavar="N", help="threads a server and the trainer")
    p.add_argument("--json", action="store_true", help="print the lesson record (DIR/lesson.json)")


async def cmd_lesson(args) -> int:
    check_gguf(args.target, "--target")  # before the folder is made or a server started

    table = None
    if args.for_format is not None:
        target, table = _recommended_target(args)
        args.target = str(target)
    out = Path(args.output) if args.output else _default_dir(args)
    opts = LessonOptions(
        out=out,
        prompts=args.prompts or "",
        draft=args.draft,
        target=Path(args.target) if args.target else None,
        f32=args.f32,
        max_tokens=args.max_tokens,
        holdout=args.holdout,
        limit=args.limit,
        epochs=args.epochs,
        draft_vocab=args.draft_vocab,
        ttt=args.ttt,
        max_steps=args.max_steps or 0,
        probe_n_max=args.probe_n_max,
        runs=args.runs,
        threads=args.threads,
        formats_table=table,
    )
    bar = Advance("spectui drafts lesson")
    say = bar.sayer(quiet=args.json)

    if not args.output and not args.json:
        print(f"spectui drafts lesson: the lesson's folder: {out}", file=sys.stderr)
    try:
        les = await run_lesson(opts, say=say, advance=None if args.json else bar)
    finally:
        bar.close()
    print(json.dumps(les.to_json(), indent=2) if args.json else les.text())
    return EXIT_OK if les.verdict and les.verdict.startswith("IDENTICAL") else EXIT_DIFFERS


def _recommended_target(args) -> tuple[Path, Path]:
    """The file of the format the kept formats table recommends (run.formats), which the lesson trains for,
    and the table (its prove prints the n-way table from it)."""
    if args.f32:
        raise InputError("--for-format and --f32 each choose the served file: give one")
    if args.for_format:
        path = Path(args.for_format)
    else:
        model = Path(args.target) if args.target else find_model()
        if model is None:
            raise InputError("no target model to find the formats table of", hint="run `spectui setup`")
        path = formats.default_path(model)
    les = formats.read(path)
    rec = les.recommendation
    row = next((r for r in les.rows if rec is not None and r.format == rec.format), None)
    if row is None or not row.file or not Path(row.file).is_file():
        raise InputError(f"{path} recommends no format whose file is here", hint="rerun `spectui formats`")
    print(
        f"spectui drafts lesson: training for {row.format} ({Path(row.file).name}), as {path} recommends",
        file=sys.stderr,
    )
    return Path(row.file), path


def _default_dir(args):
    """The data folder's lessons/<draft>-<target>[-f32]: the same command resumes the same lesson."""
    target = Path(args.target) if args.target else (find_model() or Path("model.gguf"))
    return default_dir(args.draft, target, args.f32)
