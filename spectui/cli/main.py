"""spectui's command line: `spectui` opens the TUI; subcommands run headless.

The rule for imports in spectui/cli: `spectui --help` reads the COMMANDS table below and imports no command
module; `spectui COMMAND --help` and the command's run import its module. In every cli module an import
stands at the module top unless it loads what the module's own top does not (httpx ~0.13 s, textual
~0.13 s, aiohttp ~0.28 s, asyncio ~0.08 s cold, scipy, or a run/labs subsystem of tens of modules) for a
path only some of its commands take; such an import stays in its function, marked `# lazy: <what it
loads>` (tests/unit/test_architecture.py checks every one is). So `spectui --help` (~0.2 s) and each
command's --help load none of those (`python -X importtime`, `sys.modules` after `main([..., "--help"])`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from spectui import __version__
from spectui.cli.common import EXIT_DIFFERS, EXIT_OK, EXIT_SERVER, EXIT_USAGE  # noqa: F401
from spectui.cli.options import Parser
from spectui.core.errors import InputError, SpectuiError, redacting_stream, register_urls_in

# command → (module in spectui.cli, one line of help, task); only the command that runs is imported
# (pip's commands_dict): `spectui --help` reads this table and imports no command module
COMMANDS: dict[str, tuple[str, str, str]] = {
    "tui": ("tui", "open the two-pane TUI on two running servers (or the profile picker)", "watch"),
    "compare": ("compare", "stream the same prompts to both servers and compare, headless", "watch"),
    "demo": ("demo", "launch the bundled pair of llama-servers and open the TUI on them", "watch"),
    "serve": ("serve", "the app in a web browser (textual-serve), on 127.0.0.1 unless told otherwise", "watch"),
    "prove": ("prove", "one certificate that the candidate is identical to the baseline, and how much faster", "prove"),
    "verify": ("prove", "re-derive a certificate from its raw sessions (no servers) and check every hash", "prove"),
    "regress": ("prove", "two certificates of one prompt set: what got worse", "prove"),
    "merge": ("prove", "shard certificates (--shard I/N) into the one a single run would give", "prove"),
    "formats": ("formats", "which weight format to serve: each measured plain and speculative on this machine", "labs"),
    "theory": ("theory", "speed-up as a function of acceptance rate, draft length and draft cost", "labs"),
    "sweep": ("sweep", "throughput and speed-up against concurrency: where the payoff collapses", "labs"),
    "sampling": ("sampling", "exact under sampling: seeded bytes and the two output distributions", "labs"),
    "prefix": ("prefix", "prefix caching: cold vs warm turns, tokens reused, TTFT, and the bytes", "labs"),
    "cache": ("prefix", "save, restore or erase a llama.cpp slot's cache (--slot-save-path)", "labs"),
    "kv": ("memory", "KV cache types: each server's flags, and the memory a quantised cache saves", "labs"),
    "drafts": ("drafts", "drafts: what training one costs, data from the target, a lookup draft proven", "labs"),
    "replay": ("sessions", "replay a saved session without any server", "sessions"),
    "report": ("sessions", "export a saved session as text, Markdown, JSON or HTML", "sessions"),
    "sessions": ("sessions", "list saved sessions (the autosave folder by default)", "sessions"),
    "notebook": ("sessions", "the lab notebook: show it or print its path", "sessions"),
    "import": ("sessions", "results of vllm bench serve, AIPerf or guidellm into the lab notebook", "sessions"),
    "setup": ("machine", "build llama-server and fetch SmolLM2 and its draft into the cache", "set-up"),
    "doctor": ("machine", "what spectui found: llama-server, models, GPUs, host", "set-up"),
    "profiles": ("machine", "hardware profiles: list, show one, check one against this machine", "set-up"),
}
TASKS = ("watch", "prove", "labs", "sessions", "set-up")

EPILOG = """plain `spectui` opens the picker: choose a hardware profile and spectui starts its pair of servers.

examples:
  spectui demo                                   the bundled pair of llama-servers, side by side
  spectui compare --launch draft --prompts quick --json
  spectui report session.jsonl --format html -o report.html

`spectui COMMAND --help` lists a command's options."""


def _register(sub, module: str) -> None:
    """A command module's parsers: each module's register(subparsers) (pip's commands/ pattern)."""

    importlib.import_module(f"spectui.cli.{module}").register(sub)


def _commands_text() -> str:
    lines = []
    for task in TASKS:
        lines.append(f"{task}:")
        lines += [f"  {name:<10} {text}" for name, (_, text, t) in COMMANDS.items() if t == task]
    return "\n".join(lines)


def build_parser(command: str | None = "") -> argparse.ArgumentParser:
    """The whole parser (command ""), or one where only COMMAND's module is imported and the others are
    placeholders named in the table (None: every command a placeholder, for `spectui --help`)."""
    parser = Parser(
        prog="spectui",
        usage="spectui [-h] [--version] [COMMAND] ...",
        description="Is the candidate server faster than the baseline, and are the bytes the same?\n\n"
        + _commands_text(),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"spectui {__version__}")
    sub = parser.add_subparsers(
        dest="command", parser_class=Parser, metavar="COMMAND", help=argparse.SUPPRESS, prog="spectui"
    )
    wanted = dict.fromkeys(m for m, _, _ in COMMANDS.values()) if command == "" else {}
    if command in COMMANDS:
        wanted = {COMMANDS[command][0]: None}
    for module in wanted:
        _register(sub, module)
    for name, (_, text, _) in COMMANDS.items():
        if name not in sub.choices:
            sub.add_parser(name, help=text)  # a placeholder: parsed again with its module once chosen
    return parser


def _command_in(argv: list[str]) -> str | None:
    """The command named on the line: the first word that is not an option (`spectui --version` has none)."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    # a URL's user:password never reaches the console, whichever line prints it (issue 26, item 5)
    register_urls_in(sys.argv[1:] if argv is None else argv)
    sys.stdout, sys.stderr = redacting_stream(sys.stdout), redacting_stream(sys.stderr)
    words = sys.argv[1:] if argv is None else list(argv)
    named = _command_in(words)
    parser = build_parser(named if named in COMMANDS else None)
    args = parser.parse_args(words)
    command = args.command or "tui"
    if args.command is None:  # plain `spectui [options]`: the TUI (its picker without URLs)
        args = build_parser("tui").parse_args(["tui", *words])
    try:
        if command in COMMANDS:
            result = handler_for(command)(args)
            if not hasattr(result, "__await__"):
                return result
            import asyncio  # lazy: asyncio (~81 ms cold), only for a command that runs one: `spectui --help` stays fast

            return asyncio.run(result)
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


def handler_for(command: str):
    """The function that runs COMMAND: cmd_<command> in its module (import: cmd_import)."""

    module = importlib.import_module(f"spectui.cli.{COMMANDS[command][0]}")
    return getattr(module, f"cmd_{command}")
