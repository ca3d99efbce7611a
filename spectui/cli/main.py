"""spectui's command line: `spectui` opens the TUI; subcommands run headless.

The rule for imports in spectui/cli: `spectui --help` reads the COMMANDS table below and imports no command
module (main, common and options only, so those three keep what --help does not need inside their functions);
a command's module is imported only when that command is named (pip's commands/ pattern) and imports what it
uses at its top. An import stays inside a function only where it loads something heavy that the module's
other paths never need (textual for the TUI, aiohttp for serve, numpy with the sampling statistics), marked
`# lazy: <what it loads>` (tests/unit/test_architecture.py checks every one says so).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys

from spectui import __version__
from spectui.cli.commands import COMMANDS, TASKS
from spectui.cli.common import EXIT_DIFFERS, EXIT_OK, EXIT_SERVER, EXIT_USAGE  # noqa: F401
from spectui.cli.options import Parser
from spectui.core.errors import InputError, SpectuiError, printable, redacting_stream, register_urls_in

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
    # a URL's user:password never reaches the console, whichever line prints it
    register_urls_in(sys.argv[1:] if argv is None else argv)
    sys.stdout, sys.stderr = redacting_stream(sys.stdout), redacting_stream(sys.stderr)
    words = sys.argv[1:] if argv is None else list(argv)
    named = _command_in(words)
    try:  # Ctrl+C while the command's modules load (a second or more on a busy machine) is no traceback either
        parser = build_parser(named if named in COMMANDS else None)
        args = parser.parse_args(words)
        command = args.command or "tui"
        if args.command is None:  # plain `spectui [options]`: the TUI (its picker without URLs)
            args = build_parser("tui").parse_args(["tui", *words])
    except KeyboardInterrupt:
        print("spectui: interrupted", file=sys.stderr)
        return 130
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
        print(f"spectui: error: {printable(exc.one_line())}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        if exc.errno not in WRITE_ERRORS:
            raise
        print(f"spectui: error: {printable(write_error_line(exc))}", file=sys.stderr)
        return EXIT_SERVER
    except SpectuiError as exc:
        print(f"spectui: error: {printable(exc.one_line())}", file=sys.stderr)
        return EXIT_SERVER
    parser.print_help()
    return EXIT_USAGE


# a write refused by the disk (full, read-only, no permission, over quota or the largest file size): one line,
# whichever file it was; every writer appends whole lines or renames whole files, so what was written stays whole
WRITE_ERRORS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.EFBIG}


def write_error_line(exc: OSError) -> str:
    where = f" {exc.filename}" if exc.filename else ""
    return (
        f"cannot write{where}: {exc.strerror or exc} — free space or give a writable path, then run the same "
        "command again (what was written before is whole)"
    )


def handler_for(command: str):
    """The function that runs COMMAND: cmd_<command> in its module (import: cmd_import)."""

    module = importlib.import_module(f"spectui.cli.{COMMANDS[command][0]}")
    return getattr(module, f"cmd_{command}")
