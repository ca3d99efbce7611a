"""`spectui demo`, the embedded default: launch a bundled pair of llama-servers and compare them."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from spectui.cli.commands import COMMANDS
from spectui.cli.main import main as cli_main
from spectui.cli.outputs import check_gguf
from spectui.core.errors import InputError
from spectui.core.types import GenerationParams
from spectui.machine import assets, families
from spectui.machine.drafter import check_same_vocabulary
from spectui.machine.gguf import read_gguf_header
from spectui.machine.launcher import Launcher
from spectui.store.profiles import builtin_values, load_profiles, servers_for

DEMO_PROMPT = "Write a Python function fizzbuzz(n) that returns a list of strings for 1..n. Keep it short."


def demo_servers(kind: str, values: dict | None = None):
    """The cpu-demo profile's pair for `kind` (profiles/cpu-demo.toml), on 127.0.0.1 and free ports; `values`
    fill its {model} and {draft_model} with the user's own (spectui demo --model)."""
    profiles, _ = load_profiles()
    profile = profiles["cpu-demo"]
    comparison = profile.comparison(kind)
    base, cand = servers_for(profile, comparison, values)
    return comparison, base, cand


def own_model_values(args) -> dict | None:
    """--model PATH [--draft PATH]: the user's GGUF and its draft as the profile's {model} and {draft_model}:
    the draft named (checked to share the model's vocabulary), else the model's own Q2_K copy made once by
    llama-quantize and kept in the cache; its size said, with a warning where it is not smaller."""
    if not args.model:
        if args.draft:
            raise InputError("--draft goes with --model PATH (the bundled model has its own draft)")
        return None

    model = check_gguf(args.model, "--model")
    assert model is not None
    read_gguf_header(model, tensors=False)  # a damaged header is one line here, not a server that dies
    say = lambda m: print(f"spectui demo: {m}", file=sys.stderr)  # noqa: E731
    named = check_gguf(args.draft, "--draft")
    if named is not None:
        check_same_vocabulary(named, model)  # before anything is built or started
    _server, quantize = assets.ensure_llama_server(progress=say)
    values = builtin_values()
    values.update(model=str(model), model_demo=str(model), draft_model=None, model_f32=None)  # every comparison
    if named is not None:
        draft, how = named, "named with --draft"
    elif args.candidate == "draft":
        draft = families.make_draft(quantize, model, families.own_draft_path(model), say)
        how = "its Q2_K copy made by llama-quantize --allow-requantize, kept in the cache"
    else:  # only draft-model speculation runs a draft
        say(f"model {model} ({model.stat().st_size / 2**20:.0f} MiB)")
        return values
    values["draft_model"] = str(draft)
    size_m, size_d = model.stat().st_size, draft.stat().st_size
    say(f"model {model} ({size_m / 2**20:.0f} MiB); draft {draft.name} ({size_d / 2**20:.0f} MiB, {how})")
    if size_d >= size_m / 2:
        # the draft decodes once per drafted token: near the target's size it costs about as much as decoding
        # (Gemma 3 270M's Q2_K copy is 94 % of it: its 262,144-token embedding table stays at higher precision)
        say(
            f"warning: the draft is {size_d / size_m:.0%} of the model's size"
            + (" (not smaller)" if size_d >= size_m else "")
            + ": each drafted token costs nearly a target step, so draft-model speculation can hardly win; give "
            "a smaller --draft (a smaller model of the same family and vocabulary)"
        )
    return values


def demo_config(base, cand, **overrides):
    """The TUI's configuration for a launched demo pair: autorun the bundled prompt, pids for the live panel."""
    from spectui.tui.app import AppConfig  # lazy: textual (~130 ms cold), not for demo --help

    kw = dict(
        params=GenerationParams(max_tokens=96, cache_prompt=False),
        pids={"baseline": base.pid, "candidate": cand.pid},
        initial_prompt=DEMO_PROMPT,
        autorun=True,
        launched={"baseline": base, "candidate": cand},
        profile="cpu-demo",
    )
    kw.update(overrides)
    return AppConfig(base.url, cand.url, **kw)


def demo_overrides(kind: str) -> dict:
    """Prefix caching is not answered by one cold request on each side with the cache forced off (both said
    `cached 0`): each server keeps its own setting (the baseline launched --no-cache-prompt, the candidate
    --cache-prompt, profiles/cpu-demo.toml) and the cache lab runs cold against warm turns of a conversation,
    tokens reused and bytes compared (labs/prefix.py)."""
    if kind != "prefix":
        return {}

    return dict(params=GenerationParams(max_tokens=96, cache_prompt=None), autorun=False, autorun_lab="prefix_lab")


def cmd_demo(args) -> int:
    values = own_model_values(args)
    if values is None:
        assets.ensure_all(progress=lambda m: print(f"spectui demo: {m}", file=sys.stderr))
    elif args.one_at_a_time and args.headless:
        raise InputError(
            "--model with --one-at-a-time --headless is not supported (it runs a profile's pair by name)",
            hint="leave out --headless for the TUI one at a time, or --one-at-a-time to run both together",
        )
    if args.one_at_a_time and args.headless:
        return cli_main(
            ["compare", "--launch", args.candidate, "--one-at-a-time", "--prompt", DEMO_PROMPT]
            + ["--max-tokens", "96", "--repeat", str(args.repeat), _triage_flag(args)]
        )
    if args.one_at_a_time:
        return _tui_one_at_a_time(args, values)
    comparison, base, cand = demo_servers(args.candidate, values)
    print(
        f"spectui demo: starting baseline and candidate [{comparison.title}] on 127.0.0.1 ports {base.port} and "
        f"{cand.port}",
        file=sys.stderr,
    )
    with _both_up(base, cand):
        if args.headless and args.candidate == "prefix":  # cold vs warm turns (spectui prefix), not one request
            return cli_main(["prefix", "--baseline", base.url, "--candidate", cand.url, "--max-tokens", "96"])
        if args.headless:
            return cli_main(
                ["compare", "--baseline", base.url, "--candidate", cand.url, "--prompt", DEMO_PROMPT]
                + ["--max-tokens", "96", "--repeat", str(args.repeat), _triage_flag(args)]
            )
        return _run_app(demo_config(base, cand, triage=args.triage, **demo_overrides(args.candidate)))


def _triage_flag(args) -> str:
    """compare's own default is off; the demo's is on (its --triage help)."""
    return "--triage" if args.triage else "--no-triage"


def _tui_one_at_a_time(args, values: dict | None = None) -> int:
    """The TUI starts each server when a run needs it and stops it after (tui.supervisor.open_alone)."""
    _, base, cand = demo_servers(args.candidate, values)
    try:
        return _run_app(demo_config(base, cand, one_at_a_time=True, pids={}, triage=args.triage))
    finally:
        for s in (base, cand):
            s.stop()


@contextmanager
def _both_up(base, cand) -> Iterator[None]:
    """Both servers started and healthy for the block, stopped after it — also when spectui is `kill`ed."""
    launcher = Launcher()
    for s in (base, cand):
        launcher.add(s)

    def on_term(signum, frame):  # a `kill` of spectui still stops the servers it started
        raise SystemExit(128 + signum)

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        launcher.start_all()
        yield
    finally:
        launcher.stop_all()
        signal.signal(signal.SIGTERM, old)


def _run_app(config) -> int:
    from spectui.tui.app import make_app  # lazy: textual (~130 ms cold), only when the TUI opens

    app = make_app(config)
    app.run()
    return app.return_code or 0  # non-zero when the app died of an error


def register(sub) -> None:
    p = sub.add_parser("demo", help=COMMANDS["demo"].help)
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
        "--model",
        metavar="GGUF",
        help="your own model instead of the bundled SmolLM2: the baseline and every candidate kind run on it",
    )
    p.add_argument(
        "--draft",
        metavar="GGUF",
        help="with --model: its draft for --candidate draft (default: its Q2_K copy, made once and cached)",
    )
    p.add_argument(
        "--candidate",
        choices=("draft", "ngram", "kvq4", "prefix"),
        default="draft",
        help="which speed-up the candidate uses (default: draft-model speculation)",
    )
