"""What every headless command shares: exit codes, run options into params, connecting both servers."""

from __future__ import annotations

import sys

from spectui.core.errors import InputError, ServerError, ServerHTTPError

EXIT_OK, EXIT_SERVER, EXIT_USAGE, EXIT_DIFFERS = 0, 1, 2, 3


async def connect_pair(client, args):
    """Both servers, detected (or as --backend says), waited for (visibly) and identified; an error names the side."""
    from spectui.backends.detect import api_key_from, resolve
    from spectui.core.runner import connect

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


def params_from(args):
    from spectui.core.types import checked_params

    cache = {"off": False, "on": True, "server": None}[args.cache_prompt]
    return checked_params(
        args.max_tokens,
        args.temperature,
        args.seed,
        cache,
        getattr(args, "idle_timeout", 120.0),
        getattr(args, "deadline", 3600.0),
    )


def prompts_from(args):
    from spectui.store import prompts

    if getattr(args, "prompt", None) is not None:
        try:
            args.prompt.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError("--prompt is not valid UTF-8 text", hint="pass the prompt in UTF-8") from None
        return [prompts.single(args.prompt, raw=args.raw)]
    items = prompts.load_set(args.prompts)[1]
    return prompts.pick(
        items,
        getattr(args, "limit", None),
        getattr(args, "sample", None),
        getattr(args, "sample_seed", 0),
        note=lambda m: print(f"spectui: warning: {m}", file=sys.stderr),
    )


def append_to_notebook(args, rows: list[dict]) -> None:
    """--notebook [PATH]: append the rows and say where they went (or why they went beside it)."""
    from spectui.store import notebook

    where, warning = notebook.append(notebook.notebook_path(args.notebook or None), rows)
    print(
        f"spectui: {'warning: ' + warning if warning else f'appended {len(rows)} measurements to {where}'}",
        file=sys.stderr,
    )
