"""`spectui compare`: the same prompts to both servers, headless (saved sessions are read by cli.sessions)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from spectui.cli import options
from spectui.cli.common import (  # noqa: F401
    EXIT_DIFFERS,
    EXIT_OK,
    EXIT_SERVER,
    EXIT_USAGE,
    append_to_notebook,
    check_pair_source,
    connect_pair,
    params_from,
    prompts_from,
)
from spectui.core.errors import InputError
from spectui.core.types import ServerInfo


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


def progress(quiet: bool):
    """The run session's events as progress lines on stderr (none with --json)."""
    from spectui.run import events as ev

    def emit(e) -> None:
        if isinstance(e, ev.StepStopped):  # said even with --json: the report lacks what it would have held
            _say(f"{e.result.prompt.id}: {e.step} stopped: {e.message}")
            return
        if quiet:
            return
        if isinstance(e, ev.PromptStarted):
            _say(f"{e.prompt.id} …")
        elif isinstance(e, ev.TriageStarted):
            _say(f"{e.result.prompt.id} differs: triage (reruns, cache, log-probabilities) …")
        elif isinstance(e, ev.ProbeStarted):
            _say(f"{e.result.prompt.id}: {e.what}")

    return emit


def machine_sampler():
    """The GPUs and the host, sampled around each prompt for the session file."""
    from spectui.machine.probes import GPUProbe, host_sample

    gpu = GPUProbe()
    return lambda: (gpu.sample(), host_sample())


def exit_for(results) -> int:
    """1 when a side failed or a prompt is incomplete (no verdict), 3 when outputs differ, else 0."""
    if any(r.failed or r.incomplete for r in results):
        return EXIT_SERVER
    return EXIT_OK if all(r.identical for r in results) else EXIT_DIFFERS


def launch_plan(args):
    """--launch: the profile's comparison, its two servers (127.0.0.1, free ports) and whether they run one
    at a time (asked for, or the memory plan says they do not fit together)."""
    from spectui.labs.memory.plan import plan_pair
    from spectui.store.profiles import load_profiles, servers_for

    profiles, _ = load_profiles()
    name = args.profile or "cpu-demo"
    if name not in profiles:
        raise InputError(f"no profile named {name!r}", hint="spectui profiles list")
    profile = profiles[name]
    comparison = profile.comparison(args.launch)
    plan = plan_pair(profile, comparison)
    if plan.decision == "too-big":
        raise InputError(f"{name}/{args.launch}: {plan.reason}", hint="spectui profiles check " + name)
    if plan.decision == "unknown" and not args.json:  # launched as the profile says, engines' own defaults
        _say(f"{name}/{args.launch}: no memory plan ({plan.reason})")
    alone = args.one_at_a_time or plan.one_at_a_time
    base, cand = servers_for(profile, comparison, shares=plan.shares or None)
    return comparison, {"baseline": base, "candidate": cand}, alone, plan


async def _open_launched(server, client, args):
    """Start one launched server, connect to it, and stop it (by its PID) when the block ends."""
    from contextlib import asynccontextmanager

    from spectui.backends.detect import api_key_from, resolve
    from spectui.core.runner import connect
    from spectui.machine.launcher import Launcher

    @asynccontextmanager
    async def opened():
        launcher = Launcher()
        launcher.add(server)
        try:
            await asyncio.to_thread(launcher.start_all)
            backend, _ = await resolve(server.backend or "auto", server.url, client, api_key_from(args.api_key_env))
            await connect(backend, args.ready_timeout)
            yield backend
        finally:
            await asyncio.to_thread(launcher.stop_all)

    return opened()


async def cmd_compare(args) -> int:
    from spectui.backends.transport import stamped_client
    from spectui.core.report import json_report, text_report
    from spectui.run.session import RunOptions, RunSession

    params = params_from(args)
    prompt_list = prompts_from(args)
    check_pair_source(args, "compare")
    # every input and output checked before any server is asked (issue 26, items 3 and 9)
    from spectui.cli.outputs import check_gguf, check_notebook, check_output

    if args.probe_drafts and args.draft_model:
        check_gguf(args.draft_model, "--draft-model")
    check_output(args.save, "--save")
    check_notebook(args)
    options = RunOptions(
        order=args.order,
        repeat=args.repeat,
        triage=args.triage,
        triage_limit=args.triage_limit,
        near_tie=args.near_tie,
        probe_drafts=args.probe_drafts,
        draft_model=Path(args.draft_model).expanduser() if args.draft_model else None,
        ngram_sizes=ngram_sizes(args.ngram_size),  # a bad value is a usage error before any server is asked
    )
    launched = launch_plan(args) if args.launch is not None else None
    writer = None
    if args.save:
        from spectui.store.session_writer import SessionWriter

        writer = SessionWriter(args.save)  # refuses a file that is not a session before any server is asked
    try:
        async with stamped_client() as client:
            if launched is not None and launched[2]:
                results, infos, order = await _one_at_a_time(launched, client, args, params, prompt_list, writer)
            else:
                async with _launched_pair(launched, args) as urls:
                    if urls:
                        args.baseline, args.candidate = urls
                    backends, infos = await connect_pair(client, args)
                    run = RunSession(
                        backends["baseline"],
                        backends["candidate"],
                        params,
                        options,
                        writer=writer,
                        emit=progress(args.json),
                        machine=machine_sampler() if writer is not None else None,
                        client=client,
                    )
                    results = await run.run(prompt_list)
                    order = args.order
    finally:
        if writer:
            writer.close()
    # the report first: a notebook that cannot be written afterwards never costs the printed run
    if args.json:
        print(json.dumps(json_report(infos, results, params, order), indent=2))
    else:
        print(text_report(infos, results, params, order))
    for r in results:
        for rec in (r.baseline, r.candidate):
            if rec.failed is not None:
                print(f"spectui: error: {rec.name} failed on {r.prompt.id}: {rec.failed.message}", file=sys.stderr)
    from spectui.cli.outputs import session_failed

    unwritten = session_failed(writer)
    if args.notebook is not None:
        from spectui.store import notebook

        # one row per prompt (repeats are one row with their spread), so count the rows, not the runs
        unwritten |= not append_to_notebook(args, notebook.measurements(results, infos, args.profile))
    code = exit_for(results)
    return EXIT_SERVER if unwritten and code == EXIT_OK else code  # a file not written is not a clean run


def _launched_pair(launched, args):
    """Both launched servers up for the block (None: the servers are the user's, given by URL)."""
    from contextlib import asynccontextmanager

    from spectui.machine.launcher import Launcher

    @asynccontextmanager
    async def up():
        if launched is None:
            yield None
            return
        comparison, servers, _, _ = launched
        launcher = Launcher()
        for s in servers.values():
            launcher.add(s)
        if not args.json:
            _say(f"starting [{comparison.title}] on {servers['baseline'].url} and {servers['candidate'].url}")
        try:
            await asyncio.to_thread(launcher.start_all)
            yield servers["baseline"].url, servers["candidate"].url
        finally:
            await asyncio.to_thread(launcher.stop_all)

    return up()


async def _one_at_a_time(launched, client, args, params, prompt_list, writer):
    """--one-at-a-time: the baseline alone, then the candidate alone (core.verdict judges the pairs)."""
    from spectui.run.phased import ORDER, PhasedRun

    comparison, servers, _, plan = launched
    if not args.json:
        why = "asked for" if args.one_at_a_time else f"the memory plan: {plan.reason}"
        _say(f"[{comparison.title}] one server at a time ({why})")
        if args.triage or args.probe_drafts:
            _say("triage and the draft probe need both servers up at once: not run one at a time")

    def open_side(side: str):
        return _Opener(servers[side], client, args)

    run = PhasedRun(
        open_side, params, args.repeat, writer=writer, emit=progress(args.json), say=None if args.json else _say
    )
    results = await run.run(prompt_list)
    infos = {s: run.infos.get(s) or ServerInfo(servers[s].url) for s in ("baseline", "candidate")}
    return results, infos, ORDER


class _Opener:
    """An async context: one launched server up (started, connected) for the block, stopped after."""

    def __init__(self, server, client, args) -> None:
        self.server, self.client, self.args = server, client, args
        self._cm = None

    async def __aenter__(self):
        self._cm = await _open_launched(self.server, self.client, self.args)
        return await self._cm.__aenter__()

    async def __aexit__(self, *exc):
        return await self._cm.__aexit__(*exc)


def register(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="stream the same prompts to both servers and compare, headless",
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
        default=0.05,
        metavar="NATS",
        help="a margin under this between the two chosen tokens is a near-tie (default 0.05)",
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
        help="with --probe-drafts on a draft-model candidate: its draft GGUF (default: spectui's bundled draft)",
    )
    g.add_argument(
        "--ngram-size",
        metavar="N,M",
        help="with --probe-drafts on an ngram-simple candidate: its --spec-ngram-simple-size-n,-m (default 12,48)",
    )
    options.add_run_options(p)
