"""Start, watch and stop the servers spectui launches itself (never ones the user started).

Servers run as argv lists (never through a shell), bound to 127.0.0.1 unless told otherwise, and are
ended by their PID. On Linux each child also gets PR_SET_PDEATHSIG, so a killed spectui leaves no
orphan server behind.
"""

from __future__ import annotations

import collections
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from spectui.backends.launchspec import without_flags
from spectui.core.errors import ServerError, SetupError
from spectui.machine.probes import pid_listening_on


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def die_with_parent() -> None:  # runs in the child between fork and exec (also spectui serve's child)
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class EarlyExit(ServerError):
    hint = "fix what the server's own lines name, then start it again"


# what a crashing llama-server prints after its own error: ggml_print_backtrace attaches gdb (or prints
# backtrace(3) frames), whose lines bury the cause (ggml/src/ggml.c, ggml_print_backtrace_symbols and the gdb
# call of ggml_print_backtrace); they are left out of the lines quoted
_BACKTRACE = re.compile(
    r"^\s*(#\d+\s|0x[0-9a-fA-F]+ in |\[New LWP|\[New Thread|\[Thread debugging|\[Inferior \d|Using host libthread_db|"
    r"warning: |\(gdb\)|ptrace:|Could not attach|No stack\.|\d+\s+\.\./sysdeps/|[^ ]+\.so[.\d]*\(|"
    r"Downloading separate debug info|\[libthread_db)"
)
_ERRORISH = re.compile(r"(?i)error|fail|abort|assert|cannot|unable|invalid|not found|no such|exception|terminate")


def own_last_lines(lines: list[str], n: int = 4) -> list[str]:
    """The server's own last log lines: backtrace lines left out, its error lines first where it printed some."""
    own = [ln.strip() for ln in lines if ln.strip() and not _BACKTRACE.match(ln)]
    errs = [ln for ln in own if _ERRORISH.search(ln)]
    return (errs or own)[-n:]


@dataclass(frozen=True)
class MemoryShare:
    """The GPU memory one launched server may take, as a memory plan decided it (spectui.labs.memory.plan).

    `gib` and `fraction` (of the GPU's total) describe the share; the engine is told it in its own terms:
    vLLM a fraction of the GPU's total (`engine_fraction` → --gpu-memory-utilization), SGLang a fraction of
    the memory free when it starts (`engine_fraction` → --mem-fraction-static), llama.cpp the layers it
    offloads and its context (-ngl/-ngld/-c), since it takes exactly what those need. `alone` says the share
    is for a server that runs with the GPU to itself (the pair runs one at a time).
    """

    gib: float
    fraction: float
    engine_fraction: float | None = None
    gpu_layers: int | None = None
    draft_gpu_layers: int | None = None
    ctx: int | None = None
    alone: bool = False


# the flags each engine reads its share from; every spelling a profile might already carry is replaced
_SHARE_FLAGS = {
    "vllm": {"--gpu-memory-utilization": "engine_fraction"},
    "sglang": {"--mem-fraction-static": "engine_fraction"},
    "llama.cpp": {"-ngl": "gpu_layers", "-ngld": "draft_gpu_layers", "-c": "ctx"},
}
_ALIASES = {
    "--gpu-layers": "-ngl",
    "--n-gpu-layers": "-ngl",
    "--gpu-layers-draft": "-ngld",
    "--n-gpu-layers-draft": "-ngld",
    "--spec-draft-ngl": "-ngld",
    "--ctx-size": "-c",
}


def share_flags(backend: str, share: MemoryShare) -> list[str]:
    """The argv flags that give an engine its share (none for an engine spectui cannot size)."""
    out: list[str] = []
    for flag, attr in _SHARE_FLAGS.get(backend, {}).items():
        value = getattr(share, attr)
        if value is not None:
            out += [flag, f"{value:.3f}" if isinstance(value, float) else str(value)]
    return out


def apply_memory_share(argv: Sequence[str], backend: str, share: MemoryShare | None) -> list[str]:
    """argv with the engine's share flags replacing any it already had (`--flag v` and `--flag=v` alike)."""
    if share is None:
        return list(argv)
    flags = share_flags(backend, share)
    names = {flags[i] for i in range(0, len(flags), 2)}
    spellings = names | {alias for alias, canonical in _ALIASES.items() if canonical in names}
    return without_flags(argv, spellings) + flags


# vLLM counts its CUDA graphs inside --gpu-memory-utilization only when its memory profiler estimates them
# (vllm/envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS: "Profile CUDA graph memory during memory profiling
# for more accurate KV cache sizing"; off by default in the versions that have it, so graphs of 1–3 GiB would
# land outside the share): a server the memory plan sized gets it set, unless its profile says otherwise
VLLM_GRAPHS_IN_SHARE = ("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "1")


def share_env(backend: str, share: MemoryShare | None, env: dict | None) -> dict:
    """The launched server's extra environment: the profile's, plus what keeps a sized server in its share."""
    out = dict(env or {})
    if share is not None and backend == "vllm":
        out.setdefault(*VLLM_GRAPHS_IN_SHARE)
    return out


@dataclass
class ServerProcess:
    """One launched server: its argv, where it listens, its log, and its process."""

    name: str
    argv: list[str]
    host: str = "127.0.0.1"
    port: int = 0
    log_lines: int = 400
    env: dict = field(default_factory=dict)  # extra environment for this server (never API keys we hold)
    ready_timeout: float = 120.0
    backend: str = "llama.cpp"
    memory_share: MemoryShare | None = None  # set when a memory plan sized this server (its argv carries it)
    proc: subprocess.Popen | None = None
    log: collections.deque = field(default_factory=lambda: collections.deque(maxlen=400))
    _reader: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        if not (Path(self.argv[0]).is_file() or shutil.which(self.argv[0])):
            how = {
                "llama.cpp": "run `spectui setup` to build llama-server, or set SPECTUI_LLAMA_SERVER",
                "vllm": "install vLLM in this environment (pip install vllm)",
                "sglang": "install SGLang in this environment (pip install sglang)",
            }.get(self.backend, "install it")
            raise SetupError(f"{self.name}: server program {self.argv[0]!r} not found", hint=how)
        if port_in_use(self.port, self.host):
            holder = pid_listening_on(self.port)
            who = f" by PID {holder}" if holder else ""
            raise ServerError(
                f"{self.name}: port {self.port} on {self.host} is already in use{who}",
                hint="pick another port or leave it empty for a free one",
            )
        env = {**os.environ, **{k: str(v) for k, v in self.env.items()}} if self.env else None
        self.proc = subprocess.Popen(
            self.argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
        )
        self._reader = threading.Thread(target=self._read_log, name=f"log-{self.name}", daemon=True)
        self._reader.start()

    def _read_log(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.log.append(raw.decode("utf-8", errors="replace").rstrip("\n"))

    def exited(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def tail(self, n: int = 8) -> list[str]:
        return list(self.log)[-n:]

    def wait_healthy(self, timeout: float = 120.0, on_progress=None) -> None:
        """Poll /health until 200; an early exit raises EarlyExit with the last log lines."""
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2.0) as client:
            while True:
                code = self.exited()
                if code is not None:
                    if self._reader:
                        self._reader.join(timeout=2)
                    last = " | ".join(own_last_lines(list(self.log))) or "it printed nothing"
                    raise EarlyExit(
                        f"{self.name} exited with status {code} before it was ready; its last lines: {last}"
                    )
                try:
                    r = client.get(self.url + "/health")
                    if r.status_code == 200:
                        return
                    state = "loading"
                except httpx.HTTPError:
                    state = "starting"
                if on_progress:
                    on_progress(self.name, state, deadline - time.monotonic())
                if time.monotonic() > deadline:
                    self.stop()
                    raise ServerError(f"{self.name} was not ready after {timeout:.0f} s", hint="see its log")
                time.sleep(0.1)

    def stop(self, grace: float = 5.0) -> None:
        """End the process we started, by its PID: SIGTERM, then SIGKILL after `grace` seconds."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


def llama_server_argv(
    binary: str | Path,
    model: str | Path,
    port: int,
    host: str = "127.0.0.1",
    extra: Sequence[str] = (),
    ctx: int = 2048,
    threads: int = 1,
    slots: int = 1,
) -> list[str]:
    return [
        str(binary),
        "-m",
        str(model),
        "--host",
        host,
        "--port",
        str(port),
        "-c",
        str(ctx),
        "-t",
        str(threads),
        "-np",
        str(slots),
        "--metrics",
        "--no-webui",
        *extra,
    ]


class Launcher:
    """Keeps the servers spectui started, and stops all of them on exit, Ctrl+C or SIGTERM."""

    def __init__(self) -> None:
        self.servers: list[ServerProcess] = []

    def add(self, server: ServerProcess) -> ServerProcess:
        if not server.port:
            server.port = free_port(server.host)
        self.servers.append(server)
        return server

    def start_all(self, timeout: float | None = None, on_progress=None) -> None:
        """Start every server and wait until each is healthy.

        Servers with a memory share start one after another: SGLang sizes its pool from the memory free
        when it starts and vLLM refuses to start unless its share is free then, so two starting at once
        would each count the other's memory as theirs. Shares planned for servers that must run alone
        are refused here (the pair would not fit): run them one at a time instead.
        """
        shared = [s for s in self.servers if s.memory_share is not None]
        if len(self.servers) > 1 and any(s.memory_share is not None and s.memory_share.alone for s in shared):
            raise SetupError(
                "these servers do not fit on the GPU together: the memory plan gave each the whole GPU",
                hint="run the comparison one server at a time (see spectui profiles check)",
            )
        try:
            if shared:
                for s in self.servers:
                    s.start()
                    s.wait_healthy(timeout or s.ready_timeout, on_progress)
                return
            for s in self.servers:
                s.start()
            for s in self.servers:
                s.wait_healthy(timeout or s.ready_timeout, on_progress)
        except BaseException:
            self.stop_all()
            raise

    def stop_all(self) -> None:
        for s in self.servers:
            try:
                s.stop()
            except Exception:
                pass

    def __enter__(self) -> Launcher:
        return self

    def __exit__(self, *exc) -> None:
        self.stop_all()
