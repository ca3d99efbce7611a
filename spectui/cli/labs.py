"""The labs from the command line: sweep, prefix, cache, kv, theory."""

from __future__ import annotations

import json
import sys

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
from spectui.core.errors import InputError  # noqa: F401


async def cmd_sweep(args) -> int:
    from spectui.labs.sweep.levels import parse_levels, svg_chart, text_table

    levels = parse_levels(args.concurrency)
    check_pair_source(args, "sweep")
    params = params_from(args)
    prompt_list = prompts_from(args)
    from spectui.cli.outputs import check_notebook, check_output, write_failed

    check_output(args.save, "--save")  # every output checked before the run (issue 26, item 3)
    check_output(args.svg, "--svg")
    check_notebook(args)
    from spectui.backends.transport import stamped_client
    from spectui.cli.compare import _launched_pair, launch_plan

    launched = launch_plan(args) if args.launch is not None else None
    async with stamped_client(max(levels) * 2 + 4) as client:
        if launched is not None and launched[2]:
            result, infos = await _sweep_alone(launched, client, args, prompt_list, levels, params)
        else:
            async with _launched_pair(launched, args) as urls:
                if urls:
                    args.baseline, args.candidate = urls
                result, infos = await _sweep_together(client, args, prompt_list, levels, params)
    doc = {
        "baseline": infos["baseline"].to_json(),
        "candidate": infos["candidate"].to_json(),
        "params": {"max_tokens": params.max_tokens, "temperature": params.temperature, "seed": params.seed},
        "levels": [lv.to_json() for lv in result],
    }
    if launched is not None and launched[2]:  # measured one after the other: never both servers up
        doc["params"]["order"] = "one-at-a-time"
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(f"baseline  {infos['baseline'].url} ({infos['baseline'].build}) [{infos['baseline'].describe_speedup()}]")
        print(
            f"candidate {infos['candidate'].url} ({infos['candidate'].build}) [{infos['candidate'].describe_speedup()}]"
        )
        if doc["params"].get("order") == "one-at-a-time":
            print("one server at a time: each side measured alone, one after the other; speed-ups paired per level")
        print(text_table(result))
    from pathlib import Path

    from spectui.store.locations import atomic_write

    unwritten = False  # the report is printed first: a file that cannot be written never costs it
    kept = "the report above is complete"
    if args.save:
        try:
            atomic_write(Path(args.save).expanduser(), json.dumps(doc, indent=2) + "\n")
        except OSError as exc:
            write_failed(f"--save {args.save}", exc, kept)
            unwritten = True
    if args.svg:
        try:
            atomic_write(
                Path(args.svg).expanduser(), svg_chart(result, f"{infos['candidate'].describe_speedup()} vs baseline")
            )
        except OSError as exc:
            write_failed(f"--svg {args.svg}", exc, kept)
            unwritten = True
    if args.notebook is not None:
        import datetime as dt

        rows = []
        for lv in result:
            m = {
                "date": dt.datetime.now(dt.UTC).replace(microsecond=0),
                "kind": "sweep",
                "concurrency": lv.concurrency,
                "baseline_build": infos["baseline"].build,
                "candidate_build": infos["candidate"].build,
                "candidate_config": infos["candidate"].describe_speedup(),
                "baseline_tokens_per_s": lv.throughput("baseline"),
                "candidate_tokens_per_s": lv.throughput("candidate"),
                "acceptance_rate": lv.candidate.acceptance_rate if not lv.candidate.failed else None,
                "speedup": lv.speedup,
                "outputs": lv.outputs_text(),
                "speedup_low": lv.spread.low if lv.spread else None,
                "speedup_high": lv.spread.high if lv.spread else None,
                "runs": max(1, len(lv.runs)),
                "identical": lv.identical,
            }
            rows.append({k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items() if v is not None})
        unwritten |= not append_to_notebook(args, rows)
    if any(lv.identical is None for lv in result) or unwritten:
        return EXIT_SERVER
    return EXIT_OK if all(lv.identical for lv in result) else EXIT_DIFFERS


async def _sweep_together(client, args, prompt_list, levels, params) -> tuple[list, dict]:
    """Both servers up: each level's requests to the baseline, then the same to the candidate."""
    from spectui.cli.progress import Advance
    from spectui.labs.sweep.levels import sweep

    backends, infos = await connect_pair(client, args)
    for name, info in infos.items():
        if info.slots is not None and info.slots < max(levels):
            print(
                f"spectui: warning: {name} has {info.slots} slot(s); requests beyond that queue "
                f"(start it with -np {max(levels)})",
                file=sys.stderr,
            )
    bar = Advance("spectui sweep")
    finished: list[int] = []

    def progress(level):
        finished.append(level.concurrency)
        if not args.json:  # levels done over all levels: the big ones take longest, so it is coarse
            bar(
                f"levels {','.join(map(str, levels))}",
                len(finished) / len(levels),
                f"concurrency {level.concurrency} done",
            )

    try:
        result = await sweep(
            backends["baseline"], backends["candidate"], prompt_list, levels, params, progress, args.repeat
        )
    finally:
        bar.close()
    return result, infos


async def _sweep_alone(launched, client, args, prompt_list, levels, params) -> tuple[list, dict]:
    """--one-at-a-time: the baseline alone at every level, then the candidate alone (labs.sweep.levels.sweep_alone)."""
    from spectui.cli.compare import _Opener
    from spectui.core.types import ServerInfo
    from spectui.labs.sweep.levels import sweep_alone

    comparison, servers, _, plan = launched
    say = (lambda line: print(f"spectui: {line}", file=sys.stderr)) if not args.json else None
    if say is not None:
        why = "asked for" if args.one_at_a_time else f"the memory plan: {plan.reason}"
        say(f"[{comparison.title}] one server at a time ({why}); the batch-time prediction needs both up: not made")
    result, infos = await sweep_alone(
        lambda side: _Opener(servers[side], client, args), prompt_list, levels, params, args.repeat, say
    )
    return result, {s: infos.get(s) or ServerInfo(servers[s].url) for s in ("baseline", "candidate")}


async def cmd_prefix(args) -> int:
    from spectui.backends.transport import stamped_client
    from spectui.labs.prefix import FOLLOW_UPS, prefix_table, run_prefix

    if args.turns < 1:
        raise InputError("--turns must be at least 1")
    turns = [args.prompt] * args.turns if args.prompt else [FOLLOW_UPS[i % len(FOLLOW_UPS)] for i in range(args.turns)]
    params = params_from(args)
    async with stamped_client() as client:
        backends, infos = await connect_pair(client, args)
        result, cleared = await run_prefix(backends["baseline"], backends["candidate"], turns, params)
        restore = None
        if args.restore_check:
            from spectui.labs.prefix import restore_experiment

            restore = await restore_experiment(backends["candidate"], [{"role": "user", "content": turns[0]}], params)
    if args.json:
        print(
            json.dumps(
                {
                    "baseline": infos["baseline"].to_json(),
                    "candidate": infos["candidate"].to_json(),
                    "cleared": cleared,
                    "turns": [t.to_json() for t in result],
                    "identical": all(t.verdict.identical for t in result),
                    "restore_check": restore,
                },
                indent=2,
            )
        )
    else:
        for name in ("baseline", "candidate"):
            print(f"{name:<9} {infos[name].url} ({infos[name].build}); before the run: {cleared[name]}")
        print(prefix_table(result))
        if restore:
            r = restore
            print(
                f"\nsaved conversation cache: {r['tokens_saved']} tokens, {(r['file_bytes'] or 0) / 1e6:.1f} MB, "
                f"saved in {r['save_ms']:.1f} ms, restored in {r['restore_ms']:.1f} ms"
            )
            print(
                f"next turn recomputed: TTFT {r['recomputed']['ttft_ms']:.0f} ms, "
                f"{r['recomputed']['prompt_tokens_processed']} prompt tokens processed"
            )
            print(
                f"next turn restored:   TTFT {r['restored']['ttft_ms']:.0f} ms, "
                f"{r['restored']['prompt_tokens_processed']} processed, {r['restored']['prompt_tokens_reused']} reused; "
                f"output {'identical' if r['identical'] else 'DIFFERENT'} to the recomputed one"
            )
    if any(t.baseline.failed or t.candidate.failed for t in result):
        return EXIT_SERVER
    if any(t.verdict.identical is None for t in result):
        return EXIT_SERVER
    return EXIT_OK if all(t.verdict.identical for t in result) else EXIT_DIFFERS


async def cmd_cache(args) -> int:
    import time

    import httpx

    from spectui.backends.llamacpp import LlamaCppBackend

    if args.action in ("save", "restore") and not args.file:
        raise InputError(f"spectui cache {args.action} needs --file NAME")
    if args.file and ("/" in args.file or args.file.startswith(".")):
        raise InputError("--file is a plain file name inside the server's --slot-save-path folder")
    async with httpx.AsyncClient() as client:
        t0 = time.perf_counter()
        done = await LlamaCppBackend(args.url, client).slot_action(args.action, args.slot, args.file)
        wall = (time.perf_counter() - t0) * 1000

    def count(n: int | None) -> str:
        return "?" if n is None else str(n)

    size = f"{done.file_bytes / 1e6:.1f} MB" if done.file_bytes is not None else "? MB"
    ms = done.ms if done.ms is not None else wall
    if args.action == "save":
        print(f"saved slot {args.slot}: {count(done.tokens)} tokens, {size} to {done.filename} in {ms:.1f} ms")
    elif args.action == "restore":
        print(f"restored slot {args.slot}: {count(done.tokens)} tokens, {size} from {done.filename} in {ms:.1f} ms")
    else:
        print(f"erased slot {args.slot}: {count(done.tokens)} tokens")
    return EXIT_OK


def cmd_kv(args) -> int:
    from spectui.labs.memory.kv import kv_text
    from spectui.machine import assets

    model = args.model or assets.find_model()
    if model is None:
        raise InputError("no model to size", hint="give --model PATH.gguf or run `spectui setup`")
    if args.ctx < 1:
        raise InputError("--ctx must be at least 1")
    print(kv_text(model, args.ctx))
    return EXIT_OK


def cmd_theory(args):
    from spectui.labs.theory import formula as theory

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
    from pathlib import Path

    from spectui.backends.transport import stamped_client
    from spectui.cli.common import PairOptions
    from spectui.core.runner import grouped
    from spectui.labs.theory.costs import check_prompt
    from spectui.store.session import load_session, results_for

    if args.repeats < 1:
        raise InputError(f"--repeats must be at least 1, not {args.repeats}")
    if getattr(args, "save", False) and args.no_measure:
        raise InputError("--save keeps measured terms: --no-measure measures none", hint="leave out one of them")
    if args.html and (Path(args.html).expanduser().is_dir() or not Path(args.html).expanduser().parent.is_dir()):
        raise InputError(f"--html {args.html}: not a file in an existing folder", hint="give --html a file name")
    session = load_session(args.from_session)
    groups = [g for g in grouped(results_for(session)) if any(r.speedup for r in g.runs)]
    if not groups:
        raise InputError(f"{session.path}: no prompt finished on both sides, nothing to check the formula against")
    for w in session.warnings:
        print(f"spectui: warning: {w}", file=sys.stderr)

    def say(line: str) -> None:
        if not args.json:
            print(f"spectui: {line}", file=sys.stderr)

    infos = session.infos
    checks, curves = {}, {}
    from spectui.backends.launchspec import LaunchSpec
    from spectui.labs.sampling.exact import launch_argv

    # each server's own command line where it runs here: the draft is timed at the candidate's threads and
    # offload, every position's outputs at the baseline's
    launched = {side: LaunchSpec.from_argv(launch_argv(infos[side].url)) for side in ("baseline", "candidate")}
    async with stamped_client() as client:
        backends = None
        if not args.no_measure:
            opts = PairOptions(
                infos["baseline"].url,
                infos["candidate"].url,
                baseline_backend=infos["baseline"].backend,
                candidate_backend=infos["candidate"].backend,
                quiet=args.json,
            )
            backends, live = await connect_pair(client, opts)
            for side in ("baseline", "candidate"):
                was, now = infos[side], live[side]
                if (was.model, was.build) != (now.model, now.build):
                    raise InputError(
                        f"the {side} at {was.url} now serves {now.model} ({now.build}); the session's run used "
                        f"{was.model} ({was.build})",
                        hint="start the session's servers again, or use --no-measure",
                    )
        for g in groups:
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
    doc = {
        "session": str(session.path),
        "baseline": infos["baseline"].to_json(),
        "candidate": infos["candidate"].to_json(),
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
    if getattr(args, "save", False):
        from spectui.labs.theory import record as terms_record

        rec = terms_record.record(
            [terms_record.entry(pid, chk, curves[pid]) for pid, chk in checks.items()], args.repeats, args.draft_model
        )
        try:
            where = terms_record.save(session.path, rec)
        except OSError as exc:
            raise InputError(f"the terms were not saved beside {session.path}: {exc.strerror or exc}") from None
        print(f"spectui: saved the measured terms to {where} (spectui report shows them)", file=sys.stderr)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        from spectui.labs.theory.costs import curve_text

        for pid, chk in checks.items():
            print(f"== {pid}")
            if chk is None:
                print("the candidate drafted nothing in this prompt's runs: no speculation to check")
                continue
            if curves[pid] is not None:
                print(curve_text(curves[pid]))
            print(chk.text())
            print()
    if args.html:
        from spectui.core.types import GenerationParams
        from spectui.labs.html_report import html_report
        from spectui.store.locations import atomic_write

        results = [r for g in groups for r in g.runs]
        sp = session.prompts[0] if session.prompts else None
        params, order = (sp.params, sp.order) if sp else (GenerationParams(), "sequential")
        text = html_report(infos, results, params, order, str(session.path), checks=checks)
        try:
            atomic_write(Path(args.html).expanduser(), text)
        except OSError as exc:
            print(
                f"spectui: error: --html {args.html} not written ({exc.strerror}); the report above is complete",
                file=sys.stderr,
            )
            return EXIT_SERVER
    return EXIT_OK


EXIT_UNDECIDED = 4  # spectui sampling: not enough samples to decide (never a pass)


async def cmd_sampling(args) -> int:
    from spectui.backends.transport import stamped_client
    from spectui.labs.sampling.exact import sampling

    if args.temperature == 0:
        raise InputError(
            "--temperature 0 is greedy decoding: `spectui compare` checks it byte for byte",
            hint="give a temperature above 0, e.g. --temperature 0.8",
        )
    if args.samples < 2:
        raise InputError(f"--samples must be at least 2, not {args.samples}")
    if args.max_tokens < 1:
        raise InputError(f"--max-tokens must be at least 1, not {args.max_tokens}")
    if args.top_p is not None and not 0 < args.top_p <= 1:
        raise InputError(f"--top-p must be in (0, 1], not {args.top_p}")
    import dataclasses

    params = dataclasses.replace(params_from(args), top_p=args.top_p)
    prompt_list = prompts_from(args)
    from spectui.cli.outputs import check_notebook, check_output, session_failed

    check_output(args.save, "--save")  # every output checked before the run (issue 26, item 3)
    check_notebook(args)
    writer = None
    if args.save:
        from spectui.store.session_writer import SessionWriter

        writer = SessionWriter(args.save)

    from spectui.cli.progress import Advance

    bar = Advance("spectui sampling")

    def progress(prompt, done, total):
        if not args.json:  # a bar with an ETA on a terminal, a line per tenth in a log
            bar(f"{prompt.id}: both sides, {total} seeds", done / total, f"sample {done}/{total}")

    try:
        async with stamped_client() as client:
            backends, infos = await connect_pair(client, args)
            if writer:
                writer.servers(infos)
            results = await sampling(
                backends["baseline"],
                backends["candidate"],
                prompt_list,
                params,
                args.samples,
                args.seed_base,
                args.distribution,
                writer,
                progress,
            )
    finally:
        bar.close()
        if writer:
            writer.close()
    doc = {
        "baseline": infos["baseline"].to_json(),
        "candidate": infos["candidate"].to_json(),
        "params": {
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "samples": args.samples,
            "seed_base": args.seed_base,
        },
        "prompts": [r.to_json() for r in results],
    }
    if args.notebook is not None:
        import datetime as dt

        rows = []
        for r in results:
            j = r.to_json()
            rows.append(
                {
                    k: (round(v, 4) if isinstance(v, float) else v)
                    for k, v in {
                        "date": dt.datetime.now(dt.UTC).replace(microsecond=0),
                        "kind": "sampling",
                        "prompt_id": r.prompt.id,
                        "temperature": params.temperature,
                        "top_p": params.top_p,
                        "samples": j["samples"],
                        "seeded_identical": j["seeded_identical"],
                        "verdict": j["verdict"],
                        "p": r.test.p if r.test is not None else None,
                        "max_tvd": max((t.tvd for t in r.positions), default=None),
                        "smallest_detectable_tvd": j["smallest_detectable_tvd"],
                        "acceptance_rate": j["acceptance_rate"],
                        "baseline_build": infos["baseline"].build,
                        "candidate_build": infos["candidate"].build,
                        "candidate_config": infos["candidate"].describe_speedup(),
                    }.items()
                    if v is not None
                }
            )
        unwritten = not append_to_notebook(args, rows)
    else:
        unwritten = False
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(f"baseline  {infos['baseline'].url} ({infos['baseline'].build}) [{infos['baseline'].describe_speedup()}]")
        print(
            f"candidate {infos['candidate'].url} ({infos['candidate'].build}) [{infos['candidate'].describe_speedup()}]"
        )
        print(
            f"temperature {params.temperature}, top_p {params.top_p or 'server default'}, {args.samples} seeds from "
            f"{args.seed_base}, first {params.max_tokens} tokens"
        )
        for r in results:
            print(r.text())
    unwritten |= session_failed(writer)
    if any(x.failed for r in results for x in r.runs) or unwritten:
        return EXIT_SERVER
    if any(r.verdict == "different" or r.seeded_mismatch_is_failure for r in results):
        return EXIT_DIFFERS  # a seeded mismatch counts only where seeded bytes are (or may be) promised
    from spectui.labs.sampling.exact import NOT_ENOUGH

    return EXIT_UNDECIDED if any(r.verdict == NOT_ENOUGH for r in results) else EXIT_OK
