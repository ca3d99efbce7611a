"""A llama-server for the draft model alone, so the draft probe can ask it what it would have drafted.

Started on 127.0.0.1 at a free port, after the timed run, and stopped by the caller's launcher: its
requests never reach the candidate, so the measured figures stay untouched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from spectui.backends.launchspec import LaunchSpec
from spectui.backends.llamacpp import LlamaCppBackend
from spectui.core.errors import InputError
from spectui.core.types import ServerInfo
from spectui.machine import assets
from spectui.machine.gguf import read_gguf_header
from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv
from spectui.machine.probes import local_argv, local_port


def draft_model_from_argv(argv: list[str] | None) -> Path | None:
    """The draft GGUF a launched candidate was given (-md / --model-draft / --spec-draft-model)."""
    return LaunchSpec.from_argv(argv).draft_model


DRAFTER_CTX = 2048  # the draft server's context unless the candidate's settings give one (-c)


def drafter_argv(server: Path, model: Path, settings: Sequence[str] = ()) -> list[str]:
    """The draft server's command line: -t 1 and no offload unless `settings` (the candidate's own, from
    LaunchSpec.draft_server_args) say otherwise; llama.cpp takes the last of a repeated flag."""
    # --swa-full: a sliding-window model (gemma3) keeps its whole cache, so the draft's cached prefix is reused
    # whole when its batches are timed (without it llama-server keeps only checkpoints: cache_n falls short)
    return llama_server_argv(server, model, 0, extra=("--swa-full", *settings), ctx=DRAFTER_CTX)


def draft_model_path(draft_model: str | Path | None) -> Path | None:
    """The GGUF the draft server would load: the one named, else spectui's bundled draft (None: neither)."""
    return Path(draft_model).expanduser() if draft_model else assets.find_all().draft_model


@dataclass(frozen=True)
class CandidateDraft:
    """The draft model the candidate runs, and how spectui knows it is that one."""

    path: Path
    which: str  # "named with --draft-model", "from the candidate's command line (spectui launched it)", …
    target: Path | None = None  # the candidate's target GGUF, where known (the vocabulary was checked against it)


HOW_TO_NAME = "name the draft the candidate runs: --draft-model GGUF (the file it was given with -md)"


def candidate_draft(
    named: str | Path | None,
    spec: LaunchSpec | None = None,
    url: str | None = None,
    info: ServerInfo | None = None,
) -> CandidateDraft:
    """The draft model the candidate runs: the one named, else the one on the command line spectui launched it
    with, else on the command line of the local process listening on its port, else the file /props names
    (found beside its target or in spectui's cache). Never spectui's bundled draft by default: a draft of
    another vocabulary answers a context's token ids with HTTP 400 or with nonsense. Checked against the
    target's vocabulary (GGUF headers) where the target's file is on this machine. One InputError where none
    can be had or it does not fit."""
    argv: list[str] | None = list(spec.argv) if spec is not None and spec.launched else None
    local = local_argv(url) if url is not None and not named else None
    by_port = f"from the command line of the process listening on port {local_port(url or '')}"
    how = by_port if argv and argv == local else "from the candidate's command line (spectui launched it)"
    if not argv and local:
        argv, how = local, by_port
    launched = LaunchSpec.from_argv(argv)
    target = _target_file(launched, info)
    if named:
        path, how = Path(named).expanduser(), "named with --draft-model"
    elif launched.draft_model is not None:
        path = launched.draft_model
    else:
        path, how = _from_props(info, target)
    if not path.is_file():
        raise InputError(f"the candidate's draft model {path} ({how}) is not a file on this machine", hint=HOW_TO_NAME)
    if target is not None:
        check_same_vocabulary(path, target)
    return CandidateDraft(path, how, target)


def _target_file(spec: LaunchSpec, info: ServerInfo | None) -> Path | None:
    for raw in (spec.values.get("model"), info.model_path if info is not None else None):
        if raw and Path(raw).expanduser().is_file():
            return Path(raw).expanduser()
    return None


def _from_props(info: ServerInfo | None, target: Path | None) -> tuple[Path, str]:
    name = (info.speculative.get("draft_model") if info is not None else None) or None
    if name:
        for folder in ([target.parent] if target is not None else []) + [assets.cache_dir() / "models"]:
            if (folder / str(name)).is_file():
                return folder / str(name), f"named {name} by the candidate's /props, found in {folder}"
    raise InputError(
        "the candidate drafts with a draft model spectui cannot see: it did not launch it, no process here "
        "listens on its port with a readable command line, and /props names "
        + (f"{name}, which is not beside its target or in spectui's cache" if name else "none"),
        hint=HOW_TO_NAME,
    )


def vocabulary(path: Path) -> tuple[int | None, str]:
    """(the number of tokens, the tokenizer's model and pre-tokenizer) from a GGUF header."""
    head = read_gguf_header(path, tensors=False)
    n = head.array_lengths.get("tokenizer.ggml.tokens") or head.arch_value("vocab_size")
    kind = "/".join(str(head.meta[k]) for k in ("tokenizer.ggml.model", "tokenizer.ggml.pre") if k in head.meta)
    return (int(n) if n else None), kind


# llama.cpp lets a draft's vocabulary differ from its target's by at most this many tokens
# (common/speculative.cpp:30 SPEC_VOCAB_MAX_SIZE_DIFFERENCE, checked in common_speculative_are_compatible)
VOCAB_SIZE_SLACK = 128


def check_same_vocabulary(draft: Path, target: Path) -> None:
    """One InputError where the draft's vocabulary is not its target's (tokenizer kind, or sizes further apart
    than llama.cpp allows: common/speculative.cpp:106-150 common_speculative_are_compatible); spectui's probes
    send the draft the target's token ids."""
    (nd, kd), (nt, kt) = vocabulary(draft), vocabulary(target)
    if kd != kt or (nd is not None and nt is not None and abs(nd - nt) > VOCAB_SIZE_SLACK):
        raise InputError(
            f"draft {draft.name} has a {nd or '?'}-token vocabulary ({kd or '?'}), its target {target.name} "
            f"{nt or '?'} ({kt or '?'}): a draft must share its target's vocabulary",
            hint=HOW_TO_NAME,
        )


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
