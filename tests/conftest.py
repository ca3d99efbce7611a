"""Fixtures that start real llama-server processes (SmolLM2, 1 thread each) on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from spectui.machine import assets
from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv

# generated examples are judged on what they find, never on how fast a loaded machine makes or runs them
# (a test's own @settings keeps these unless it names the same field)
settings.register_profile("spectui", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("spectui")

# draft-simple (up to 4 drafts a step here: at 8, FACTS' setting, a draft candidate's CPU a token is 3.7x the
# baseline's, at 4 2.9x), ngram-simple 3/8, and a q4_0 KV cache that diverges
DRAFT_N_MAX = 4
# two raw prompts an n-gram draft copies from its first steps on (the one-at-a-time and prove tests)
COPYING = Path(__file__).resolve().parent / "data" / "copying.toml"
CANDIDATES = {
    "baseline": [],
    "draft": ["--spec-type", "draft-simple", "--spec-draft-n-max", str(DRAFT_N_MAX)],
    "ngram": ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", "8"],
    "kvq4": ["-ctk", "q4_0", "-ctv", "q4_0", "-fa", "on"],
}


def _need_assets() -> assets.Assets:
    found = assets.find_all()
    if not (found.llama_server and found.model and found.draft_model):
        pytest.fail("llama-server, SmolLM2 or its draft missing: run `make test` (it runs `spectui setup`)")
    return found


def server_spec(name: str, found: assets.Assets, extra=()) -> ServerProcess:
    args = list(CANDIDATES[name])
    if name == "draft":
        args = ["-md", str(found.draft_model), *args]
    return ServerProcess(name, llama_server_argv(found.llama_server, found.model, 0, extra=[*args, *extra]))


def wait_idle(*urls: str, timeout: float = 120.0) -> None:
    """Wait until no slot of these llama-servers is generating: a request another test left running on a
    shared server would move the /metrics counters a cross-check reads before and after its own run."""
    import time

    import httpx

    deadline = time.monotonic() + timeout
    while any(s.get("is_processing") for u in urls for s in httpx.get(u + "/slots", timeout=30).json()):
        if time.monotonic() > deadline:
            raise AssertionError(f"a server in {urls} was still generating after {timeout:.0f} s")
        time.sleep(0.1)  # polling the condition, not a fixed wait


# Under pytest-xdist (`make test` runs two workers, `--dist loadfile`: a file's tests, and so its module-scoped
# servers, stay on one worker) files are handed out in collection order; the longest ones first keeps one worker
# from finishing alone on a long file while the other idles. The order is by measured time (`pytest
# --durations=0` on a quiet clean clone, 5 December 2026, each file's tests summed; docs/development.md); a file
# not named here keeps its place after them.
LONGEST_FIRST = (
    "real/test_vllm_real.py",
    "real/test_probe.py",
    "real/test_eagle3_train.py",
    "real/test_prove.py",
    "real/test_tui_labs_one_at_a_time.py",
    "tui/test_tui_real.py",
    "real/test_sampling.py",
    "real/test_triage.py",
    "real/test_prove_terms.py",
    "real/test_costs_real.py",
    "real/test_second_family.py",
    "real/test_lookup_draft.py",
    "real/test_browser.py",
    "real/test_sweep_theory.py",
    "real/test_prove_one_at_a_time.py",
    "real/test_drafts_lesson_real.py",
    "real/test_one_at_a_time.py",
    "real/test_lossy.py",
    "tui/test_newcomer_path.py",
    "unit/test_compare_options.py",
)
DIRECTORY_ORDER = ("real", "tui", "unit", "contract")


def pytest_configure(config):
    # pytest-xdist (3.8 here) re-sorts `--dist loadfile`'s files by their number of tests unless told not to
    # (`--loadscope-reorder` is its default), which left the longest files, most with one or a few tests (the
    # EAGLE-3 head), to the end of the run: keep the order below (as `--no-loadscope-reorder` would)
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    if not hasattr(config, "workerinput"):  # one process: the order pytest collected
        return

    def rank(item):
        rel = item.path.relative_to(config.rootpath / "tests").as_posix()
        if rel in LONGEST_FIRST:
            return (0, LONGEST_FIRST.index(rel))
        top = rel.split("/", 1)[0]
        return (1, DIRECTORY_ORDER.index(top) if top in DIRECTORY_ORDER else len(DIRECTORY_ORDER))

    items.sort(key=rank)  # stable: a file's own tests keep their order


@pytest.fixture(autouse=True, scope="session")
def _private_dirs(tmp_path_factory):
    """Tests never touch the user's settings, sessions or notebook."""
    import os

    base = tmp_path_factory.mktemp("home")
    # the user's own overrides must not reach the tests (assets are found through the shared cache)
    cleared = [k for k in os.environ if k.startswith("SPECTUI_LAB_")] + [
        "SPECTUI_NOTEBOOK",
        "SPECTUI_LLAMA_SERVER",
        "SPECTUI_MODEL",
        "SPECTUI_DRAFT_MODEL",
    ]
    old = {k: os.environ.get(k) for k in ("SPECTUI_CONFIG_DIR", "SPECTUI_DATA_DIR", *cleared)}
    os.environ["SPECTUI_CONFIG_DIR"] = str(base / "config")
    os.environ["SPECTUI_DATA_DIR"] = str(base / "data")
    for k in cleared:
        os.environ.pop(k, None)
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def llama_servers():
    """The four servers, started once for the whole run and stopped at its end."""
    found = _need_assets()
    launcher = Launcher()
    servers = {name: launcher.add(server_spec(name, found)) for name in CANDIDATES}
    for s in servers.values():
        s.argv[s.argv.index("--port") + 1] = str(s.port)
    launcher.start_all(timeout=120)
    yield {name: s.url for name, s in servers.items()} | {"_procs": servers}
    launcher.stop_all()
    for s in servers.values():
        assert s.exited() is not None, f"{s.name} still running"


@pytest.fixture
def assets_found():
    return _need_assets()


@pytest.fixture(autouse=True)
def _triage_causes_agree_with_their_evidence(monkeypatch):
    """Every triage cause the suite meets, in any test (CLI, TUI, prove, unit), agrees with the evidence printed
    beside it (tests.oracles.cause_contradictions). Collected and failed at the end of the test: a failure
    raised inside triage would be turned into a "triage stopped" line by the run."""
    import spectui.run.triage as tr
    from tests.oracles import cause_contradictions

    inner = tr._triage
    found: list[str] = []

    async def checked(baseline, candidate, result, params, threshold, *rest):
        t = await inner(baseline, candidate, result, params, threshold, *rest)
        if t is not None:
            found.extend(f"{t.cause}: {c}" for c in cause_contradictions(t, threshold))
        return t

    monkeypatch.setattr(tr, "_triage", checked)
    yield
    assert not found, found
