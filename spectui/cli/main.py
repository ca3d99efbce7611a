"""spectui's command line: `spectui` opens the TUI; subcommands run headless."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
from typing import NoReturn

from spectui import __version__
from spectui.backends.registry import KIND_CHOICES
from spectui.cli.common import EXIT_DIFFERS, EXIT_OK, EXIT_SERVER, EXIT_USAGE  # noqa: F401
from spectui.core.errors import InputError, SpectuiError


def finite(text: str) -> float:
    """An argparse type: a finite number (nan and inf are refused, with a usage error)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return v


def positive(text: str) -> float:
    v = finite(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return v


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        sub = self.prog.split()[1:]  # "spectui compare" → ["compare"]
        self.exit(EXIT_USAGE, f"spectui: error: {message} (see spectui {' '.join(sub) + ' ' if sub else ''}--help)\n")


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=int, metavar="N", help="only the first N prompts of the set or file")
    p.add_argument("--sample", type=int, metavar="N", help="N prompts of the set or file, drawn at random")
    p.add_argument("--sample-seed", type=int, default=0, metavar="S", help="the draw's seed for --sample (default 0)")
    p.add_argument("--max-tokens", type=int, default=128, metavar="N", help="tokens to generate (default 128)")
    p.add_argument("--temperature", type=finite, default=0.0, metavar="T", help="0 is greedy (default)")
    p.add_argument("--seed", type=int, default=42, metavar="S")
    p.add_argument(
        "--order",
        choices=("sequential", "concurrent"),
        default="sequential",
        help="sequential (default: the sides do not distort each other's timing) or concurrent",
    )
    p.add_argument(
        "--cache-prompt",
        choices=("off", "on", "server"),
        default="off",
        help="prompt cache per request: off (default, both sides cold), on, or the server's default",
    )
    p.add_argument(
        "--ready-timeout",
        type=positive,
        default=120.0,
        metavar="SEC",
        help="how long to wait for a loading server (default 120)",
    )
    p.add_argument(
        "--idle-timeout",
        type=positive,
        default=120.0,
        metavar="SEC",
        help="fail a side after this long without an event; keep-alives do not count (default 120)",
    )
    p.add_argument(
        "--deadline",
        type=positive,
        default=3600.0,
        metavar="SEC",
        help="fail a side whose request takes longer than this (default 3600)",
    )
    p.add_argument(
        "--backend",
        choices=KIND_CHOICES,
        default="auto",
        help="server kind for both sides (default: detect each from its endpoints)",
    )
    p.add_argument("--baseline-backend", choices=KIND_CHOICES, help=argparse.SUPPRESS)
    p.add_argument("--candidate-backend", choices=KIND_CHOICES, help=argparse.SUPPRESS)
    p.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="environment variable holding a bearer token for OpenAI-compatible servers (never saved)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="spectui", description="Is the candidate server faster than the baseline, and are the bytes the same?"
    )
    parser.add_argument("--version", action="version", version=f"spectui {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    p = sub.add_parser("compare", help="stream the same prompts to both servers and compare, headless")
    p.add_argument("--baseline", metavar="URL", help="the baseline server (or --launch a profile's pair)")
    p.add_argument("--candidate", metavar="URL", help="the candidate server (or --launch a profile's pair)")
    p.add_argument(
        "--launch",
        metavar="COMPARISON",
        help="start the comparison's two servers from the profile (--profile, default cpu-demo) and stop them after",
    )
    p.add_argument(
        "--one-at-a-time",
        action="store_true",
        help="with --launch: run the baseline alone, stop it, then the candidate alone (chosen by itself "
        "where the memory plan says the two do not fit on the GPU together)",
    )
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--prompt", metavar="TEXT", help="one user message")
    g.add_argument("--prompts", metavar="SET|FILE", help="a bundled prompt set by name, or a prompts file")
    p.add_argument("--raw", action="store_true", help="send --prompt unchanged, without the chat template")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--save", metavar="PATH", help="save the session (every event, replayable) to PATH")
    p.add_argument(
        "--notebook",
        nargs="?",
        const="",
        metavar="PATH",
        help="append each result to the lab notebook (PATH, else $SPECTUI_NOTEBOOK, else the default)",
    )
    p.add_argument("--profile", metavar="NAME", help="hardware profile name recorded in the notebook")
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run each prompt N times per side, interleaved, and report the speed-up (geometric mean) with its 95%% interval",
    )
    p.add_argument(
        "--triage",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="when outputs differ, rerun and ask for log-probabilities to say why (default: off)",
    )
    p.add_argument("--triage-limit", type=int, default=1, metavar="N", help="divergent prompts to triage (default 1)")
    p.add_argument(
        "--near-tie",
        type=positive,
        default=0.05,
        metavar="NATS",
        help="a margin under this between the two chosen tokens is a near-tie (default 0.05)",
    )
    p.add_argument(
        "--probe-drafts",
        action="store_true",
        help="after the run, rebuild what the candidate's drafter proposed at each step and show the rejected text",
    )
    p.add_argument(
        "--draft-model",
        metavar="GGUF",
        help="with --probe-drafts on a draft-model candidate: its draft GGUF (default: spectui's bundled draft)",
    )
    p.add_argument(
        "--ngram-size",
        metavar="N,M",
        help="with --probe-drafts on an ngram-simple candidate: its --spec-ngram-simple-size-n,-m (default 12,48)",
    )
    _add_run_options(p)

    p = sub.add_parser("replay", help="replay a saved session without any server")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--no-tui", action="store_true", help="print the same report as `compare`")
    p.add_argument("--json", action="store_true", help="with --no-tui: the same JSON as `compare --json`")
    p.add_argument("--speed", default="1", metavar="X", help="1 (recorded speed), 2, 10, … or max")

    p = sub.add_parser("report", help="export a saved session as Markdown or JSON")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--format", choices=("md", "json", "html"), default="md", help="html: one self-contained page")
    p.add_argument("-o", "--output", metavar="PATH", help="write here (atomically) instead of printing")

    p = sub.add_parser("sessions", help="list saved sessions (the autosave folder by default)")
    p.add_argument("folder", nargs="?", metavar="FOLDER")

    p = sub.add_parser("notebook", help="the lab notebook: show it or print its path")
    p.add_argument("action", choices=("show", "path"))
    p.add_argument("--notebook", metavar="PATH")

    p = sub.add_parser("doctor", help="what spectui found: llama-server, models, GPUs, host")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("setup", help="build llama-server and fetch SmolLM2 and its draft into the cache")
    p.add_argument(
        "--vllm", action="store_true", help="also install vLLM for CPU (its own environment) and convert the model"
    )

    p = sub.add_parser("tui", help="open the two-pane TUI on two running servers")
    p.add_argument("--no-autosave", action="store_true", help="do not record runs into the sessions folder")
    p.add_argument("--notebook", metavar="PATH", help="the lab notebook for Ctrl+N (else $SPECTUI_NOTEBOOK)")
    p.add_argument("--baseline", metavar="URL")
    p.add_argument("--candidate", metavar="URL")
    p.add_argument("--prompts", metavar="SET|FILE", default="default")
    p.add_argument(
        "--triage",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="when outputs differ, find out why (default: on)",
    )
    _add_run_options(p)

    p = sub.add_parser("demo", help="launch the bundled pair of llama-servers and open the TUI on them")
    p.add_argument("--headless", action="store_true", help="run the comparison without the TUI and print it")
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="with --headless: runs per side (interleaved)")
    p.add_argument(
        "--one-at-a-time",
        action="store_true",
        help="the baseline alone, then the candidate alone, never both servers up (the TUI plays the "
        "baseline's recording beside the live candidate)",
    )
    p.add_argument(
        "--triage",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="when outputs differ, find out why (default: on; --no-triage to skip)",
    )
    p.add_argument(
        "--candidate",
        choices=("draft", "ngram", "kvq4", "prefix"),
        default="draft",
        help="which speed-up the candidate uses (default: draft-model speculation)",
    )

    p = sub.add_parser("import", help="results of vllm bench serve, AIPerf or guidellm into the lab notebook")
    p.add_argument("tool", choices=("vllm-bench", "aiperf", "guidellm"))
    p.add_argument(
        "file",
        metavar="FILE",
        help="vllm bench --save-result JSON, AIPerf profile_export_aiperf.json, guidellm benchmarks.json",
    )
    p.add_argument("--notebook", metavar="PATH", help="the notebook (else $SPECTUI_NOTEBOOK, else the default)")
    p.add_argument("--tool-version", metavar="V", help="the tool's version, for files that do not say (vllm bench)")
    p.add_argument("--json", action="store_true", help="print the measurements instead of appending them")

    p = sub.add_parser("serve", help="the app in a web browser (textual-serve), on 127.0.0.1 unless told otherwise")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, metavar="N", help="port (default 8000; 0 picks a free one)")
    p.add_argument(
        "--max-apps", type=int, default=4, metavar="N", help="app processes (browser tabs) at once (default 4)"
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        metavar="ORIGIN",
        help="also accept requests from pages of ORIGIN (e.g. http://localhost:3000; * for any); repeatable",
    )
    p.add_argument("app_args", nargs=argparse.REMAINDER, metavar="-- ARGS", help="the app's own arguments, after --")

    p = sub.add_parser("sweep", help="throughput and speed-up against concurrency: where the payoff collapses")
    p.add_argument("--baseline", metavar="URL", help="the baseline server (or --launch a profile's pair)")
    p.add_argument("--candidate", metavar="URL", help="the candidate server (or --launch a profile's pair)")
    p.add_argument(
        "--launch",
        metavar="COMPARISON",
        help="start the comparison's two servers from the profile (--profile, default cpu-demo) and stop them after",
    )
    p.add_argument("--profile", metavar="NAME", help="with --launch: the hardware profile (default cpu-demo)")
    p.add_argument(
        "--one-at-a-time",
        action="store_true",
        help="with --launch: the baseline alone at every level, stopped, then the candidate alone (chosen by "
        "itself where the memory plan says the two do not fit on the GPU together); speed-ups paired per level",
    )
    p.add_argument("--concurrency", default="1,2,4,8", metavar="N,N,…", help="levels (default 1,2,4,8)")
    p.add_argument("--prompts", default="default", metavar="SET|FILE", help="prompt set, cycled to fill each level")
    p.add_argument("--json", action="store_true")
    p.add_argument("--svg", metavar="PATH", help="write the plot as an SVG image")
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="each level N times, interleaved; the speed-up's 95%% interval",
    )
    p.add_argument("--save", metavar="PATH", help="save the sweep results (JSON) to PATH")
    p.add_argument("--notebook", nargs="?", const="", metavar="PATH", help="append one measurement per level")
    _add_run_options(p)

    p = sub.add_parser("sampling", help="exact under sampling: seeded bytes and the two output distributions")
    p.add_argument("--baseline", required=True, metavar="URL")
    p.add_argument("--candidate", required=True, metavar="URL")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--prompt", metavar="TEXT")
    g.add_argument("--prompts", metavar="SET|FILE")
    p.add_argument("--raw", action="store_true", help="send --prompt unchanged, without the chat template")
    p.add_argument("--top-p", type=finite, metavar="P", help="nucleus sampling, 0 < P <= 1 (default: the server's)")
    p.add_argument("--samples", type=int, default=20, metavar="N", help="seeds (samples) per prompt and side (20)")
    p.add_argument("--seed-base", type=int, default=1000, metavar="S", help="seeds S, S+1, … (default 1000)")
    p.add_argument("--distribution", action="store_true", help="run the distribution pass even when every seed matched")
    p.add_argument("--json", action="store_true")
    p.add_argument("--save", metavar="PATH", help="save every sample as a session")
    p.add_argument("--notebook", nargs="?", const="", metavar="PATH", help="append one measurement per prompt")
    _add_run_options(p)
    p.set_defaults(max_tokens=16, temperature=0.8)

    p = sub.add_parser("prefix", help="prefix caching: cold vs warm turns, tokens reused, TTFT, and the bytes")
    p.add_argument("--baseline", required=True, metavar="URL", help="cache off (every turn recomputed)")
    p.add_argument("--candidate", required=True, metavar="URL", help="cache on")
    p.add_argument("--turns", type=int, default=3, metavar="N", help="conversation turns (default 3)")
    p.add_argument("--prompt", metavar="TEXT", help="send this (long) prompt N times instead of a conversation")
    p.add_argument(
        "--restore-check",
        action="store_true",
        help="also save the candidate's conversation cache and time the next turn restored vs recomputed "
        "(needs --slot-save-path)",
    )
    p.add_argument("--json", action="store_true")
    _add_run_options(p)

    p = sub.add_parser("cache", help="save, restore or erase a llama.cpp slot's cache (--slot-save-path)")
    p.add_argument("action", choices=("save", "restore", "erase"))
    p.add_argument("url", metavar="URL")
    p.add_argument("--slot", type=int, default=0, metavar="N")
    p.add_argument("--file", metavar="NAME", help="file name inside the server's --slot-save-path")

    p = sub.add_parser("kv", help="KV cache types: each server's flags, and the memory a quantised cache saves")
    p.add_argument("--model", metavar="GGUF", help="model to size (default: the cached SmolLM2)")
    p.add_argument("--ctx", type=int, default=4096, metavar="N", help="context length (default 4096)")

    p = sub.add_parser("profiles", help="hardware profiles: list, show one, check one against this machine")
    p.add_argument("action", choices=("list", "show", "check"))
    p.add_argument("name", nargs="?")

    p = sub.add_parser("theory", help="speed-up as a function of acceptance rate, draft length and draft cost")
    p.add_argument("--alpha", type=finite, metavar="A", help="acceptance rate, 0 <= A < 1")
    p.add_argument("--gamma", type=int, metavar="G", help="drafted tokens per step, >= 1")
    p.add_argument("--cost", type=finite, metavar="C", help="draft step cost / target step cost, >= 0")
    p.add_argument(
        "--from",
        dest="from_session",
        metavar="SESSION",
        help="a saved session: measure the formula's terms on its servers and check the formula against the run",
    )
    p.add_argument(
        "--draft-model", metavar="GGUF", help="with --from: the candidate's draft (default: the bundled draft)"
    )
    p.add_argument("--repeats", type=int, default=3, metavar="N", help="with --from: measurements per term (3)")
    p.add_argument("--no-measure", action="store_true", help="with --from: the ideal formula only, no requests")
    p.add_argument("--html", metavar="FILE", help="with --from: also write the HTML report with the terms table")
    p.add_argument(
        "--save",
        action="store_true",
        help="with --from: keep the measured terms beside the session (SESSION.terms.json) for `spectui report`",
    )
    p.add_argument("--json", action="store_true")

    from spectui.cli.drafts import add_parser as add_drafts_parser

    add_drafts_parser(sub)
    from spectui.cli.prove import add_parsers as add_prove_parsers

    add_prove_parsers(sub, _add_run_options)  # prove, verify, regress, merge
    return parser


def main(argv: list[str] | None = None) -> int:
    from spectui.core.errors import redacting_stream, register_urls_in

    # a URL's user:password never reaches the console, whichever line prints it (issue 26, item 5)
    register_urls_in(sys.argv[1:] if argv is None else argv)
    sys.stdout, sys.stderr = redacting_stream(sys.stdout), redacting_stream(sys.stderr)
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args.command or "tui"
    if args.command is None:
        args = parser.parse_args(["tui", *(argv if argv is not None else sys.argv[1:])])
    try:
        if command in COMMANDS:
            result = handler_for(command)(args)
            return asyncio.run(result) if asyncio.iscoroutine(result) else result
    except KeyboardInterrupt:
        print("spectui: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `spectui verify C | head -2`: the reader left; no traceback, no second one at exit
        if sys.__stdout__ is not None:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.__stdout__.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a writer the pipe stopped
    except InputError as exc:
        print(f"spectui: error: {exc.one_line()}", file=sys.stderr)
        return EXIT_USAGE
    except SpectuiError as exc:
        print(f"spectui: error: {exc.one_line()}", file=sys.stderr)
        return EXIT_SERVER
    parser.print_help()
    return EXIT_USAGE


# command → (module, function), imported only when run: `spectui --help` stays fast
COMMANDS = {
    "compare": ("compare", "cmd_compare"),
    "replay": ("compare", "cmd_replay"),
    "report": ("compare", "cmd_report"),
    "sessions": ("compare", "cmd_sessions"),
    "notebook": ("compare", "cmd_notebook"),
    "sweep": ("labs", "cmd_sweep"),
    "sampling": ("labs", "cmd_sampling"),
    "prefix": ("labs", "cmd_prefix"),
    "cache": ("labs", "cmd_cache"),
    "kv": ("labs", "cmd_kv"),
    "theory": ("labs", "cmd_theory"),
    "setup": ("machine", "cmd_setup"),
    "doctor": ("machine", "cmd_doctor"),
    "profiles": ("machine", "cmd_profiles"),
    "tui": ("tui", "cmd_tui"),
    "demo": ("demo", "cmd_demo"),
    "serve": ("serve", "cmd_serve"),
    "import": ("compare", "cmd_import"),
    "drafts": ("drafts", "cmd_drafts"),
    "prove": ("prove", "cmd_prove"),
    "verify": ("prove", "cmd_verify"),
    "regress": ("prove", "cmd_regress"),
    "merge": ("prove", "cmd_merge"),
}


def handler_for(command: str):
    import importlib

    module, name = COMMANDS[command]
    return getattr(importlib.import_module(f"spectui.cli.{module}"), name)
