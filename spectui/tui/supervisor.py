"""The comparison screen's servers: the HTTP client, each side's backend, a launched pair, the live probes.

The supervisor holds the servers' run-time state (the client, the backends, what spectui launched and their
PIDs, whether they run one at a time) and does the work of reaching them; it tells the screen what happened by
posting messages (tui.messages: SideChanged, SideConnected, PairStarted, PairFailed, ProbeSampled), never by
touching a widget. The screen runs its coroutines and threads as its own workers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from textual.message import Message
from textual.worker import get_current_worker

from spectui.core.errors import describe
from spectui.core.runner import SIDES
from spectui.machine.probes import GPUProbe, SideProcesses
from spectui.run.alone import ASKED, OneAtATime
from spectui.run.pair import LaunchedPair
from spectui.tui.config import AppConfig
from spectui.tui.messages import PairFailed, PairStarted, ProbeSampled, SideChanged, SideConnected

if TYPE_CHECKING:
    from spectui.backends.base import Backend
    from spectui.machine.launcher import Launcher


class ServerSupervisor:
    def __init__(self, config: AppConfig, post: Callable[[Message], object]) -> None:
        self.config = config
        self.post = post  # the screen's post_message: thread-safe, so the launch and probe threads use it too
        self.gpu_probe = config.gpu_probe or GPUProbe()
        self.client: Any = None  # httpx.AsyncClient, opened after the first frame
        self.backends: dict[str, Backend] = {}
        self.launched: dict[str, Any] = dict(config.launched)  # side → ServerProcess, for servers spectui started
        self.pids: dict[str, int] = dict(config.pids)  # local server processes, by side (the live panel's)
        self.profile: str | None = config.profile
        # one server at a time (None: both up together): asked for, or the memory plan's reason
        self.alone: OneAtATime | None = ASKED if config.one_at_a_time else None
        self.alone_open: str | None = None  # the side open_alone holds up now
        self.launcher: Launcher | None = None
        self.replaying = config.replay_control is not None  # the probe thread shows recorded samples instead
        self.kv: dict[str, tuple[int, int] | None] = {}
        self.proc_probe = SideProcesses(gpus=self.gpu_probe)  # launched by PID, the user's by port

    @property
    def one_at_a_time(self) -> bool:
        return self.alone is not None

    # -- connecting ---------------------------------------------------------------------------------
    def make_backend(self, url: str) -> Backend:
        factory = self.config.backend_factory
        if factory is None:
            from spectui.backends.llamacpp import LlamaCppBackend  # lazy: httpx, ~0.2 s, after the first frame

            factory = LlamaCppBackend
        assert self.client is not None, "backends are made once the HTTP client is open"
        return factory(url, self.client)

    def open_backends(self) -> str | None:
        """The HTTP client and the backends (after the first frame); a warning to show, or None."""
        warning = None
        try:  # compare's client (kernel arrival stamps), so the panes' TTFT and rates are measured as compare's
            from spectui.backends.transport import stamped_client  # lazy: aiohttp, after the first frame

            self.client = stamped_client()
        except Exception as exc:  # aiohttp missing or broken: plain httpx, timed by the app's own clock
            import httpx  # lazy: httpx, ~0.2 s, after the first frame

            self.client = httpx.AsyncClient()
            warning = f"no stamped client, timing by the app's clock: {describe(exc)}"
        if self.config.backends:
            self.backends = dict(self.config.backends)
        else:
            self.backends = {
                "baseline": self.make_backend(self.config.baseline_url),
                "candidate": self.make_backend(self.config.candidate_url),
            }
        return warning

    async def connect_side(self, side: str) -> None:
        """One side reached, detected, waited for and identified; each step posted for its pane."""
        config = self.config
        backend = self.backends[side]
        recorded = backend.capabilities.recorded
        if not recorded and not backend.url.startswith(("http://", "https://", "replay://")):
            self.post(SideChanged(side, "not started", "pick a profile and a comparison (alt+p)"))
            return
        if config.backend_factory is None and not config.backends:
            # --backend auto: llama.cpp, vLLM, SGLang or OpenAI-compatible, told apart by their endpoints
            from spectui.backends.detect import resolve  # lazy: httpx, ~0.2 s, after the first frame

            try:
                backend, _kind = await resolve(config.backend_kind, backend.url, self.client, config.api_key)
            except Exception as exc:
                self.post(SideChanged(side, "failed", describe(exc)))
                return
            self.backends[side] = backend
        self.post(SideChanged(side, "connecting"))

        def waiting(state: str, left: float) -> None:
            self.post(SideChanged(side, state))

        try:
            await backend.wait_ready(config.ready_timeout, waiting)
            info = await backend.identify()
        except Exception as exc:  # one server failing never stops the other pane
            self.post(SideChanged(side, "failed", describe(exc)))
            return
        self.post(SideConnected(side, info))

    # -- one server at a time ---------------------------------------------------------------------------
    def runs_alone(self) -> bool:
        """The launched pair runs one at a time (live, not a replay): a run or a lab starts each side."""
        return self.one_at_a_time and bool(self.launched) and not self.replaying

    def lab_refusal(self, connected: bool) -> str | None:
        """Why a lab that needs both servers up at once cannot run now (None: both are up)."""
        if self.one_at_a_time and not self.replaying:  # its servers are down between runs
            return "one server at a time: this lab needs both servers up at once"
        if self.replaying or not connected:
            return "both servers must be connected (live, not a replay)"
        return None

    def pair(self) -> LaunchedPair:
        """The launched servers as run.pair's LaunchedPair: the one way a pair, or one side of it, comes up."""
        return LaunchedPair(self.profile or "spectui tui", "", dict(self.launched), self.alone, None)

    def show_progress(self, name: str, state: str, left: float) -> None:
        """A server's way up (run.pair's progress hook, from the thread that starts it), for its pane."""
        self.post(SideChanged(name, state, f"waiting for /health, {left:.0f} s left"))

    async def connect_launched(self, url: str) -> Backend:
        """A launched side's backend (the app's factory), ready: how open_alone connects the side it starts."""
        backend = self.make_backend(url)
        await backend.wait_ready(self.config.ready_timeout)
        return backend

    def open_alone(self, side: str):
        """An async context: the side's launched server started alone (run.pair), connected and shown; stopped
        (by its PID) when the block ends. The run layer's PhasedRun opens each side through it."""

        @asynccontextmanager
        async def opened():
            if self.alone_open is not None:  # a run, a prove or a sweep holds a side up: never both up
                raise RuntimeError(f"one server at a time: the {self.alone_open} is up for another run; wait for it")
            self.alone_open = side
            one = self.pair().side(side, self.client, connect=self.connect_launched, on_progress=self.show_progress)
            self.post(SideChanged(side, "starting", "one at a time: this side alone"))
            self.launcher = one.launcher  # kept first: stop() reaches the side while it starts
            try:
                async with one as backend:
                    self.post(SideConnected(side, await backend.identify(), ready=False))
                    self.backends[side] = backend
                    self.pids[side] = self.launched[side].pid or 0
                    self.post(SideChanged(side, "streaming"))
                    yield backend
            finally:
                self.alone_open = None
                self.pids.pop(side, None)
                self.post(SideChanged(side, "done", "one at a time: stopped"))

        return opened()

    # -- launching a profile's pair -----------------------------------------------------------------
    def adopt(self, profile_name: str, pair: LaunchedPair) -> None:
        """A profile's pair is the one this screen runs now (whatever ran before is stopped)."""
        self.stop()
        self.profile = profile_name
        self.launched = dict(pair.servers)
        self.alone = pair.alone

    def start_pair(self) -> None:
        """Both launched servers up together (run.pair), each pane told its way to /health (a thread's work)."""
        self.launcher = launcher = self.pair().launcher()  # kept first: stop() reaches a pair still starting
        try:
            launcher.start_all(on_progress=self.show_progress)
        except Exception as exc:
            msg = describe(exc)
            failed = {s for s, server in self.launched.items() if server.exited() is not None or server.name in msg}
            self.post(PairFailed(msg, failed))
            return
        self.post(PairStarted())

    def pair_started(self) -> None:
        self.backends = {s: self.make_backend(self.launched[s].url) for s in SIDES}
        self.pids = {s: self.launched[s].pid for s in SIDES}

    def stop(self) -> None:
        if self.launcher is not None:
            self.launcher.stop_all()  # only the servers this app started

    def log_tails(self) -> tuple[dict[str, list[str]], dict[str, int | None]]:
        return (
            {side: server.tail(6) for side, server in self.launched.items()},
            {side: server.exited() for side, server in self.launched.items()},
        )

    # -- live panel ---------------------------------------------------------------------------------
    def probe_loop(self) -> None:
        """Blocking NVML and psutil calls, in a thread; posts one sample a second."""
        me = get_current_worker()
        config = self.config
        config.host_probe()  # prime psutil's CPU percent
        while not me.is_cancelled:
            if self.replaying:  # the replay shows the recorded samples instead
                time.sleep(0.2)
                continue
            gpus = self.gpu_probe.sample()
            host = config.host_probe()
            procs = self.proc_probe.sample(self.pids, {s: b.url for s, b in self.backends.items()})
            self.post(ProbeSampled(gpus, host, procs, self.gpu_probe.error))
            for _ in range(int(config.probe_interval * 10)):
                if me.is_cancelled:
                    return
                time.sleep(0.1)

    async def poll_kv(self, connected: set[str]) -> None:
        if self.one_at_a_time:
            # the side up alone keeps to one connection: a second one, idle between polls, is one that
            # llama-server (5 s keep-alive) may close just as the client's pool (oldest first) reuses it,
            # failing a prompt with "cannot write request body" (seen in a one-at-a-time prove)
            return
        for side, backend in list(self.backends.items()):
            if side not in connected:
                continue
            try:  # asyncio.timeout, not wait_for: 3.11's wait_for returns the result of a poll that ends as the
                # quit cancels this timer, losing the cancel; the timer then ticks on and the quit awaits it for ever
                async with asyncio.timeout(0.8):
                    self.kv[side] = await backend.kv_usage()
            except Exception:
                self.kv[side] = None

    async def close(self) -> None:
        self.stop()
        if self.client is not None:  # quitting never waits on a connection that will not close; asyncio.wait,
            closing = asyncio.ensure_future(self.client.aclose())  # as 3.11's wait_for awaits the cancelled close
            closing.add_done_callback(lambda task: task.cancelled() or task.exception())
            await asyncio.wait({closing}, timeout=3.0)
        self.gpu_probe.close()
