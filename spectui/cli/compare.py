"""`spectui compare`: the same prompts to both servers, headless (saved sessions are read by cli.sessions)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from spectui.backends.detect import api_key_from
from spectui.backends.transport import stamped_client
from spectui.cli import options
from spectui.cli.commands import COMMANDS
from spectui.cli.common import (  # noqa: F401
    EXIT_DIFFERS,
    EXIT_OK,
    EXIT_SERVER,
    EXIT_USAGE,
    PairOptions,
    append_to_notebook,
    check_pair_source,
    connect_pair,
    params_from,
    prompts_from,
)
from spectui.cli.outputs import check_gguf, check_notebook, check_output, session_failed
from spectui.cli.progress import run_events
from spectui.core.errors import InputError
from spectui.core.findings import NEAR_TIE_NATS
from spectui.core.report import json_report, text_report
from spectui.core.types import SIDES
from spectui.machine.probes import GPUProbe, host_sample
from spectui.run.pair import GivenPair, LaunchedPair, infos_of
from spectui.run.session import RunOptions
from spectui.store import notebook
from spectui.store.session_writer import SessionWriter


def _say(line: str) -> None:
    print(f"spectui: {line}", file=sys.stderr)


def ngram_sizes(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        n, m = (int(x) for x in text.split(","))
    except ValueError:
        raise InputError(f"--ngram-size takes N,M (two whole numbers), not {text!r}") from None
    if n < 1 or m < 1:
        raise InputError(f"--ngram-size N,M must be positive, not {text!r}")
    return n, m


def machine_sampler():
    """The GPUs and the host, sampled around each prompt for the session file."""
    gpu = GPUProbe()
    return lambda: (gpu.sample(), host_sample())


def exit_for(results) -> int:
    """1 when a side failed or a prompt is incomplete (no verdict), 3 when outputs differ, else 0."""
    if any(r.failed or r.incomplete for r in results):
        return EXIT_SERVER
    return EXIT_OK if all(r.identical for r in results) else EXIT_DIFFERS


def pair_from(args):
    """The two servers: the user's (--baseline/--candidate) or a profile's pair (--launch, run.pair's plan)."""
    if args.launch is None:
        return GivenPair(args.baseline, args.candidate)
    say = None if args.json else _say
    return LaunchedPair.plan_for(args.profile, args.launch, args.one_at_a_time, say)


def _with_urls(args, baseline: str, candidate: str):
    """The command's pair options with the URLs the servers came up on."""

    return dataclasses.replace(PairOptions.from_args(args), baseline=baseline, candidate=candidate)


async def cmd_compare(args) -> int:
    params = params_from(args)
    prompt_list = prompts_from(args)
    check_pair_source(args, "compare")
    options = _run_options(args)  # every input and output checked before any server is asked
    pair = pair_from(args)
    writer = None
    if args.save:
        writer = SessionWriter(args.save)  # refuses a file that is not a session before any server is asked
    if pair.alone is not None and not args.json:
        _say(f"[{pair.title}] one server at a time ({'asked for' if args.one_at_a_time else pair.alone})")
        if args.triage or args.probe_drafts:
            _say("triage and the draft probe need both servers up at once: not run one at a time")
    try:
        results, infos, order = await _run(pair, args, params, options, prompt_list, writer)
    finally:
        if writer:
            writer.close()
    # the report first: a notebook that cannot be written afterwards never costs the printed run
    _print_report(results, infos, params, order, args.json)
    unwritten = session_failed(writer)
    if args.notebook is not None:
        # one row per prompt (repeats are one row with their spread), so count the rows, not the runs
        unwritten |= not append_to_notebook(args, notebook.measurements(results, infos, args.profile))
    code = exit_for(results)
    return EXIT_SERVER if unwritten and code == EXIT_OK else code  # a file not written is not a clean run


def _run_options(args):
    """The run session's options; the draft probe's GGUF, --save and --notebook checked first,
    before any server is asked."""
    if args.probe_drafts and args.draft_model:
        check_gguf(args.draft_model, "--draft-model")
    check_output(args.save, "--save")
    check_notebook(args)
    return RunOptions(
        order=args.order,
        repeat=args.repeat,
        triage=args.triage,
        triage_limit=args.triage_limit,
        near_tie=args.near_tie,
        probe_drafts=args.probe_drafts,
        draft_model=Path(args.draft_model).expanduser() if args.draft_model else None,
        ngram_sizes=ngram_sizes(args.ngram_size),  # a bad value is a usage error before any server is asked
    )


async def _run(pair, args, params, options, prompt_list, writer):
    """The prompts on the pair (run.pair picks the session: both up, or one at a time); the results, both
    servers' identities and the order the report states."""
    async with stamped_client() as client:
        session = pair.session(
            params,
            options,
            client=client,
            api_key=api_key_from(args.api_key_env),
            ready_timeout=args.ready_timeout,
            connect=lambda b, c: connect_pair(client, _with_urls(args, b, c)),
            say=None if args.json else _say,
            writer=writer,
            emit=run_events(args.json),
            machine=machine_sampler() if writer is not None else None,
        )
        async with session as run:
            results = await run.run(prompt_list)
        return results, infos_of(run, dict(zip(SIDES, pair.urls()))), run.order


def _print_report(results, infos, params, order, as_json: bool) -> None:
    """The report (text or JSON) on stdout, then each failed side's reason on stderr."""
    if as_json:
        print(json.dumps(json_report(infos, results, params, order), indent=2))
    else:
        print(text_report(infos, results, params, order))
    for r in results:
        for rec in (r.baseline, r.candidate):
            if rec.failed is not None:
                print(f"spectui: error: {rec.name} failed on {r.prompt.id}: {rec.failed.message}", file=sys.stderr)


def register(sub) -> None:
    p = sub.add_parser(
        "compare",
        help=COMMANDS["compare"].help,
        description="The same prompts to the baseline and the candidate: are the bytes the same, and how much "
        "faster is the candidate? Exit 0 identical, 3 different, 1 a side failed, 2 usage.",
    )
    options.add_pair(p)
    options.add_prompt_choice(p)
    options.add_json(p)
    p.add_argument("--save", metavar="PATH", help="save the session (every event, replayable) to PATH")
    options.add_notebook(p)
    options.add_repeat(p)
    g = p.add_argument_group("when outputs differ")
    g.add_argument(
        "--triage",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="when outputs differ, rerun and ask for log-probabilities to say why (default: off)",
    )
    g.add_argument("--triage-limit", type=int, default=1, metavar="N", help="divergent prompts to triage (default 1)")
    g.add_argument(
        "--near-tie",
        type=options.positive,
        default=NEAR_TIE_NATS,
        metavar="NATS",
        help="a margin under this between the two chosen tokens is a near-tie (default %(default)s)",
    )
    g = p.add_argument_group("the draft probe")
    g.add_argument(
        "--probe-drafts",
        action="store_true",
        help="after the run, rebuild what the candidate's drafter proposed at each step and show the rejected text",
    )
    g.add_argument(
        "--draft-model",
        metavar="GGUF",
        help="with --probe-drafts on a draft-model candidate: its draft GGUF (default: the one on its command line)",
    )
    g.add_argument(
        "--ngram-size",
        metavar="N,M",
        help="with --probe-drafts on an ngram-simple candidate: its --spec-ngram-simple-size-n,-m (default 12,48)",
    )
    options.add_run_options(p)
