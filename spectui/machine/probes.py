"""Hardware probes: NVIDIA GPUs through NVML (pynvml), the host and server processes through psutil.

NVML is initialised lazily; no library, no driver or "not supported" become values shown as missing,
never a crash (the lesson of nvitop).
"""

from __future__ import annotations

import os
import platform
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

import psutil


@dataclass(frozen=True)
class GPUSample:
    index: int
    name: str
    memory_used: int | None  # bytes
    memory_total: int | None
    utilisation: int | None  # percent
    memory_free: int | None = None  # bytes, as NVML reports it (what a new process could still take)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class GPUMemory:
    """One GPU's memory as a plan sees it: total and free bytes, and where the figures came from."""

    total: int
    free: int
    name: str
    source: str  # "NVML" or what was assumed instead


@dataclass(frozen=True)
class ProcessSample:
    pid: int
    rss: int | None
    cpu_percent: float | None
    alive: bool = True
    by_port: bool = False  # found as the process listening on the server's port (spectui did not launch it)
    gpu_memory: int | None = None  # bytes on the GPUs where NVML lists the process (GPUProbe.process_memory)


@dataclass(frozen=True)
class HostSample:
    cpu_count: int
    cpu_percent: float
    memory_used: int
    memory_total: int
    machine: str = field(default_factory=platform.machine)
    system: str = field(default_factory=platform.system)

    def to_json(self) -> dict:
        return asdict(self)


def _printable_name(name) -> str:
    """A GPU name as a driver reports it, safe to print: control characters (escape codes) shown as '?',
    at most 96 characters (a name with escape codes reached the terminal raw)."""
    if isinstance(name, bytes):
        name = name.decode(errors="replace")
    if not isinstance(name, str):
        return ""
    return "".join(c if c.isprintable() else "?" for c in name)[:96].strip()


def _memory_counts(mem) -> tuple[int, int, int | None] | None:
    """(used, total, free) bytes from NVML's memory info when they make sense together (whole numbers >= 0,
    used and free within total), else None, shown as N/A: a reading of used > total gave '-6.0 GiB free'."""
    if mem is None:
        return None
    vals = [getattr(mem, k, None) for k in ("used", "total", "free")]
    if any(v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0) for v in vals):
        return None
    used, total, free = vals
    if used is None or total is None or used > total or (free is not None and free > total):
        return None
    return used, total, free


class GPUProbe:
    """NVIDIA GPUs via NVML; `nvml` can be injected (tests use a fake module)."""

    def __init__(self, nvml: Any | None = None) -> None:
        self._nvml = nvml
        self._lock = threading.Lock()
        self._ready: bool | None = None
        self.error: str | None = None

    def _init(self) -> bool:
        with self._lock:
            if self._ready is not None:
                return self._ready
            try:
                if self._nvml is None:
                    import pynvml  # lazy: NVML (nvidia-ml-py) at the first sample; missing or failing is N/A

                    self._nvml = pynvml
                self._nvml.nvmlInit()
                self._ready = True
            except Exception as exc:  # no library, no driver, no GPU
                self.error = _nvml_reason(exc)
                self._ready = False
            return self._ready

    def available(self) -> bool:
        return self._init()

    def sample(self) -> list[GPUSample]:
        if not self._init():
            return []
        nv = self._nvml
        assert nv is not None  # _init() succeeded
        out: list[GPUSample] = []
        try:
            count = nv.nvmlDeviceGetCount()
        except Exception as exc:
            self.error = _nvml_reason(exc)
            return []
        for i in range(count):
            try:
                handle = nv.nvmlDeviceGetHandleByIndex(i)
            except Exception:
                continue
            name = _try(lambda h=handle: nv.nvmlDeviceGetName(h))
            mem = _memory_counts(_try(lambda h=handle: nv.nvmlDeviceGetMemoryInfo(h)))
            util = _try(lambda h=handle: nv.nvmlDeviceGetUtilizationRates(h))
            used, total, free = mem if mem is not None else (None, None, None)
            out.append(
                GPUSample(
                    index=i,
                    name=_printable_name(name) or f"GPU {i}",
                    memory_used=used,
                    memory_total=total,
                    utilisation=int(util.gpu) if util is not None else None,
                    memory_free=free,
                )
            )
        return out

    def memory(self, index: int = 0) -> GPUMemory | None:
        """Total and free memory of one GPU (the first: CUDA's default device), or None without NVML or a GPU."""
        gpus = [g for g in self.sample() if g.index == index]
        if not gpus or gpus[0].memory_total is None:
            return None
        g = gpus[0]
        total = g.memory_total
        assert total is not None
        free = g.memory_free if g.memory_free is not None else total - (g.memory_used or 0)
        return GPUMemory(total, free, g.name, "NVML")

    def process_memory(self, pid: int) -> int | None:
        """GPU memory a process holds over all GPUs (bytes), where NVML lists it among the compute or
        graphics processes; None without NVML or where it is not listed (nvitop reads the same lists)."""
        if not self._init():
            return None
        nv = self._nvml
        assert nv is not None
        total, seen = 0, False
        for i in range(_try(nv.nvmlDeviceGetCount) or 0):
            handle = _try(lambda i=i: nv.nvmlDeviceGetHandleByIndex(i))
            if handle is None:
                continue
            for lister in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                for proc in _try(lambda h=handle, f=lister: getattr(nv, f)(h)) or ():
                    used = getattr(proc, "usedGpuMemory", None)
                    if getattr(proc, "pid", None) == pid and isinstance(used, int):
                        total, seen = total + used, True
        return total if seen else None

    def close(self) -> None:
        with self._lock:
            if self._ready:
                try:
                    if self._nvml is not None:
                        self._nvml.nvmlShutdown()
                except Exception:
                    pass
            self._ready = None


def _try(fn):
    try:
        return fn()
    except Exception:  # NVML_ERROR_NOT_SUPPORTED and friends: shown as N/A
        return None


def _nvml_reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, ImportError):
        return "pynvml (nvidia-ml-py) is not installed"
    return f"NVML unavailable: {text}"


def host_sample() -> HostSample:
    vm = psutil.virtual_memory()
    return HostSample(
        cpu_count=os.cpu_count() or 1,
        cpu_percent=psutil.cpu_percent(interval=None),
        memory_used=int(vm.total - vm.available),
        memory_total=int(vm.total),
    )


class ProcessProbe:
    """RSS and CPU of server processes by PID (cpu_percent needs the same Process object each time)."""

    def __init__(self) -> None:
        self._procs: dict[int, psutil.Process] = {}

    def sample(self, pid: int) -> ProcessSample:
        proc = self._procs.get(pid)
        try:
            if proc is None:
                proc = psutil.Process(pid)
                proc.cpu_percent(None)
                self._procs[pid] = proc
            with proc.oneshot():
                return ProcessSample(pid, proc.memory_info().rss, proc.cpu_percent(None), proc.is_running())
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            self._procs.pop(pid, None)
            return ProcessSample(pid, None, None, alive=False)
        except psutil.AccessDenied:
            return ProcessSample(pid, None, None)


def local_port(url: str) -> int | None:
    """The port of a URL on this machine (127.0.0.1, localhost, ::1), else None."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    return port if host in ("127.0.0.1", "localhost", "::1") else None


class SideProcesses:
    """Each side's server process for the live panel: by the PID spectui launched it with, else the local
    process listening on its URL's port (a server the user started), with its GPU memory where NVML has it.
    A port is looked up again at most every `retry` seconds while nothing listens on it."""

    def __init__(self, procs: ProcessProbe | None = None, gpus: GPUProbe | None = None, retry: float = 5.0) -> None:
        self.procs = procs or ProcessProbe()
        self.gpus = gpus
        self.retry = retry
        self._clock = time.monotonic
        self._found: dict[str, tuple[float, int | None]] = {}  # url → (when looked up, the PID found)

    def _by_port(self, url: str) -> int | None:
        port = local_port(url)
        if port is None:
            return None
        when, pid = self._found.get(url, (None, None))
        if when is None or (pid is None and self._clock() - when > self.retry):
            pid = pid_listening_on(port)
            self._found[url] = (self._clock(), pid)
        return pid

    def sample(self, pids: dict[str, int], urls: dict[str, str]) -> dict[str, ProcessSample]:
        out: dict[str, ProcessSample] = {}
        for side in dict.fromkeys([*pids, *urls]):
            pid, by_port = pids.get(side) or None, False
            if pid is None and side in urls:
                pid, by_port = self._by_port(urls[side]), True
            if pid is None:
                continue
            s = self.procs.sample(pid)
            if not s.alive and by_port:
                self._found.pop(urls[side], None)  # the server went away: look for the port's next owner
            gpu = self.gpus.process_memory(pid) if self.gpus is not None and s.alive else None
            out[side] = ProcessSample(s.pid, s.rss, s.cpu_percent, s.alive, by_port, gpu)
        return out


def pid_listening_on(port: int) -> int | None:
    """The PID of the local process listening on a TCP port, where psutil can tell."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return None
    for c in conns:
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
            return c.pid
    return None
