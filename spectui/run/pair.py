"""A profile's pair of servers, planned once and brought up for a block: both together, or one side at a
time where asked or where the memory plan (labs.memory.plan) says the two do not fit on the GPU together.
`LaunchedPair.session(…)` gives the run that fits — a RunSession on both servers, or a PhasedRun that
starts each side alone — so a driver does not branch on how its servers run."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from spectui.core.errors import InputError
from spectui.core.runner import PromptResult, connect
from spectui.core.types import SIDES, Prompt, ServerInfo
from spectui.run.alone import ASKED, OneAtATime
from spectui.run.session import RunSession

# a server's way up, as machine.launcher's wait_healthy reports it: (server name, state, seconds left); called
# from the thread that starts the servers
Progress = Callable[[str, str, float], None]


@dataclass(frozen=True)
class LaunchedPair:
    """The comparison's two servers (127.0.0.1, free ports) and why they run one at a time (None: together)."""

    name: str  # "profile/comparison [title]", for the lines a driver prints
    title: str
    servers: dict[str, Any]  # side → machine.launcher.ManagedServer
    alone: OneAtATime | None
    plan: Any  # labs.memory.plan.PairPlan

    @classmethod
    def plan_for(
        cls,
        profile: str | None,
        comparison: str | None,
        one_at_a_time: bool = False,
        say: Callable[[str], None] | None = None,
    ) -> LaunchedPair:
        """The profile's comparison (default: profile cpu-demo, its first comparison) through the memory
        plan; a pair that cannot fit is one InputError, a pair with no plan is said and launched as written."""
        from spectui.store.profiles import load_profiles  # lazy: httpx (~127 ms cold), not before the TUI's first frame

        profiles, _ = load_profiles()
        name = profile or "cpu-demo"
        if name not in profiles:
            raise InputError(f"no profile named {name!r}", hint="spectui profiles list")
        prof = profiles[name]
        comp = prof.comparison(comparison) if comparison else prof.comparisons[0]
        return cls.from_profile(prof, comp, one_at_a_time, say)

    @classmethod
    def from_profile(
        cls, profile, comparison, one_at_a_time: bool = False, say: Callable[[str], None] | None = None
    ) -> LaunchedPair:
        """A loaded profile's comparison through the memory plan (plan_for once the names are read)."""
        from spectui.labs.memory.plan import plan_pair  # lazy: httpx (~127 ms cold), not before the TUI's first frame
        from spectui.store.profiles import servers_for  # lazy: httpx (~127 ms cold), not before the TUI's first frame

        plan = plan_pair(profile, comparison)
        where = f"{profile.name}/{comparison.id}"
        if plan.decision == "too-big":
            raise InputError(f"{where}: {plan.reason}", hint="spectui profiles check " + profile.name)
        if plan.decision == "unknown" and say is not None:  # launched as the profile says, engines' own defaults
            say(f"{where}: no memory plan ({plan.reason})")
        alone = None
        if one_at_a_time:
            alone = ASKED
        elif plan.one_at_a_time:
            alone = OneAtATime(None, f"the memory plan: {plan.reason}")
        base, cand = servers_for(profile, comparison, shares=plan.shares or None)
        servers = {"baseline": base, "candidate": cand}
        return cls(f"{where} [{comparison.title}]", comparison.title, servers, alone, plan)

    def urls(self) -> tuple[str, str]:
        return self.servers["baseline"].url, self.servers["candidate"].url

    def launcher(self):
        """Both servers in a machine.launcher.Launcher, not started: `start_all(on_progress=…)` brings them up
        and waits for /health (blocking: a thread's work), `stop_all()` stops them by their PIDs. The TUI keeps
        it to stop the pair when the app quits or launches another; `up` is the same for one block."""
        from spectui.machine.launcher import Launcher  # lazy: httpx (~127 ms cold), not before the TUI's first frame

        launcher = Launcher()
        for s in self.servers.values():
            launcher.add(s)
        return launcher

    @asynccontextmanager
    async def up(
        self, say: Callable[[str], None] | None = None, on_progress: Progress | None = None
    ) -> AsyncIterator[tuple[str, str]]:
        """Both servers started for the block (their URLs), stopped by their PIDs after it."""
        launcher = self.launcher()
        if say is not None:
            say(f"starting [{self.title}] on {self.servers['baseline'].url} and {self.servers['candidate'].url}")
        try:
            await asyncio.to_thread(launcher.start_all, None, on_progress)
            yield self.urls()
        finally:
            await asyncio.to_thread(launcher.stop_all)

    def side(
        self,
        side: str,
        client,
        api_key: str | None = None,
        ready_timeout: float = 120.0,
        *,
        connect: Callable[[str], Awaitable[Any]] | None = None,
        on_progress: Progress | None = None,
    ):
        """One side alone for the block: started, detected, waited for; the backend; stopped after.
        `connect(url)` → a ready backend, where the driver makes its own (the TUI: its backend factory)."""
        return OneSide(self.servers[side], client, api_key, ready_timeout, connect=connect, on_progress=on_progress)

    @asynccontextmanager
    async def session(
        self,
        params,
        options,
        *,
        client,
        api_key: str | None = None,
        ready_timeout: float = 120.0,
        connect: Callable[[str, str], Awaitable[tuple[dict, dict]]] | None = None,
        say: Callable[[str], None] | None = None,
        **run_kw,
    ) -> AsyncIterator[Run]:
        """The run for this pair, for the block: a PhasedRun starting each side alone, or a RunSession on
        both servers up together (connected by `connect(baseline_url, candidate_url)` → (backends, infos)
        where the driver shows its own waiting, else quietly). `run_kw`: writer, emit, machine …, each
        passed to the run that takes it."""
        from spectui.run.phased import PhasedRun  # lazy: run.phased (~7 ms), not before the TUI's first frame

        if self.alone is not None:
            phased_kw = {k: v for k, v in run_kw.items() if k in ("writer", "emit", "on_stream", "recorders")}
            yield PhasedRun(
                lambda side: self.side(side, client, api_key, ready_timeout),
                params,
                options.repeat,
                say=say,
                **phased_kw,
            )
            return
        async with self.up(say) as (b, c):
            if connect is not None:
                backends, _ = await connect(b, c)
            else:
                kinds = {s: getattr(self.servers.get(s), "backend", None) or "auto" for s in SIDES}
                backends = {
                    s: await _connect(u, kinds[s], client, api_key, ready_timeout) for s, u in zip(SIDES, (b, c))
                }
            yield RunSession(backends["baseline"], backends["candidate"], params, options, client=client, **run_kw)


@dataclass(frozen=True)
class GivenPair:
    """Two servers the user runs, given by URL: nothing is started or stopped, both are up together."""

    baseline: str
    candidate: str
    alone: None = None
    servers = {}  # type: ignore[var-annotated]  # none launched: each side's kind is detected

    def urls(self) -> tuple[str, str]:
        return self.baseline, self.candidate

    @asynccontextmanager
    async def up(self, say: Callable[[str], None] | None = None) -> AsyncIterator[tuple[str, str]]:
        yield self.urls()

    session = LaunchedPair.session


class Run(Protocol):
    """What `session(…)` yields, both up together (run.session.RunSession) or one at a time
    (run.phased.PhasedRun): a driver runs it and reports it the one way."""

    @property
    def order(self) -> str: ...  # the order its report states

    async def run(self, prompts: list[Prompt]) -> list[PromptResult]: ...

    def infos(self) -> dict[str, ServerInfo]: ...


def infos_of(run: Run, urls: dict[str, str]) -> dict[str, ServerInfo]:
    """Both sides' identities after a run (a side never reached: its URL only)."""
    known = run.infos()
    return {s: known.get(s) or ServerInfo(urls[s]) for s in SIDES}


async def _connect(url: str, kind: str, client, api_key: str | None, ready_timeout: float):
    from spectui.backends.detect import resolve  # lazy: httpx (~127 ms cold), not before the TUI's first frame

    backend, _ = await resolve(kind, url, client, api_key)
    await connect(backend, ready_timeout)
    return backend


class OneSide:
    """An async context: one launched server up (started, connected) for the block, stopped after."""

    def __init__(
        self,
        server,
        client,
        api_key: str | None,
        ready_timeout: float,
        *,
        connect: Callable[[str], Awaitable[Any]] | None = None,
        on_progress: Progress | None = None,
    ) -> None:
        self.server, self.client, self.api_key, self.ready_timeout = server, client, api_key, ready_timeout
        from spectui.machine.launcher import Launcher  # lazy: httpx with it, after the TUI's first frame

        self.connect, self.on_progress = connect, on_progress
        # made here, so a driver can keep it before the server starts (the TUI stops it when it quits)
        self.launcher = Launcher()

    async def __aenter__(self):
        self.launcher.add(self.server)
        try:
            await asyncio.to_thread(self.launcher.start_all, None, self.on_progress)
            if self.connect is not None:
                return await self.connect(self.server.url)
            return await _connect(
                self.server.url, self.server.backend or "auto", self.client, self.api_key, self.ready_timeout
            )
        except BaseException:
            await asyncio.to_thread(self.launcher.stop_all)
            raise

    async def __aexit__(self, *exc):
        await asyncio.to_thread(self.launcher.stop_all)
        return False
