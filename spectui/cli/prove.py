"""`spectui prove`, `verify`, `regress` and `merge`: the certificate commands (spectui.run.prove.prove and
spectui.run.prove.certificate do the work; this module parses, prints and picks the exit code)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.backends.detect import api_key_from
from spectui.backends.launchspec import LaunchSpec
from spectui.backends.transport import stamped_client
from spectui.cli.commands import COMMANDS
from spectui.cli.common import EXIT_DIFFERS, EXIT_OK, EXIT_SERVER, PairOptions, connect_pair, params_from, prompts_from
from spectui.cli.compare import machine_sampler
from spectui.cli.options import add_run_options
from spectui.cli.outputs import check_output
from spectui.cli.progress import run_events
from spectui.core.errors import InputError, describe
from spectui.core.report import text_report
from spectui.core.types import SIDES
from spectui.run import events as ev
from spectui.run import formats, nway, three_way
from spectui.run.pair import GivenPair, LaunchedPair
from spectui.run.prove.certificate import canonical, merge, verify, write
from spectui.run.prove.prove import ProveOptions, Prover, SessionNotWritten, default_dir, prepare_dir
from spectui.run.prove.regress import regress
from spectui.run.prove.render import render_text
from spectui.run.prove.shard import parse_shard
from spectui.run.prove.terms import SKIPPED_FLAG, add_terms
from spectui.store import notebook
from spectui.store import prompts as prompt_sets

if TYPE_CHECKING:
    from spectui.run.prove.prove import ProveOptions, Prover

EXIT_NOT_VERIFIED = 1
EXIT_NOT_WRITTEN = 5  # prove: a session or the certificate stopped being written (a full disk): no certificate


def register(sub) -> None:
    _add_prove(sub)

    p = sub.add_parser("verify", help=COMMANDS["verify"].help)
    p.add_argument("certificate", metavar="CERT", help="certificate.json (or its folder)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser(
        "regress",
        help=COMMANDS["regress"].help,
        description=f"{COMMANDS['regress'].help}: exit 0 nothing did, 4 something did, 2 the two are not comparable",
    )
    p.add_argument("old", metavar="OLD")
    p.add_argument("new", metavar="NEW")
    p.add_argument(
        "--no-verify", action="store_true", help="compare the certificates as they are, without verifying them first"
    )
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("merge", help=COMMANDS["merge"].help)
    p.add_argument("certificates", nargs="+", metavar="CERT")
    p.add_argument(
        "-o", "--output", required=True, metavar="FILE", help="the merged certificate (JSON; .md/.html beside it)"
    )
    p.add_argument("--json", action="store_true")


def _add_prove(sub) -> None:
    """prove's options, in the order its --help lists them: the servers, the passes, where the certificate
    goes, a launched pair, what else is measured, what is printed; then the run options compare has too."""
    p = sub.add_parser(
        "prove",
        help=COMMANDS["prove"].help,
        description="Greedy identity on every prompt, identity under sampling on a subset, the speed-up with its "
        "interval beside its acceptance, and what it was measured on: a certificate (JSON, Markdown, HTML) next "
        "to the raw sessions it was derived from. --temperature is the sampled pass's; the greedy pass is at 0.",
    )
    p.add_argument("--baseline", metavar="URL", help="the baseline server (or --profile to launch a pair)")
    p.add_argument("--candidate", metavar="URL", help="the candidate server (or --profile to launch a pair)")
    _add_passes(p)
    p.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        help="folder for the certificate and its sessions (default: the data folder's certificates/)",
    )
    p.add_argument(
        "--shard",
        metavar="I/N",
        help="run share I of N of the prompt set (1/N … N/N); merge the N with `spectui merge`",
    )
    _add_launch(p)
    _add_measured_beside(p)
    p.add_argument("--json", action="store_true", help="print the certificate JSON instead of the text")
    p.add_argument(
        "--notebook", metavar="PATH", help="the lab notebook for this certificate's entry (else the default)"
    )
    p.add_argument("--no-notebook", action="store_true", help="do not add an entry to the lab notebook")
    add_run_options(p)
    p.set_defaults(temperature=0.8)


def _add_passes(p) -> None:
    """The prompt set, and how many runs and seeds each pass (greedy, sampled) gives it."""
    p.add_argument("--prompts", default="default", metavar="SET|FILE", help="a bundled set by name, or a prompts file")
    p.add_argument(
        "--runs", type=int, default=2, metavar="N", help="interleaved runs per prompt (B C / C B; default 2)"
    )
    p.add_argument(
        "--sampled", type=int, default=2, metavar="K", help="prompts checked under sampling (default 2; 0: none)"
    )
    p.add_argument(
        "--samples", type=int, default=16, metavar="N", help="seeds per sampled prompt and side (default 16)"
    )
    p.add_argument("--sample-max-tokens", type=int, default=16, metavar="N", help="tokens per sample (default 16)")
    p.add_argument("--seed-base", type=int, default=1000, metavar="S", help="the sampled pass's seeds S, S+1, … (1000)")


def _add_launch(p) -> None:
    """A profile's pair started for the run (run.pair plans it): --profile, --comparison, --launch, --one-at-a-time."""
    p.add_argument(
        "--profile", metavar="NAME", help="launch the pair of a hardware profile (see spectui profiles list)"
    )
    p.add_argument("--comparison", metavar="ID", help="with --profile: which of its comparisons (default: its first)")
    p.add_argument(
        "--launch",
        metavar="COMPARISON",
        help="start the comparison's two servers from the profile (--profile, default cpu-demo) and stop them after",
    )
    p.add_argument(
        "--one-at-a-time",
        action="store_true",
        help="with --launch/--profile: each server started alone, measured one after the other (chosen by itself "
        "where the memory plan says the two do not fit on the GPU together); triage is skipped",
    )


def _add_measured_beside(p) -> None:
    """What the certificate holds beside the passes: each difference's cause, the files' hashes, the terms."""
    p.add_argument(
        "--triage",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="find each difference's cause (default: on)",
    )
    p.add_argument("--triage-limit", type=int, default=10, metavar="N", help="differing prompts to triage (default 10)")
    p.add_argument(
        "--no-hash", dest="hash_files", action="store_false", help="identify model files by size and mtime, not sha256"
    )
    p.add_argument(
        "--no-terms",
        dest="terms",
        action="store_false",
        help="do not measure the formula's terms (c, V(k), R(k)) on the servers after the run",
    )
    p.add_argument(
        "--formats-table",
        metavar="JSON",
        help="the table `spectui formats` kept: after the proof, plain decoding in each of its formats is run against "
        "the baseline and printed under the certificate beside the speculative configuration (the n-way table)",
    )


def exit_for(doc: dict) -> int:
    """0 identical, 3 different, 1 where some prompt was not compared (a side failed)."""
    return {"identical": EXIT_OK, "different": EXIT_DIFFERS}.get(doc["verdict"]["status"], EXIT_SERVER)


def _say(line: str) -> None:
    print(f"spectui: {line}", file=sys.stderr, flush=True)


def pair_from(args):
    """The two servers: the user's (--baseline/--candidate), or a profile's pair (--launch COMPARISON /
    --profile NAME [--comparison ID]: 127.0.0.1, free ports, through run.pair's memory plan)."""
    if args.profile is None and args.launch is None:
        return GivenPair(args.baseline, args.candidate)
    return LaunchedPair.plan_for(args.profile, args.launch or args.comparison, args.one_at_a_time, _say)


async def cmd_prove(args) -> int:
    _check_pair_source(args)
    table = _formats_table(args)  # a bad --formats-table is said before any server starts
    params = params_from(args)
    options = _prove_options(args)
    prompt_list, set_name = _prompt_set(args)
    out = prepare_dir(Path(args.output) if args.output else default_dir(options.shard))
    pair = pair_from(args)
    if pair.alone is not None and not args.json:
        _say(f"{pair.name}: one server at a time ({pair.alone})")
        if args.triage:
            _say("triage needs both servers up at once: skipped (the certificate says so)")
    async with _both_up(pair, args) as reach, stamped_client() as client:
        prover = await _prover(pair, reach, client, args, params, options, prompt_list, set_name, out)
        try:
            doc = await prover.run()
        except SessionNotWritten as exc:
            _not_written(prover, exc, params, args.json)
            return EXIT_NOT_WRITTEN
        doc = await _with_terms(doc, prover, client, args, measurable=pair.alone is None)
        three = await _three_way(doc, prover, prompt_list, params, args, out, pair.alone is None)
        n_way = await _nway(doc, prover, prompt_list, params, args, out, table, pair.alone is None)
    print(canonical(doc) if args.json else render_text(doc), end="")  # the text's first line is the verdict
    if three is not None and not args.json:
        print(three_way.table_text(three), end="")
    if n_way is not None and not args.json:
        print(n_way.text(), end="")
    cert = Path(doc["_path"])
    _say(f"wrote {cert} (+ {cert.with_suffix('.md').name}, {cert.with_suffix('.html').name}) beside its sessions")
    if prover.profile_path is not None:
        _say(f"wrote {prover.profile_path} (NVIDIA Model-Optimizer's speculation profile: acceptance per position)")
    if not args.no_notebook:
        _note(args.notebook, doc)
    return exit_for(doc)


def _check_pair_source(args) -> None:
    """Two URLs, or a profile's pair; one line for any other combination, before anything runs."""
    launching = args.profile is not None or args.launch is not None
    if not launching and (args.baseline is None or args.candidate is None):
        raise InputError(
            "prove needs --baseline URL and --candidate URL, or --launch COMPARISON (--profile NAME) to launch a pair"
        )
    if launching and (args.baseline or args.candidate):
        raise InputError("--launch/--profile start both servers: give them without --baseline/--candidate")
    if args.comparison and args.profile is None:
        raise InputError("--comparison picks one of a profile's pairs: give it with --profile NAME")
    if args.comparison and args.launch:
        raise InputError("--launch names the comparison already: give --launch or --comparison, not both")
    if args.one_at_a_time and not launching:
        raise InputError(
            "--one-at-a-time starts and stops the servers itself: give it with --launch COMPARISON",
            hint="servers already running cannot be stopped and started by spectui",
        )


def _prove_options(args) -> ProveOptions:
    options = ProveOptions(
        runs=args.runs,
        sampled=args.sampled,
        samples=args.samples,
        temperature=args.temperature,
        sample_max_tokens=args.sample_max_tokens,
        seed_base=args.seed_base,
        triage=args.triage,
        triage_limit=args.triage_limit,
        order=args.order,
        shard=parse_shard(args.shard),
        hash_files=args.hash_files,
    )
    options.check()
    return options


def _prompt_set(args) -> tuple[list, str]:
    """The prompts that run, and the set's name as the certificate states it (a subset says so)."""
    prompt_list = prompts_from(args)
    set_name = prompt_sets.load_set(args.prompts)[0]
    if args.limit or args.sample:
        set_name += f" ({len(prompt_list)} picked)"
    return prompt_list, set_name


@asynccontextmanager
async def _both_up(pair, args) -> AsyncIterator[PairOptions | None]:
    """How to reach both servers for the run: the user's as given; a launched pair started together through
    run.pair (stopped by their PIDs after the block); None one at a time (each side starts in its block)."""
    if pair.alone is not None:
        yield None
        return
    if isinstance(pair, GivenPair):
        yield PairOptions.from_args(args)
        return
    base, cand = pair.servers["baseline"], pair.servers["candidate"]
    _say(f"starting {pair.name} on {base.url} and {cand.url}")
    async with pair.up() as (b, c):
        yield PairOptions(b, c, "auto", base.backend, cand.backend, args.api_key_env, args.ready_timeout, args.json)


async def _prover(pair, reach, client, args, params, options, prompt_list, set_name, out) -> Prover:
    """The prover on the pair: both servers connected, or each side opened alone for its block."""
    backends: dict = {"baseline": None, "candidate": None}
    one = None
    if reach is None:
        key = api_key_from(args.api_key_env)
        assert pair.alone is not None  # no reach: the pair runs one at a time
        one = pair.alone.opening(
            lambda side: pair.side(side, client, key, args.ready_timeout), None if args.json else _say
        )
    else:
        backends, _ = await connect_pair(client, reach)
    return Prover(
        backends["baseline"],
        backends["candidate"],
        params,
        prompt_list,
        set_name,
        out,
        options,
        emit=_progress(args.json),
        machine=machine_sampler(),
        client=client,
        launched={s: LaunchSpec.from_argv(srv.argv) for s, srv in pair.servers.items()},
        one_at_a_time=one,
    )


async def _with_terms(doc: dict, prover: Prover, client, args, measurable: bool) -> dict:
    """The formula's terms measured on both servers after the run (never one at a time: both must be up)."""
    if args.terms and not args.json and measurable:
        _say("measuring the formula's terms on the servers (--no-terms skips it) …")
    return await add_terms(
        doc,
        client,
        prover.baseline,
        prover.candidate,
        skip=None if args.terms else SKIPPED_FLAG,
        say=None if args.json else _say,
    )


async def _three_way(doc: dict, prover, prompt_list, params, args, out, both_up: bool):
    """Beside a speculative result on spectui's F32 copy, the plain quantised rate (run.three_way); None where
    it does not apply or only one server could be up at a time."""
    if not both_up or prover.baseline is None:
        return None

    try:
        return await three_way.beside(
            doc, prover.baseline, prompt_list, params, args.runs, out, None if args.json else _say
        )
    except Exception as exc:  # a measurement beside a certificate already written: it never hides the verdict
        _say(f"the three-way table was not measured: {describe(exc)} (the certificate stands)")
        return None


def _formats_table(args):
    """--formats-table's kept table (run.formats.read: one line where it is not one), None without it."""
    if not args.formats_table:
        return None
    return formats.read(Path(args.formats_table))


async def _nway(doc: dict, prover, prompt_list, params, args, out, table, both_up: bool):
    """With --formats-table: plain decoding in each format the formats lesson measured, beside the certificate
    (run.nway); None without it. A format that fails is said; the certificate stands."""
    if table is None:
        return None
    if not both_up or prover.baseline is None:
        _say("the n-way table needs the baseline up beside each plain format: not measured one server at a time")
        return None
    try:
        return await nway.beside(doc, prover.baseline, prompt_list, params, args.runs, table, out, _say)
    except Exception as exc:  # a measurement beside a certificate already written: it never hides the verdict
        _say(f"the n-way table was not measured: {describe(exc)} (the certificate stands)")
        return None


def _not_written(prover, exc, params, as_json: bool) -> None:
    """The text report of every prompt run that finished (the run is not lost with the file), then one
    line: which file stopped being written, and that no certificate was made over it."""
    if exc.results and not as_json:
        infos = {side: prover._info(side) for side in SIDES}
        print(text_report(infos, exc.results, params, prover.options.order), end="")
    _say(f"error: {exc.one_line()}")


def _note(path: str | None, doc: dict) -> None:
    try:
        where, warning = notebook.append(notebook.notebook_path(path), [notebook.certificate_entry(doc)])
    except (InputError, OSError) as exc:
        _say(f"error: the notebook entry was not written: {exc}; the certificate is complete")
        return
    _say(f"warning: {warning}" if warning else f"appended the certificate to {where}")


def cmd_verify(args) -> int:
    v = verify(args.certificate)
    if args.json:
        print(json.dumps({"ok": v.ok, "problems": v.problems, "checked": v.checked}, indent=2))
    else:
        print(
            ("VERIFIED: " if v.ok else "NOT VERIFIED: ")
            + (f"{len(v.checked)} checks agree" if v.ok else f"{len(v.problems)} problem(s)")
        )
        for line in v.problems:
            print(f"  ✗ {line}")
        for line in v.checked:
            print(f"  ✓ {line}")
    return EXIT_OK if v.ok else EXIT_NOT_VERIFIED


def cmd_regress(args) -> int:
    r = regress(args.old, args.new, check=not args.no_verify)
    print(json.dumps(r.to_json(), indent=2) if args.json else r.text())
    return r.code


def cmd_merge(args) -> int:
    out = check_output(args.output, "-o")
    if out is None:
        raise InputError("spectui merge needs -o FILE: where the merged certificate goes")
    doc = merge(args.certificates, out)
    write(doc, out)
    print(canonical(doc) if args.json else render_text(doc), end="")
    _say(f"wrote {out} (+ {out.with_suffix('.md').name}, {out.with_suffix('.html').name})")
    return exit_for(doc)


def _progress(quiet: bool):
    """prove's lines: its phases and pairs, and a step that stopped (not each prompt's start: the pairs say it)."""
    return run_events(quiet, (ev.PhaseStarted, ev.Progressed, ev.StepStopped))
