"""The TUI's servers: connecting each side, launching a profile's pair, their logs, and the live probes."""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

from textual.css.query import NoMatches
from textual.worker import get_current_worker

from spectui.core.errors import InputError, describe
from spectui.core.runner import SIDES
from spectui.machine.probes import SideProcesses
from spectui.run.pair import LaunchedPair
from spectui.tui.messages import ProbeSampled
from spectui.tui.widgets.panes import ServerLogs

if TYPE_CHECKING:
    from spectui.backends.base import Backend
    from spectui.machine.launcher import Launcher
    from spectui.tui.config import AppConfig
    from spectui.tui.widgets.panes import SidePane


class SupervisorHost(Protocol):
    """What the server supervisor needs of the app (SpectuiApp provides it): its typed door."""

    config: AppConfig
    backends: dict[str, Backend]
    gpu_probe: Any
    client: Any

    @property
    def running(self) -> bool: ...

    @property
    def workers(self) -> Any: ...

    @property
    def replaying(self) -> bool: ...

    @property
    def screen(self) -> Any: ...

    def pane(self, side: str) -> SidePane: ...

    async def run_action(self, action: str) -> bool: ...

    def q(self, selector: Any, kind: Any = None) -> Any: ...

    def notify(self, message: str, *, severity: Any = "information", timeout: float | None = None) -> None: ...

    def run_worker(self, work: Any, *args: Any, **kwargs: Any) -> Any: ...

    def call_from_thread(self, callback: Any, *args: Any, **kwargs: Any) -> Any: ...

    def post_message(self, message: Any) -> bool: ...

    def apply_launch_notes(self) -> None: ...

    def action_run(self) -> None: ...

    def action_run_all(self) -> None: ...

    def call_after_refresh(self, callback: Any, *args: Any, **kwargs: Any) -> Any: ...


class ServerSupervisor:
    def __init__(self, app: SupervisorHost) -> None:
        self.app = app
        self.launcher: Launcher | None = None
        self.kv: dict[str, tuple[int, int] | None] = {}
        self.proc_probe = SideProcesses(gpus=app.gpu_probe)  # launched by PID, the user's by port
        self.alone_why = "asked for (--one-at-a-time)"  # the memory plan's reason when it chose it
        self.alone_open: str | None = None  # the side open_alone holds up now

    # -- connecting ---------------------------------------------------------------------------------
    def make_backend(self, url: str) -> Backend:
        from spectui.backends.llamacpp import LlamaCppBackend  # lazy: httpx with it, after the first frame (issue 32)

        app = self.app
        factory = app.config.backend_factory or (lambda u, client: LlamaCppBackend(u, client))
        assert app.client is not None, "backends are made once the app's HTTP client is open"
        return factory(url, app.client)

    def open_backends(self) -> None:
        """The HTTP client (httpx, an SSL context), the backends and the probe thread, after the first frame,
        which needs none of them (they were 0.1 s of a 0.87 s first frame; issue 32)."""
        app = self.app
        try:  # compare's client (kernel arrival stamps), so the panes' TTFT and rates are measured as compare's
            from spectui.backends.transport import stamped_client  # lazy: aiohttp, after the 1st frame

            app.client = stamped_client()
        except Exception as exc:  # aiohttp missing or broken: plain httpx, timed by the app's own clock
            import httpx  # lazy: httpx after the first frame (issue 32)

            app.client = httpx.AsyncClient()
            app.notify(f"no stamped client, timing by the app's clock: {describe(exc)}", severity="warning")
        if app.config.backends:
            app.backends = dict(app.config.backends)
        else:
            app.backends = {
                "baseline": self.make_backend(app.config.baseline_url),
                "candidate": self.make_backend(app.config.candidate_url),
            }
        if app.config.one_at_a_time:
            self.wait_alone()
        else:
            self.connect_all()
        self.start_probes()

    def connect_all(self) -> None:
        for side in SIDES:
            self.app.run_worker(self.connect_side(side), group="connect", exit_on_error=False)

    async def connect_side(self, side: str) -> None:
        app = self.app
        pane = app.pane(side)
        backend = app.backends[side]
        recorded = backend.capabilities.recorded
        if not recorded and not backend.url.startswith(("http://", "https://", "replay://")):
            pane.set_state("not started", "pick a profile and a comparison (alt+p)")
            return
        if app.config.backend_factory is None and not app.config.backends:
            # --backend auto: llama.cpp, vLLM, SGLang or OpenAI-compatible, told apart by their endpoints
            from spectui.backends.detect import resolve  # lazy: httpx with it, after the first frame

            try:
                backend, _kind = await resolve(app.config.backend_kind, backend.url, app.client, app.config.api_key)
            except Exception as exc:
                pane.set_state("failed", describe(exc))
                return
            app.backends[side] = backend
        pane.set_state("connecting")
        try:
            await backend.wait_ready(app.config.ready_timeout, lambda state, left: pane.set_state(state))
            info = await backend.identify()
        except Exception as exc:  # one server failing never stops the other pane
            pane.set_state("failed", describe(exc))
            return
        pane.set_info(info)
        pane.set_state("ready")
        if all(app.pane(s).state == "ready" for s in SIDES) and not app.running:
            if app.config.autorun_lab:  # a lesson a plain compare does not answer (prefix caching: cold vs warm)
                await app.run_action(f"lab('{app.config.autorun_lab}')")
                app.call_after_refresh(lambda: app.screen.run_action("run"))
            elif app.config.autorun_all:
                app.action_run_all()
            elif app.config.autorun:
                app.action_run()

    # -- one server at a time ---------------------------------------------------------------------------
    def wait_alone(self) -> None:
        """One at a time: nothing starts until a run needs a side; the panes say so, and autorun goes."""
        app = self.app
        for side in SIDES:
            app.pane(side).set_state("ready", "one at a time: started when a run needs it")
        # after the first refresh: on_mount fills the prompt box after this
        if app.config.autorun_all:
            app.call_after_refresh(app.action_run_all)
        elif app.config.autorun:
            app.call_after_refresh(app.action_run)

    def alone(self) -> bool:
        """The app runs its launched pair one at a time (live, not a replay): a screen starts each side."""
        app = self.app
        return app.config.one_at_a_time and bool(app.config.launched) and not app.replaying

    def lab_refusal(self) -> str | None:
        """Why a lab that needs both servers up at once cannot run now (None: both are up)."""
        app = self.app
        if app.config.one_at_a_time and not app.replaying:  # its servers are down between runs
            return "one server at a time: this lab needs both servers up at once"
        if app.replaying or any(app.pane(s).info is None for s in SIDES):
            return "both servers must be connected (live, not a replay)"
        return None

    def pair(self) -> LaunchedPair:
        """The launched servers as run.pair's LaunchedPair: the one way a pair, or one side of it, comes up."""
        app = self.app
        alone = self.alone_why if app.config.one_at_a_time else None
        return LaunchedPair(app.config.profile or "spectui tui", "", dict(app.config.launched), alone, None)

    def show_progress(self, name: str, state: str, left: float) -> None:
        """A server's way up (run.pair's progress hook, from the thread that starts it), on its pane."""
        app = self.app
        app.call_from_thread(app.pane(name).set_state, state, f"waiting for /health, {left:.0f} s left")

    async def connect_launched(self, url: str) -> Backend:
        """A launched side's backend (the app's factory), ready: how open_alone connects the side it starts."""
        backend = self.make_backend(url)
        await backend.wait_ready(self.app.config.ready_timeout)
        return backend

    def open_alone(self, side: str):
        """An async context: the side's launched server started alone (run.pair), connected and shown; stopped
        (by its PID) when the block ends. The run layer's PhasedRun opens each side through it."""
        app = self.app

        @asynccontextmanager
        async def opened():
            if self.alone_open is not None:  # a run, a prove or a sweep holds a side up: never both up
                raise RuntimeError(f"one server at a time: the {self.alone_open} is up for another run; wait for it")
            self.alone_open = side
            pane = app.pane(side)
            one = self.pair().side(side, app.client, connect=self.connect_launched, on_progress=self.show_progress)
            pane.set_state("starting", "one at a time: this side alone")
            self.launcher = one.launcher  # kept first: stop() reaches the side while it starts
            try:
                async with one as backend:
                    pane.set_info(await backend.identify())
                    app.backends[side] = backend
                    app.config.pids[side] = app.config.launched[side].pid or 0
                    pane.set_state("streaming")
                    yield backend
            finally:
                self.alone_open = None
                app.config.pids.pop(side, None)
                pane.set_state("done", "one at a time: stopped")

        return opened()

    # -- launching a profile's pair -----------------------------------------------------------------
    def launch(self, profile, comparison) -> None:
        """Start a comparison's two servers (bound to 127.0.0.1 unless the profile says otherwise)."""
        app = self.app
        try:
            # the memory plan first (run.pair): explicit shares where both fit, one at a time where they do not
            pair = LaunchedPair.from_profile(
                profile, comparison, say=lambda line: app.notify(line, severity="warning", timeout=12)
            )
        except InputError as exc:  # the two do not fit even one at a time
            app.notify(exc.one_line(), severity="error", timeout=15)
            return
        except Exception as exc:
            app.notify(describe(exc), severity="error", timeout=12)
            return
        base, cand = pair.servers["baseline"], pair.servers["candidate"]
        app.workers.cancel_group(app, "run")
        if self.launcher is not None:
            self.launcher.stop_all()
        app.config.profile = profile.name
        app.config.launched = {"baseline": base, "candidate": cand}
        for side, server in app.config.launched.items():
            pane = app.pane(side)
            pane.url = server.url
            pane.info = None
            pane.border_title = f"{side} · {server.url}"
            pane.set_state("starting", f"{profile.name} · {comparison.title}")
        app.apply_launch_notes()
        app.config.one_at_a_time = pair.alone is not None
        if pair.alone is not None:
            self.alone_why = pair.alone
            app.notify(f"{comparison.title}: {pair.plan.reason}; one server at a time", timeout=12)
            self.wait_alone()
            return
        app.run_worker(self._start_servers, thread=True, group="launch", exclusive=True, exit_on_error=False)

    def _start_servers(self) -> None:
        """Both launched servers up together (run.pair), each pane showing its way to /health; a failure
        says which side on its pane and opens the logs."""
        app = self.app
        servers = app.config.launched
        self.launcher = launcher = self.pair().launcher()  # kept first: stop() reaches a pair still starting
        try:
            launcher.start_all(on_progress=self.show_progress)
        except Exception as exc:
            msg = describe(exc)
            for side, server in servers.items():
                failed = server.exited() is not None or server.name in msg
                app.call_from_thread(app.pane(side).set_state, "failed" if failed else "stopped", msg if failed else "")
            app.call_from_thread(self.show_logs_now)
            return
        app.call_from_thread(self._servers_ready)

    def _servers_ready(self) -> None:
        app = self.app
        app.backends = {s: self.make_backend(app.config.launched[s].url) for s in SIDES}
        app.config.pids = {s: app.config.launched[s].pid for s in SIDES}
        self.connect_all()

    def stop(self) -> None:
        if self.launcher is not None:
            self.launcher.stop_all()  # only the servers this app started

    # -- logs ---------------------------------------------------------------------------------------
    def show_logs_now(self) -> None:
        self.app.q(ServerLogs).display = True
        self.refresh_logs()

    def toggle_logs(self) -> None:
        logs = self.app.q(ServerLogs)
        logs.display = not logs.display
        if logs.display and not self.app.config.launched:
            logs.show({}, {})
        self.refresh_logs()

    def refresh_logs(self) -> None:
        launched = self.app.config.launched
        try:
            logs = self.app.q(ServerLogs)
        except NoMatches:
            return
        if not logs.display:
            return
        logs.show(
            {side: server.tail(6) for side, server in launched.items()},
            {side: server.exited() for side, server in launched.items()},
        )

    # -- live panel ---------------------------------------------------------------------------------
    def start_probes(self) -> None:
        self.app.run_worker(self._probe_loop, thread=True, group="probe", exit_on_error=False)

    def _probe_loop(self) -> None:
        """Blocking NVML and psutil calls, in a thread; posts one sample a second."""
        app = self.app
        me = get_current_worker()
        app.config.host_probe()  # prime psutil's CPU percent
        while not me.is_cancelled:
            if app.replaying:  # the replay shows the recorded samples instead
                time.sleep(0.2)
                continue
            gpus = app.gpu_probe.sample()
            host = app.config.host_probe()
            procs = self.proc_probe.sample(app.config.pids, {s: b.url for s, b in app.backends.items()})
            app.post_message(ProbeSampled(gpus, host, procs, app.gpu_probe.error))
            for _ in range(int(app.config.probe_interval * 10)):
                if me.is_cancelled:
                    return
                time.sleep(0.1)

    async def poll_kv(self) -> None:
        app = self.app
        if app.config.one_at_a_time:
            # the side up alone keeps to one connection: a second one, idle between polls, is one that
            # llama-server (5 s keep-alive) may close just as the client's pool (oldest first) reuses it,
            # failing a prompt with "cannot write request body" (seen in a one-at-a-time prove)
            return
        for side, backend in app.backends.items():
            try:
                if app.pane(side).info is None:
                    continue
            except NoMatches:
                return
            try:  # asyncio.timeout, not wait_for: 3.11's wait_for returns the result of a poll that ends as the
                # quit cancels this timer, losing the cancel; the timer then ticks on and the quit awaits it for ever
                async with asyncio.timeout(0.8):
                    self.kv[side] = await backend.kv_usage()
            except Exception:
                self.kv[side] = None
