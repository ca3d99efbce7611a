"""A llama-server for the draft model alone, so the draft probe can ask it what it would have drafted.

Started on 127.0.0.1 at a free port, after the timed run, and stopped by the caller's launcher: its
requests never reach the candidate, so the measured figures stay untouched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

from spectui.backends.launchspec import LaunchSpec
from spectui.backends.llamacpp import LlamaCppBackend
from spectui.core.errors import InputError
from spectui.machine import assets
from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv


def draft_model_from_argv(argv: list[str] | None) -> Path | None:
    """The draft GGUF a launched candidate was given (-md / --model-draft / --spec-draft-model)."""
    return LaunchSpec.from_argv(argv).draft_model


DRAFTER_CTX = 2048  # the draft server's context unless the candidate's settings give one (-c)


def drafter_argv(server: Path, model: Path, settings: Sequence[str] = ()) -> list[str]:
    """The draft server's command line: -t 1 and no offload unless `settings` (the candidate's own, from
    LaunchSpec.draft_server_args) say otherwise; llama.cpp takes the last of a repeated flag."""
    return llama_server_argv(server, model, 0, extra=tuple(settings), ctx=DRAFTER_CTX)


def draft_model_path(draft_model: str | Path | None) -> Path | None:
    """The GGUF the draft server would load: the one named, else spectui's bundled draft (None: neither)."""
    return Path(draft_model).expanduser() if draft_model else assets.find_all().draft_model


async def start_drafter(
    client,
    draft_model: str | Path | None,
    say: Callable[[str], None] | None = None,
    settings: Sequence[str] = (),
) -> tuple[Launcher, LlamaCppBackend]:
    """A llama-server serving the draft model (spectui's bundled draft unless one is named), and its backend,
    with the candidate's threads, offload and context where `settings` give them."""
    found = assets.find_all()
    model = draft_model_path(draft_model)
    if model is None or not model.is_file():
        raise InputError(
            f"draft model {model or '(none)'} not found",
            hint="give --draft-model GGUF, or run `spectui setup` for the bundled draft",
        )
    if found.llama_server is None:
        raise InputError("llama-server not found to serve the draft model", hint="run `spectui setup`")
    launcher = Launcher()
    proc = launcher.add(ServerProcess("draft-probe", drafter_argv(found.llama_server, model, settings)))
    proc.argv[proc.argv.index("--port") + 1] = str(proc.port)
    if say is not None:
        say(f"starting the draft model {model.name} on {proc.url} for the probe …")
    try:
        await asyncio.to_thread(launcher.start_all, 120)
        backend = LlamaCppBackend(proc.url, client)
        await backend.identify()
    except BaseException:
        launcher.stop_all()
        raise
    return launcher, backend
