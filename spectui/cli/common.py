"""What every headless command shares: exit codes, run options into params, connecting both servers."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from spectui.core.errors import InputError, ServerError, ServerHTTPError

EXIT_OK, EXIT_SERVER, EXIT_USAGE, EXIT_DIFFERS = 0, 1, 2, 3


@dataclass(frozen=True)
class PairOptions:
    """Which two servers and how to reach them: read from a command's arguments once, here."""

    baseline: str
    candidate: str
    backend: str = "auto"
    baseline_backend: str | None = None
    candidate_backend: str | None = None
    api_key_env: str | None = None
    ready_timeout: float = 120.0
    quiet: bool = False  # --json: no progress lines

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PairOptions:
        a = vars(args)
        return cls(
            a["baseline"],
            a["candidate"],
            a.get("backend") or "auto",
            a.get("baseline_backend"),
            a.get("candidate_backend"),
            a.get("api_key_env"),
            a.get("ready_timeout", 120.0),
            bool(a.get("json", False)),
        )

    def url(self, side: str) -> str:
        return self.baseline if side == "baseline" else self.candidate

    def kind(self, side: str) -> str:
        return (self.baseline_backend if side == "baseline" else self.candidate_backend) or self.backend


@dataclass(frozen=True)
class PromptOptions:
    """One prompt (--prompt, --raw) or a set (--prompts, --limit, --sample, --sample-seed)."""

    prompt: str | None = None
    raw: bool = False
    prompts: str | None = None
    limit: int | None = None
    sample: int | None = None
    sample_seed: int = 0

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PromptOptions:
        a = vars(args)
        return cls(
            a.get("prompt"),
            bool(a.get("raw", False)),
            a.get("prompts"),
            a.get("limit"),
            a.get("sample"),
            a.get("sample_seed", 0),
        )


async def connect_pair(client, args: argparse.Namespace | PairOptions):
    """Both servers, detected (or as --backend says), waited for (visibly) and identified; an error names the side."""
    from spectui.backends.detect import api_key_from, resolve  # lazy: httpx (~127 ms cold), not for --help
    from spectui.core.runner import SIDES, connect  # lazy: asyncio (~81 ms cold), not for --help

    opts = args if isinstance(args, PairOptions) else PairOptions.from_args(args)
    key = api_key_from(opts.api_key_env)
    backends = {}
    for name in SIDES:
        kind = opts.kind(name)
        try:
            backends[name], found = await resolve(kind, opts.url(name), client, key)
        except ServerError as exc:
            raise type(exc)(f"{name}: {exc}", exc.hint) from None
        if kind == "auto" and not opts.quiet:
            print(f"spectui: {name} {opts.url(name)} is {found}", file=sys.stderr)
    infos = {}
    for name, b in backends.items():
        waited: list[int] = []

        def on_wait(state, left, name=name, b=b, waited=waited):
            if not waited:
                print(f"spectui: {name} {b.url} is loading; waiting up to {left:.0f} s", file=sys.stderr)
                waited.append(1)

        try:
            infos[name] = await connect(b, opts.ready_timeout, on_wait)
        except ServerError as exc:
            if isinstance(exc, ServerHTTPError):
                raise
            raise type(exc)(f"{name}: {exc}", exc.hint) from None
    return backends, infos


def check_pair_source(args: argparse.Namespace, command: str) -> None:
    """Where a command's two servers come from: two URLs, or --launch (which --one-at-a-time needs); one
    line for any other combination, before anything runs (compare and sweep share these rules)."""
    if args.repeat < 1:
        raise InputError(f"--repeat must be at least 1, not {args.repeat}")
    if args.launch is None and (args.baseline is None or args.candidate is None):
        raise InputError(f"{command} needs --baseline URL and --candidate URL, or --launch COMPARISON")
    if args.launch is not None and (args.baseline or args.candidate):
        raise InputError("--launch starts both servers: give it without --baseline/--candidate")
    if args.one_at_a_time and args.launch is None:
        raise InputError(
            "--one-at-a-time starts and stops the servers itself: give it with --launch COMPARISON",
            hint="servers already running cannot be stopped and started by spectui",
        )


def params_from(args: argparse.Namespace):
    from spectui.core.types import checked_params  # lazy: core.types (~6 ms), not for --help

    a = vars(args)
    # a lab that sets the cache per side (prefix) offers no --cache-prompt: its params say off
    cache = {"off": False, "on": True, "server": None}[a.get("cache_prompt", "off")]
    return checked_params(
        a["max_tokens"],
        a["temperature"],
        a.get("seed", 42),
        cache,
        a.get("idle_timeout", 120.0),
        a.get("deadline", 3600.0),
    )


def prompts_from(args: argparse.Namespace | PromptOptions):
    from spectui.store import prompts  # lazy: platformdirs (~53 ms cold), not for --help

    opts = args if isinstance(args, PromptOptions) else PromptOptions.from_args(args)
    if opts.prompt is not None:
        try:
            opts.prompt.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError("--prompt is not valid UTF-8 text", hint="pass the prompt in UTF-8") from None
        return [prompts.single(opts.prompt, raw=opts.raw)]
    if opts.prompts is None:
        raise InputError("give --prompt TEXT or --prompts SET|FILE")
    items = prompts.load_set(opts.prompts)[1]
    return prompts.pick(
        items,
        opts.limit,
        opts.sample,
        opts.sample_seed,
        note=lambda m: print(f"spectui: warning: {m}", file=sys.stderr),
    )


def append_to_notebook(args, rows: list[dict]) -> bool:
    """--notebook [PATH]: append the rows and say where they went (or why they went beside it). A notebook
    that cannot be written is one line after the report (which is printed first) and False."""
    from spectui.store import notebook  # lazy: platformdirs (~53 ms cold), not for --help

    try:
        where, warning = notebook.append(notebook.notebook_path(args.notebook or None), rows)
    except InputError as exc:
        print(f"spectui: error: {exc.one_line()}; the report above is complete", file=sys.stderr)
        return False
    print(
        f"spectui: {'warning: ' + warning if warning else f'appended {len(rows)} measurements to {where}'}",
        file=sys.stderr,
    )
    return True
