"""Profiles and themes load; the launcher starts, watches and always stops real llama-server processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from spectui.core.errors import InputError, ServerError
from spectui.machine.launcher import EarlyExit, Launcher, ServerProcess, llama_server_argv
from spectui.store.profiles import (
    Hardware,
    detect,
    fits,
    load_profiles,
    parse_profile,
    preselect,
    resolve_argv,
    servers_for,
)
from tests.fakes import FakeNVML
from tests.pilot import until

GIB = 1024**3


def test_every_bundled_profile_loads_and_validates():
    profiles, problems = load_profiles()
    assert not problems, problems
    assert {"cpu-demo", "s-nvidia", "n-nvidia", "x-gpu", "m-apple"} <= set(profiles)
    backends = {c.candidate.backend for p in profiles.values() for c in p.comparisons}
    assert backends >= {"llama.cpp", "vllm", "sglang"}
    kinds = {c.kind for p in profiles.values() for c in p.comparisons}
    assert kinds == {"speculation", "prefix-cache", "kv-cache"}
    flags = " ".join(" ".join(c.candidate.argv + c.baseline.argv) for p in profiles.values() for c in p.comparisons)
    for flag in (
        "-md",
        "--spec-type",
        "-ctk",
        "--cache-prompt",
        "--speculative-config",
        "--kv-cache-dtype",
        "--enable-prefix-caching",
        "--speculative-algorithm",
        "--disable-radix-cache",
        "eagle3",
    ):
        assert flag in flags, flag


def test_hardware_fit_and_preselection():
    profiles, _ = load_profiles()
    big = Hardware("nvidia", [("RTX 4090", 24 * GIB)], 64 * GIB)
    small = Hardware("nvidia", [("RTX 3060", 12 * GIB)], 32 * GIB)
    cpu = Hardware("none", [], 24 * GIB)
    mac = Hardware("apple", [], 32 * GIB)
    # s-nvidia and n-nvidia ask for the same hardware (NVIDIA, 24 GB GPU, 16 GB RAM): both fit, and the
    # tie goes to the first loaded, file names sorted (store/profiles.py load_profiles)
    assert fits(profiles["s-nvidia"], big)[0] and fits(profiles["n-nvidia"], big)[0]
    assert preselect(profiles, big).name == "n-nvidia"
    assert preselect(profiles, small).name == "x-gpu"
    ok, why = fits(profiles["s-nvidia"], small)
    assert not ok and "24 GB" in why and "12.0 GB" in why
    assert preselect(profiles, cpu).name == "cpu-demo"
    assert preselect(profiles, mac).name == "m-apple"
    assert not fits(profiles["m-apple"], cpu)[0]


def test_detect_with_a_fake_nvidia_gpu():
    from spectui.machine.probes import GPUProbe

    hw = detect(GPUProbe(FakeNVML()))
    assert hw.gpu_vendor == "nvidia" and hw.gpus[0][1] == 24 * GIB


def test_profile_errors_name_file_line_and_key(tmp_path):
    with pytest.raises(InputError, match=r"bad\.toml.*line 1"):
        parse_profile("name = \n", "bad.toml")
    text = (
        'name = "x"\n[[comparison]]\nid = "a"\nbaseline = { backend = "llama.cpp", argv = "llama-server -m m" }\n'
        'candidate = { backend = "llama.cpp", argv = ["llama-server"] }\n'
    )
    with pytest.raises(InputError) as exc:
        parse_profile(text, "p.toml")
    assert (
        "p.toml" in str(exc.value)
        and "comparison[1].baseline.argv" in str(exc.value)
        and "shell string" in str(exc.value)
    )
    warn = parse_profile(
        'name = "x"\ncolour = 1\n[[comparison]]\nid = "a"\nbaseline = { backend = "vllm", argv = ["v"] }\n'
        'candidate = { backend = "vllm", argv = ["v"] }\n',
        "w.toml",
    )
    assert any("unknown key 'colour'" in w for w in warn.warnings)


def test_missing_model_names_the_variable_to_set(monkeypatch):
    profiles, _ = load_profiles()
    p = profiles["x-gpu"]
    monkeypatch.delenv("SPECTUI_LAB_GGUF", raising=False)
    with pytest.raises(InputError) as exc:
        resolve_argv(p, p.comparison("llama-draft").candidate, "127.0.0.1", 8080, values={"llama_server": "/x"})
    assert "SPECTUI_LAB_GGUF" in exc.value.one_line()
    monkeypatch.setenv("SPECTUI_LAB_GGUF", "/nonexistent/model.gguf")
    monkeypatch.setenv("SPECTUI_LAB_DRAFT_GGUF", "/nonexistent/draft.gguf")
    with pytest.raises(InputError, match="does not exist"):
        resolve_argv(p, p.comparison("llama-draft").candidate, "127.0.0.1", 8080, values={"llama_server": "/x"})


def test_user_profiles_override_bundled(tmp_path):
    from spectui.store.locations import resource_dir

    (tmp_path / "mine.toml").write_text(
        'name = "cpu-demo"\ndescription = "mine"\n[[comparison]]\nid = "a"\n'
        'baseline = { backend = "llama.cpp", argv = ["x"] }\ncandidate = { backend = "llama.cpp", argv = ["x"] }\n'
    )
    (tmp_path / "broken.toml").write_text("[[[")
    profiles, problems = load_profiles([resource_dir("profiles"), tmp_path])
    assert profiles["cpu-demo"].description == "mine"
    assert any("broken.toml" in p for p in problems)


def test_launched_servers_bind_to_loopback_on_free_ports(assets_found):
    profiles, _ = load_profiles()
    base, cand = servers_for(profiles["cpu-demo"], profiles["cpu-demo"].comparison("draft"))
    assert base.host == cand.host == "127.0.0.1" and base.port != cand.port
    assert base.argv[base.argv.index("--host") + 1] == "127.0.0.1"


@pytest.mark.server
def test_doctor_finds_the_built_server_and_the_models(llama_servers, assets_found, capsys):
    """`spectui doctor --json` on this machine: the build it names is the one a running server reports."""
    import json

    import httpx

    from spectui.cli.main import main

    assert main(["doctor", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["llama_server"] == str(assets_found.llama_server)
    assert doc["llama_server_build"] == httpx.get(llama_servers["baseline"] + "/props").json()["build_info"]
    assert doc["model"] == str(assets_found.model) and doc["draft_model"] == str(assets_found.draft_model)


@pytest.mark.server
def test_start_health_logs_and_stop(assets_found):
    with Launcher() as launcher:
        s = launcher.add(ServerProcess("baseline", []))
        s.argv = llama_server_argv(assets_found.llama_server, assets_found.model, s.port)
        launcher.start_all()
        assert s.exited() is None

        # the log is read by a thread: under load /health can answer before it has taken the line in
        def listening():
            return any("listening" in line or "HTTP server" in line for line in s.log)

        deadline = time.monotonic() + 30
        while not listening() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert listening()
        pid = s.pid
        conns = [c for c in psutil.Process(pid).net_connections() if c.status == psutil.CONN_LISTEN]
        assert conns and all(c.laddr.ip == "127.0.0.1" for c in conns)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.server
def test_early_exit_from_a_bad_flag_shows_the_last_log_lines(assets_found):
    launcher = Launcher()
    s = launcher.add(ServerProcess("candidate", []))
    s.argv = llama_server_argv(assets_found.llama_server, assets_found.model, s.port, extra=["--no-such-flag"])
    with pytest.raises(EarlyExit) as exc:
        launcher.start_all(timeout=30)
    assert "exited with status" in str(exc.value) and "no-such-flag" in str(exc.value)


@pytest.mark.server
def test_port_in_use_names_the_holder(llama_servers, assets_found):
    port = int(llama_servers["baseline"].rsplit(":", 1)[1])
    s = ServerProcess("baseline", llama_server_argv(assets_found.llama_server, assets_found.model, port), port=port)
    with pytest.raises(ServerError) as exc:
        s.start()
    assert f"port {port}" in str(exc.value) and "in use" in str(exc.value)
    # the holder is the fixture's own baseline server, whose PID the launcher knows independently
    assert f"by PID {llama_servers['_procs']['baseline'].pid}" in str(exc.value)


def _demo_process():
    env = {**os.environ}
    return subprocess.Popen(
        [sys.executable, "-m", "spectui", "demo", "--headless"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=Path(__file__).parent.parent.parent,
    )


def _children_servers(pid):
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if "llama-server" in p.name()]
    except psutil.NoSuchProcess:
        return []


def _wait_servers(proc, n=2, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kids = _children_servers(proc.pid)
        if len(kids) >= n:
            return kids
        time.sleep(0.1)
    raise AssertionError("demo did not start its servers")


def _gone(procs, timeout=60):  # an upper bound: stopping takes a few seconds, more on a loaded machine
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not alive:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.server
@pytest.mark.parametrize("how", ["sigint", "sigterm", "sigkill"])
def test_no_orphan_servers_when_spectui_is_interrupted_or_killed(assets_found, how):
    proc = _demo_process()
    try:
        kids = _wait_servers(proc)
        sig = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM, "sigkill": signal.SIGKILL}[how]
        proc.send_signal(sig)
        proc.wait(timeout=60)
        assert _gone(kids), f"servers left running after {how}"
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.server
async def test_the_app_launches_a_pair_reaches_identical_and_leaves_no_server_when_it_quits(assets_found):
    """The TUI's own launch (what Ctrl+K does): nothing but the app stops these servers, so they must be
    gone as soon as it quits."""
    from spectui.cli.demo import DEMO_PROMPT
    from spectui.core.types import GenerationParams
    from spectui.machine.probes import GPUProbe
    from spectui.store.profiles import load_profiles
    from spectui.tui.app import AppConfig, make_app

    profile = load_profiles()[0]["cpu-demo"]
    app = make_app(
        AppConfig(
            "not started",
            "not started",
            # 24 tokens: the demo prompt drafts within its first steps (the draft's CPU a token is ~3.7× the
            # baseline's at the profile's n-max 8; what is tested is the launch, the verdict and the exit)
            params=GenerationParams(max_tokens=24, cache_prompt=False),
            initial_prompt=DEMO_PROMPT,
            autorun=True,
            autosave=False,
            gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
        )
    )
    async with app.run_test(size=(160, 50)) as pilot:
        app.compare.launch(profile, profile.comparison("draft"))
        await until(pilot, lambda: app.results and app.run_done.is_set(), timeout=300, what="the launched pair's run")
        assert app.results[0].identical is True
        assert "IDENTICAL" in str(app.q("#banner").render())
        assert app.results[0].candidate.figures.drafted > 0
        procs = [psutil.Process(s.pid) for s in app.servers.launched.values()]
        assert len(procs) == 2 and all(p.is_running() for p in procs)
        await pilot.press("ctrl+q")
    try:
        assert _gone(procs), "the app left its servers running"
    finally:  # never leave a server behind, even when the assertion fails
        for p in procs:
            if p.is_running():
                p.kill()


async def test_theme_switch_is_remembered_and_user_themes_load(tmp_path, monkeypatch):
    from spectui.backends.recorded import ReplayBackend
    from spectui.core.types import GenerationParams
    from spectui.machine.probes import GPUProbe
    from spectui.store.config import load
    from spectui.store.locations import config_dir
    from spectui.tui.app import AppConfig, make_app

    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path / "cfg"))  # remembered settings stay in this test
    themes = config_dir() / "themes"
    themes.mkdir(parents=True, exist_ok=True)
    (themes / "mine.toml").write_text(
        'name = "my-theme"\n[colors]\nprimary = "#ff00ff"\n[spectui]\naccepted = "#00ff00"\n'
    )
    (themes / "broken.toml").write_text("name = [\n")

    def make():
        return make_app(
            AppConfig(
                "replay://b",
                "replay://c",
                params=GenerationParams(),
                autosave=False,
                backend_factory=lambda url, client: ReplayBackend(url, []),
                gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
            )
        )

    app = make()
    async with app.run_test() as pilot:
        assert "my-theme" in app.available_themes
        app.theme = "spectui-light"
        await pilot.pause()
    assert load()[0]["theme"] == "spectui-light"
    app = make()
    async with app.run_test() as pilot:
        await pilot.pause()
        assert app.theme == "spectui-light"
        app.theme = "my-theme"
        await pilot.pause()
        assert app.pane("candidate").view.marks["accepted"] == "#00ff00"


@pytest.mark.server
def test_setup_finds_everything_in_the_cache_and_says_where(assets_found, capsys):
    from spectui.cli.main import main

    assert main(["setup"]) == 0
    out = capsys.readouterr().out
    assert f"llama-server  {assets_found.llama_server}" in out
    assert f"model         {assets_found.model}" in out and f"draft model   {assets_found.draft_model}" in out


@pytest.mark.server
def test_demo_headless_with_the_ngram_candidate(assets_found, capsys):
    """`spectui demo --headless --candidate ngram`: the cpu-demo pair launched, compared, reported, and stopped."""
    from spectui.cli.main import main

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    code = main(["demo", "--headless", "--candidate", "ngram"])
    out = capsys.readouterr().out
    assert code == 0 and "identical" in out  # n-gram speculation verifies every draft: the same bytes
    assert "ngram-simple" in out and "speed-up" in out
    line = next(x for x in out.splitlines() if "speed-up" in x and "×" in x)
    assert "accepted" in line or "drafted nothing" in line or "no drafts" in line
    after = {p.pid for p in psutil.Process().children(recursive=True) if p.is_running()}
    assert not (after - before), "the demo left a server running"
