"""Which llama-servers this test process has up, read from /proc, and a watcher that samples them every 20 ms.

The one-at-a-time tests prove "never both up" from the process list, not from the launcher's own account.
psutil's `children(recursive=True)` scans every process on the machine to build its parent map: 3.8 ms of
CPU a call here, so a 20 ms watcher spent a sixth of a core for the whole of each such test, on a suite
that is bound by its 2 cores. The kernel lists each thread's children in /proc/PID/task/TID/children
(Linux's CONFIG_PROC_CHILDREN): 0.12 ms a call. The kernel's own caveat (Documentation/filesystems/proc.rst)
is that a list read while children start or exit may miss one; a sample 20 ms later sees it, and a
server is up for seconds, so no overlap or launch a test counts is missed by it.
"""

from __future__ import annotations

import glob
import threading
from collections.abc import Iterator
from contextlib import contextmanager

Server = tuple[int, int]  # (PID, start time in clock ticks): a PID the kernel hands out again is another process


def _children(pid: int | str) -> list[int]:
    out: list[int] = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            with open(path) as fh:
                out += [int(x) for x in fh.read().split()]
        except (FileNotFoundError, ProcessLookupError):  # the thread or the process has gone
            continue
    return out


def _stat(pid: int) -> tuple[str, str, int] | None:
    """(command name, state, start time) from /proc/PID/stat, or None if the process has gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            raw = fh.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    name = raw[raw.index("(") + 1 : raw.rindex(")")]  # the name may hold spaces and parentheses
    rest = raw[raw.rindex(")") + 2 :].split()
    return name, rest[0], int(rest[19])  # fields 3 and 22 of proc(5)


def llama_children(besides: set[Server] | frozenset[Server] = frozenset()) -> set[Server]:
    """llama-server processes this test process started (children and their children), less `besides` (the
    session's shared servers, started by other tests' fixtures in this same process) and less any that has
    exited and waits to be reaped (a zombie is not up)."""
    out: set[Server] = set()
    todo = _children("self")
    while todo:
        pid = todo.pop()
        st = _stat(pid)
        if st is None:
            continue
        name, state, start = st
        if name.startswith("llama-server") and state != "Z":  # comm is cut to 15 characters
            out.add((pid, start))
        todo += _children(pid)
    return out - set(besides)


@contextmanager
def watched(every: float = 0.02) -> Iterator[tuple[list[set[Server]], set[Server]]]:
    """Every set of llama-servers this test started, sampled every `every` s in a thread (the event loop's
    own pauses could miss a short overlap). Yields (the samples, the servers that were up before)."""
    seen: list[set[Server]] = []
    stop = threading.Event()
    shared = llama_children()

    def watch() -> None:
        while not stop.is_set():
            seen.append(llama_children(shared))
            stop.wait(every)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        yield seen, shared
    finally:
        stop.set()
        t.join(5)
