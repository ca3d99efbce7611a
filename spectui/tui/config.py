"""Everything from outside the TUI, injected in one place: the CLI, the tests, replay and the benchmarks
build the app from one AppConfig (posting's make_posting). It is frozen: what changes while the app runs (the
generation parameters, the order, a launched pair, the backends) is the comparison screen's state
(tui.screens.compare), which starts from these values."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spectui.core.types import GenerationParams
from spectui.machine.probes import GPUProbe, host_sample

if TYPE_CHECKING:  # for the annotations only: the app's first frame does not wait for httpx
    import httpx

    from spectui.backends.base import Backend
    from spectui.store.replay import ReplayControl


@dataclass(frozen=True)
class AppConfig:
    """Everything from outside the app, injected in one place (CLI, tests, replay and bench alike)."""

    baseline_url: str
    candidate_url: str
    prompt_set: str = "default"
    params: GenerationParams = field(default_factory=GenerationParams)
    order: str = "sequential"
    backend_factory: Callable[[str, httpx.AsyncClient], Backend] | None = None
    gpu_probe: GPUProbe | None = None
    pids: dict[str, int] = field(default_factory=dict)  # local server processes, by side
    ready_timeout: float = 120.0
    probe_interval: float = 1.0
    host_probe: Callable[[], object] = host_sample
    initial_prompt: str | None = None
    autorun: bool = False
    prompts: list | None = None  # a fixed prompt list (replay) instead of a prompt set
    autorun_all: bool = False
    # once both servers are up, open this lab and run it (the prefix demo: the cache lab)
    autorun_lab: str | None = None
    title: str | None = None
    backends: dict | None = None  # ready-made backends by side (replay), instead of backend_factory
    replay_control: ReplayControl | None = None  # when replaying
    autosave: bool = True  # record every run into session_dir
    session_dir: object | None = None  # default: the user data dir's sessions/
    notebook: str | None = None  # notebook path (None: $SPECTUI_NOTEBOOK or the default)
    auto_notebook: bool = False
    launched: dict = field(default_factory=dict)  # side → ServerProcess, for servers spectui started
    profile: str | None = None  # the hardware profile in use (recorded in the notebook)
    pick_profile: bool = False  # open the profile picker on start
    backend_kind: str = "auto"
    api_key: str | None = None  # from the environment variable the user named; never written anywhere
    # launched servers run one at a time (the memory plan says both do not fit): each is started when a
    # run needs it and stopped after; the baseline pane plays its recording beside the live candidate
    one_at_a_time: bool = False
    triage: bool = True  # when outputs differ, rerun and ask for log-probabilities to say why
