"""run.pair: a profile's pair planned once, and the run that fits it — a PhasedRun where the servers run
one at a time, a RunSession on both where they run together — chosen here, not by each driver."""

from __future__ import annotations

import asyncio

import pytest

from spectui.core.errors import InputError
from spectui.core.types import GenerationParams
from spectui.run.pair import GivenPair, LaunchedPair, infos_of
from spectui.run.phased import PhasedRun
from spectui.run.session import RunOptions, RunSession


@pytest.mark.usefixtures("stand_in_assets")
def test_a_profiles_pair_is_two_local_servers_on_two_ports_and_says_why_it_runs_alone():
    together = LaunchedPair.plan_for("cpu-demo", None)
    alone = LaunchedPair.plan_for("cpu-demo", None, one_at_a_time=True)
    base, cand = together.servers["baseline"], together.servers["candidate"]
    assert base.url.startswith("http://127.0.0.1:") and cand.url.startswith("http://127.0.0.1:")
    assert base.url != cand.url
    assert together.alone is None  # the CPU demo's two small servers fit together
    assert alone.alone is not None and alone.alone.why == "asked for (--one-at-a-time)"
    assert together.name.startswith("cpu-demo/") and together.title in together.name


def test_an_unknown_profile_is_one_input_error():
    with pytest.raises(InputError, match="no profile named 'nope'"):
        LaunchedPair.plan_for("nope", None)


@pytest.mark.usefixtures("stand_in_assets")
def test_one_at_a_time_gives_a_phased_run_and_starts_nothing_until_it_runs():
    pair = LaunchedPair.plan_for("cpu-demo", None, one_at_a_time=True)
    options = RunOptions(repeat=2)

    async def go():
        async with pair.session(GenerationParams(), options, client=None) as run:
            return run

    run = asyncio.run(go())
    assert isinstance(run, PhasedRun) and run.repeat == 2 and run.launches == []
    assert run.order == "one-at-a-time"
    infos = infos_of(run, dict(zip(("baseline", "candidate"), pair.urls())))
    assert infos["baseline"].url == pair.servers["baseline"].url  # never reached: its URL only


def test_two_given_servers_give_a_run_session_on_what_connect_returned():
    seen = []

    class Side:
        def __init__(self, url):
            self.url, self.info = url, None

    async def connect(b, c):
        seen.append((b, c))
        return {"baseline": Side(b), "candidate": Side(c)}, {}

    options = RunOptions(order="concurrent")

    async def go():
        pair = GivenPair("http://127.0.0.1:1", "http://127.0.0.1:2")
        async with pair.session(GenerationParams(), options, client=None, connect=connect) as run:
            return run

    run = asyncio.run(go())
    assert seen == [("http://127.0.0.1:1", "http://127.0.0.1:2")]
    assert isinstance(run, RunSession) and run.baseline.url == "http://127.0.0.1:1"
    assert run.order == "concurrent"
