"""`spectui theory`: speed-up as a function of acceptance rate, draft length and draft cost; with --from, the
formula's terms measured on a session's servers (labs.theory)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from spectui.backends.launchspec import LaunchSpec
from spectui.backends.transport import stamped_client
from spectui.cli import options
from spectui.cli.commands import COMMANDS
from spectui.cli.common import EXIT_OK, EXIT_SERVER, PairOptions, connect_pair
from spectui.core.errors import InputError, ServerError, describe
from spectui.core.runner import grouped
from spectui.core.types import SIDES, GenerationParams
from spectui.labs.html_report import html_report
from spectui.labs.theory import formula as theory
from spectui.labs.theory import record as terms_record
from spectui.labs.theory.costs import check_prompt, curve_text
from spectui.store.locations import atomic_write
from spectui.store.session import load_session, results_for


def cmd_theory(args):
    typed = [f"--{n}" for n in ("alpha", "gamma", "cost") if getattr(args, n, None) is not None]
    if getattr(args, "from_session", None):
        if typed:
            raise InputError(f"--from reads α, γ and c from the run: leave out {', '.join(typed)}")
        return _theory_from(args)  # main runs the coroutine
    if len(typed) < 3:
        raise InputError(
            "give --alpha, --gamma and --cost (or --from SESSION to measure them)",
            hint="e.g. --alpha 0.8 --gamma 4 --cost 0.05",
        )
    for flag in ("--draft-model", "--no-measure", "--html", "--save"):
        if getattr(args, flag[2:].replace("-", "_"), None):
            raise InputError(f"{flag} goes with --from SESSION")
    t = theory.analyse(args.alpha, args.gamma, args.cost)
    if args.json:
        print(json.dumps(t, indent=2))
    else:
        print(theory.text(t))
    return EXIT_OK


async def _theory_from(args) -> int:
    """spectui theory --from SESSION: each prompt's terms measured on the session's servers (still
    running), the formula's prediction beside the measured speed-up, and the term that misses."""
    _check_from_options(args)
    session, groups = _finished_groups(args.from_session)

    def say(line: str) -> None:
        if not args.json:
            print(f"spectui: {line}", file=sys.stderr)

    checks, curves, kept = await _checks(args, session, groups, say)
    if getattr(args, "save", False) and kept is not None:
        print("spectui: --save: nothing newly measured (the terms shown were kept in the session)", file=sys.stderr)
    elif kept is None and any(c is not None and c.measured for c in curves.values()):
        # measured terms belong with the session they were measured for: kept whether or not --save was
        # given, so the lesson still shows them once the servers are gone
        _save_terms(session, checks, curves, args)
    if args.json:
        print(json.dumps(_json_doc(args, session, checks, curves, kept), indent=2))
    else:
        _print_checks(checks, curves)
    if args.html and not _write_html(args.html, session, groups, checks):
        return EXIT_SERVER
    return EXIT_OK


def _check_from_options(args) -> None:
    if args.repeats < 1:
        raise InputError(f"--repeats must be at least 1, not {args.repeats}")
    if getattr(args, "save", False) and args.no_measure:
        raise InputError("--save keeps measured terms: --no-measure measures none", hint="leave out one of them")
    if args.html and (Path(args.html).expanduser().is_dir() or not Path(args.html).expanduser().parent.is_dir()):
        raise InputError(f"--html {args.html}: not a file in an existing folder", hint="give --html a file name")


def _finished_groups(path: str):
    """The session, and its prompts that finished on both sides at least once (each with its runs)."""
    session = load_session(path)
    groups = [g for g in grouped(results_for(session)) if any(r.speedup for r in g.runs)]
    if not groups:
        raise InputError(f"{session.path}: no prompt finished on both sides, nothing to check the formula against")
    for w in session.warnings:
        print(f"spectui: warning: {w}", file=sys.stderr)
    return session, groups


async def _checks(args, session, groups, say) -> tuple[dict, dict, dict | None]:
    """Each prompt's formula check and measured curve: measured now on the session's servers, or (where they
    are gone) read from the terms kept with the session (returned as the third value)."""
    infos = session.infos
    checks: dict = {}
    curves: dict = {}
    # each server's own command line where it runs here: the draft is timed at the candidate's threads and
    # offload, every position's outputs at the baseline's
    from spectui.labs.sampling.exact import launch_argv  # lazy: numpy (~0.3 s), only where servers are checked

    launched = {side: LaunchSpec.from_argv(launch_argv(infos[side].url)) for side in SIDES}
    async with stamped_client() as client:
        backends, kept = (None, None) if args.no_measure else await _pair_or_kept(client, args, session, say)
        if kept is not None:  # the servers are gone: every prompt's check from the times kept with the session
            checks, curves = terms_record.from_stored(kept, groups)
        for g in groups if kept is None else []:
            say(f"{g.prompt.id}: {len(g.runs)} run(s)")
            b, c = (backends["baseline"], backends["candidate"]) if backends else (None, None)
            chk, curve = await check_prompt(
                client,
                b,
                c,
                g.runs,
                args.draft_model,
                args.repeats,
                say,
                measure_terms=backends is not None,
                launched=launched,
            )
            checks[g.prompt.id], curves[g.prompt.id] = chk, curve
    return checks, curves, kept


def _save_terms(session, checks: dict, curves: dict, args) -> None:
    """--save: the measured terms appended to the session (spectui report shows them)."""
    rec = terms_record.record(
        [terms_record.entry(pid, chk, curves[pid]) for pid, chk in checks.items()], args.repeats, args.draft_model
    )
    try:
        where = terms_record.save(session.path, rec)
    except OSError as exc:
        raise InputError(f"the terms were not saved with {session.path}: {exc.strerror or exc}") from None
    print(f"spectui: saved the measured terms to {where} (spectui report shows them)", file=sys.stderr)


def _json_doc(args, session, checks: dict, curves: dict, kept) -> dict:
    return {
        "session": str(session.path),
        "baseline": session.infos["baseline"].to_json(),
        "candidate": session.infos["candidate"].to_json(),
        "terms_from": "not measured (--no-measure)"
        if args.no_measure
        else ("kept in the session (its servers are not up)" if kept is not None else "measured now"),
        "prompts": [
            {
                "id": pid,
                "check": chk.to_json() if chk else None,
                "measurement": curves[pid].to_json() if curves[pid] else None,
                "why_none": None if chk else "the candidate drafted nothing in this prompt's runs",
            }
            for pid, chk in checks.items()
        ],
    }


def _print_checks(checks: dict, curves: dict) -> None:
    for pid, chk in checks.items():
        print(f"== {pid}")
        if chk is None:
            print("the candidate drafted nothing in this prompt's runs: no speculation to check")
            continue
        if curves[pid] is not None:
            print(curve_text(curves[pid]))
        print(chk.text())
        print()


def _write_html(path: str, session, groups, checks: dict) -> bool:
    """--html: the session's report with each prompt's formula check; False (and one line) where not written."""
    results = [r for g in groups for r in g.runs]
    sp = session.prompts[0] if session.prompts else None
    params, order = (sp.params, sp.order) if sp else (GenerationParams(), "sequential")
    text = html_report(session.infos, results, params, order, str(session.path), checks=checks)
    try:
        atomic_write(Path(path).expanduser(), text)
    except OSError as exc:
        print(
            f"spectui: error: --html {path} not written ({exc.strerror}); the report above is complete", file=sys.stderr
        )
        return False
    return True


async def _pair_or_kept(client, args, session, say) -> tuple[dict | None, dict | None]:
    """The session's two servers, connected and checked to serve what the run used; or, where they are not
    up, the terms kept with the session (None, record); neither: one line offering --no-measure."""
    infos = session.infos
    opts = PairOptions(
        infos["baseline"].url,
        infos["candidate"].url,
        baseline_backend=infos["baseline"].backend,
        candidate_backend=infos["candidate"].backend,
        quiet=args.json,
    )
    try:
        backends, live = await connect_pair(client, opts)
    except ServerError as exc:
        kept, warnings = terms_record.stored(session.path, session.terms)
        if kept is None:
            raise InputError(
                f"{describe(exc)}; the session keeps no measured terms to show instead",
                hint="start the session's servers again (then --save keeps the terms in the session), "
                "or use --no-measure for the ideal formula alone",
            ) from None
        for w in warnings:
            print(f"spectui: warning: {w}", file=sys.stderr)
        say(f"the session's servers are not up ({describe(exc)}): showing the terms kept in the session")
        return None, kept
    for side in SIDES:
        was, now = infos[side], live[side]
        if (was.model, was.build) != (now.model, now.build):
            raise InputError(
                f"the {side} at {was.url} now serves {now.model} ({now.build}); the session's run used "
                f"{was.model} ({was.build})",
                hint="start the session's servers again, or use --no-measure",
            )
    return backends, None


def register(sub) -> None:
    p = sub.add_parser("theory", help=COMMANDS["theory"].help)
    p.add_argument(
        "--alpha",
        type=options.finite,
        metavar="A",
        help="α per position, 0 <= A < 1: the chance each drafted position is accepted given the ones before it"
        " were (Leviathan et al.'s α; not accepted/drafted, the acceptance per drafted token, which is Σα^i/γ)",
    )
    p.add_argument("--gamma", type=int, metavar="G", help="drafted tokens per step, >= 1")
    p.add_argument("--cost", type=options.finite, metavar="C", help="draft step cost / target step cost, >= 0")
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
        help="with --from: measured terms are always kept in the session (beside it, SESSION.terms.json, where a "
        "certificate references it) for `spectui report` and `theory --from` once the servers are gone; --save "
        "only says so when nothing new was measured",
    )
    options.add_json(p)
