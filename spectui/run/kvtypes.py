"""The KV-cache types a server runs with, from its command line: llama.cpp's /props reports no cache types
(GET /props of b11434 answers build_info, default_generation_settings {n_ctx, params}, model_ftype,
model_path, total_slots …, no cache type), nor vLLM's /v1/models, so a q4_0 KV candidate was recorded as `kv_cache: {}` and every
view said "no speculation" on both sides. The types come from the argv spectui launched the server with
(backends.launchspec.engine_args), else from the command line of the local process listening on the URL's
port; a server whose command line cannot be read is recorded as "not reported by the server".

    ServerInfo.kv_cache = {"type_k": "q4_0", "type_v": "q4_0", "from": "launch command"}
                        | {"from": "not reported by the server"}
"""

from __future__ import annotations

from collections.abc import Sequence

from spectui.backends.launchspec import LaunchSpec, engine_args
from spectui.core.types import ServerInfo

LAUNCHED = "launch command"  # spectui started the server with this argv
PROCESS = "process command line"  # read from the local process that listens on the URL's port
NOT_REPORTED = "not reported by the server"


def kv_from_argv(backend: str, argv: Sequence[str], source: str) -> dict:
    """{"type_k", "type_v", "from"} as `argv` launches a server of kind `backend` (each engine's default where
    the flag is absent: llama.cpp f16, vLLM/SGLang auto); {} for a kind whose argv spectui does not read."""
    args = engine_args(backend, argv)
    if args.target is None:
        return {}
    return {"type_k": args.kv_k, "type_v": args.kv_v, "from": source}


def fill_kv_types(info: ServerInfo, launched: LaunchSpec | None, read_argv=None) -> None:
    """Give `info` its KV types where the server reported none: from the launched argv, else from the local
    process's (read_argv(url) → argv or None), else say they were not reported. A reported value is kept."""
    if info.kv_cache or info.backend == "replay":
        return
    kv: dict = {}
    if launched is not None and launched.launched:
        kv = kv_from_argv(info.backend, launched.argv, LAUNCHED)
    elif read_argv is not None and (argv := read_argv(info.url)):
        kv = kv_from_argv(info.backend, argv, PROCESS)
    info.kv_cache = kv or {"from": NOT_REPORTED}


def local_argv(url: str) -> list[str] | None:
    """The command line of the server behind `url` where it runs on this machine (labs.sampling's reader)."""
    from spectui.labs.sampling.exact import (
        launch_argv,  # lazy: numpy (~0.3 s) with exact.py; the TUI imports this module
    )

    return launch_argv(url)
