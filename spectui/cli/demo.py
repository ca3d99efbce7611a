"""`spectui demo`, the embedded default: launch a bundled pair of llama-servers and compare them."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from spectui.cli.commands import COMMANDS
from spectui.cli.main import main as cli_main
from spectui.core.types import GenerationParams
from spectui.machine import assets
from spectui.machine.launcher import Launcher
from spectui.store.profiles import load_profiles, servers_for

DEMO_PROMPT = "Write a Python function fizzbuzz(n) that returns a list of strings for 1..n. Keep it short."


def demo_servers(kind: str):
    """The cpu-demo profile's pair for `kind` (profiles/cpu-demo.toml), on 127.0.0.1 and free ports."""
    profiles, _ = load_profiles()
    profile = profiles["cpu-demo"]
    comparison = profile.comparison(kind)
    base, cand = servers_for(profile, comparison)
    return comparison, base, cand


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
    assets.ensure_all(progress=lambda m: print(f"spectui demo: {m}", file=sys.stderr))
    if args.one_at_a_time and args.headless:
        return cli_main(
            ["compare", "--launch", args.candidate, "--one-at-a-time", "--prompt", DEMO_PROMPT]
            + ["--max-tokens", "96", "--repeat", str(args.repeat), _triage_flag(args)]
        )
    if args.one_at_a_time:
        return _tui_one_at_a_time(args)
    comparison, base, cand = demo_servers(args.candidate)
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


def _tui_one_at_a_time(args) -> int:
    """The TUI starts each server when a run needs it and stops it after (tui.supervisor.open_alone)."""
    _, base, cand = demo_servers(args.candidate)
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
        "--candidate",
        choices=("draft", "ngram", "kvq4", "prefix"),
        default="draft",
        help="which speed-up the candidate uses (default: draft-model speculation)",
    )
