"""The guard that keeps tests/unit and tests/contract server-free (tests/README.md).

A test there fails when it asks for a fixture that starts real servers, launches a server through
spectui's launcher, or runs a llama.cpp or vLLM program at all (even `llama-server --version`: a test
that needs the built binary belongs in tests/real). Scripted servers inside the test process (a socket
on 127.0.0.1 answering from a thread, httpx.MockTransport) are allowed: they need nothing built.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

# fixtures of tests/conftest.py and tests/real that start servers or need the built llama.cpp assets
SERVER_FIXTURES = frozenset(
    {"llama_servers", "assets_found", "assets_found_module", "vllm_pair", "vllm_servers", "four_slot_servers"}
)


def server_program(argv) -> str | None:
    """What a command line would start that needs a real server program, or None."""
    if isinstance(argv, (str, bytes, os.PathLike)):
        argv = [argv]
    args = [os.fsdecode(a) for a in argv]
    if not args:
        return None
    name = Path(args[0]).name
    if name.startswith("llama-") and not _is_script(args[0]):
        return f"{name} (a built llama.cpp program)"
    joined = " ".join(args)
    for module in ("vllm.entrypoints", "sglang.launch_server"):
        if module in joined:
            return module
    if "-m" in args and "spectui" in args and {"demo", "serve"} & set(args):
        return "spectui demo/serve (launches servers)"
    return None


def _is_script(path: str) -> bool:
    """A stub a test wrote (a '#!' script), not the built binary."""
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == b"#!"
    except OSError:
        return False


def check_fixtures(item: pytest.Item) -> None:
    used = sorted(SERVER_FIXTURES & set(getattr(item, "fixturenames", ())))
    if used:
        pytest.fail(
            f"{item.nodeid} asks for {', '.join(used)}, which start or need real servers: "
            "unit and contract tests are server-free (move it to tests/real)",
            pytrace=False,
        )


@pytest.fixture
def no_servers(monkeypatch, request):
    """Fail the test if it starts a server program or launches one through spectui's launcher."""
    started: list[str] = []
    real_popen = subprocess.Popen

    class GuardedPopen(real_popen):  # subprocess.run, asyncio's subprocesses and the launcher all come here
        def __init__(self, args, *a, **k):
            what = server_program(args)
            if what:
                started.append(what)
                raise RuntimeError(f"unit tests are server-free: this test started {what}")
            super().__init__(args, *a, **k)

    monkeypatch.setattr(subprocess, "Popen", GuardedPopen)

    from spectui.machine.launcher import ServerProcess

    def refuse(self, *a, **k):
        started.append(f"the launcher ({self.name})")
        raise RuntimeError(f"unit tests are server-free: this test launched {self.name}")

    monkeypatch.setattr(ServerProcess, "start", refuse)
    yield started
    if started:  # raised inside the product, an error may have been caught: fail here regardless
        pytest.fail(f"unit tests are server-free, but this test started: {'; '.join(started)}", pytrace=False)
