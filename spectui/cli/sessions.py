"""What reads saved sessions: `replay`, `report`, `sessions`, `notebook`, and `import` (other tools' results
into the notebook). REPORTS is the one table of report formats, read by `report --format` and `replay`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from spectui.cli.commands import COMMANDS
from spectui.cli.common import EXIT_OK
from spectui.cli.compare import exit_for
from spectui.cli.outputs import check_output
from spectui.core.errors import InputError
from spectui.core.report import json_report, markdown_report, text_report
from spectui.labs.html_report import html_report
from spectui.labs.theory.record import for_report
from spectui.store import imports, notebook
from spectui.store.locations import atomic_write
from spectui.store.session import default_session_dir, load_session, results_for
from spectui.store.session_list import list_sessions


def _text(infos, results, params, order, path=None, terms=None, checks=None) -> str:
    return text_report(infos, results, params, order, terms=terms) + "\n"


def _markdown(infos, results, params, order, path=None, terms=None, checks=None) -> str:
    return markdown_report(infos, results, params, order, path, terms=terms)


def _json(infos, results, params, order, path=None, terms=None, checks=None) -> str:
    doc = json_report(infos, results, params, order)
    return json.dumps({**doc, "terms": terms} if terms else doc, indent=2) + "\n"


def _html(infos, results, params, order, path=None, terms=None, checks=None) -> str:
    return html_report(infos, results, params, order, path, checks=checks, terms_record=terms)


# format → the whole document (infos, results, params, order, path, terms, checks) → str, ending in a newline
REPORTS = {"text": _text, "md": _markdown, "json": _json, "html": _html}


def register(sub) -> None:
    p = sub.add_parser("replay", help=COMMANDS["replay"].help)
    p.add_argument("file", metavar="FILE")
    p.add_argument("--no-tui", action="store_true", help="print the same report as `compare`")
    p.add_argument("--json", action="store_true", help="with --no-tui: the same JSON as `compare --json`")
    p.add_argument("--speed", default="1", metavar="X", help="1 (recorded speed), 2, 10, … or max")

    p = sub.add_parser("report", help=COMMANDS["report"].help)
    p.add_argument("file", metavar="FILE")
    p.add_argument(
        "--format",
        choices=tuple(REPORTS),
        default="md",
        help="md (default), json, text, or html: one self-contained page",
    )
    p.add_argument("-o", "--output", metavar="PATH", help="write here (atomically) instead of printing")

    p = sub.add_parser("sessions", help=COMMANDS["sessions"].help)
    p.add_argument("folder", nargs="?", metavar="FOLDER")

    p = sub.add_parser("notebook", help=COMMANDS["notebook"].help)
    p.add_argument("action", choices=("show", "path"))
    p.add_argument("--notebook", metavar="PATH")

    p = sub.add_parser("import", help=COMMANDS["import"].help)
    p.add_argument("tool", choices=("vllm-bench", "aiperf", "guidellm"))
    p.add_argument(
        "file",
        metavar="FILE",
        help="vllm bench --save-result JSON, AIPerf profile_export_aiperf.json, guidellm benchmarks.json",
    )
    p.add_argument("--notebook", metavar="PATH", help="the notebook (else $SPECTUI_NOTEBOOK, else the default)")
    p.add_argument("--tool-version", metavar="V", help="the tool's version, for files that do not say (vllm bench)")
    p.add_argument("--json", action="store_true", help="print the measurements instead of appending them")


def cmd_replay(args) -> int:
    if args.json and not args.no_tui:  # else the TUI would open and --json be ignored
        raise InputError("replay --json prints the report instead of playing it: give it with --no-tui")
    session = load_session(args.file)
    if not session.prompts:
        raise InputError(f"{session.path} holds no prompts to replay")
    if args.no_tui:
        results = results_for(session)  # the recorded verdicts, each checked against its events
        for w in session.warnings:
            print(f"spectui: warning: {w}", file=sys.stderr)
        params, order = session.prompts[0].params, session.prompts[0].order
        terms, _ = _saved_terms(session.path, results)
        if not args.json:
            print(f"replay of {session.path} (recorded {session.created})")
        print(REPORTS["json" if args.json else "text"](session.infos, results, params, order, terms=terms), end="")
        return exit_for(results)
    for w in session.warnings:
        print(f"spectui: warning: {w}", file=sys.stderr)
    from spectui.cli.tui import run_replay  # lazy: textual (~130 ms cold), only for replay

    return run_replay(session, args.speed)


def cmd_report(args) -> int:
    session = load_session(args.file)
    results = results_for(session)
    for w in session.warnings:
        print(f"spectui: warning: {w}", file=sys.stderr)
    if not results:
        raise InputError(f"{session.path} holds no prompts")

    check_output(args.output, "-o", kinds=("report",))
    params, order = session.prompts[0].params, session.prompts[0].order
    terms, checks = _saved_terms(session.path, results)
    text = REPORTS[args.format](session.infos, results, params, order, str(session.path), terms, checks)
    if args.output:
        try:
            atomic_write(Path(args.output).expanduser(), text)
        except OSError as exc:
            raise InputError(f"cannot write {args.output}: {exc.strerror or exc}", hint="nothing was written") from None
        print(f"spectui: wrote {args.output}", file=sys.stderr)
    else:
        print(text, end="")
    return EXIT_OK


def _saved_terms(path, results):
    """The formula's terms saved beside the session by `theory --from S --save` (each check derived again
    from the saved times and the session's runs) and its checks; a warning printed for each problem."""
    terms, checks, warnings = for_report(path, results)
    for w in warnings:
        print(f"spectui: warning: {w}", file=sys.stderr)
    return terms, checks


def cmd_sessions(args) -> int:
    folder = Path(args.folder).expanduser() if args.folder else default_session_dir()
    rows = list_sessions(folder)
    if not rows:
        print(f"{folder}: no sessions")
        return EXIT_OK
    for r in rows:
        print(r.line())
    return EXIT_OK


def cmd_notebook(args) -> int:
    path = notebook.notebook_path(args.notebook)
    print(path if args.action == "path" else notebook.show_text(path))
    return EXIT_OK


def cmd_import(args) -> int:
    rows = imports.read(args.tool, Path(args.file).expanduser(), args.tool_version)
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return EXIT_OK
    where, warning = notebook.append(notebook.notebook_path(args.notebook), rows)
    what = f"{len(rows)} {args.tool} measurement{'s' if len(rows) != 1 else ''}"
    print(f"spectui: {'warning: ' + warning if warning else f'appended {what} to {where}'}", file=sys.stderr)
    return EXIT_OK
