"""A memory plan's shares on real llama-servers: the argv flags a share adds are ones llama-server takes
(its context is the planned one), and servers with shares start one after the other, each healthy before
the next begins (SGLang and vLLM read the free memory when they start)."""

from __future__ import annotations

import httpx
import pytest

from spectui.machine.launcher import Launcher, MemoryShare, ServerProcess, apply_memory_share, llama_server_argv


@pytest.mark.server
def test_servers_with_shares_start_in_turn_with_the_planned_context(assets_found):
    events: list[str] = []
    share = MemoryShare(1.4, 0.06, gpu_layers=31, ctx=1024)  # SmolLM2-135M: 30 layers (+1, the output)
    with Launcher() as launcher:
        for side in ("baseline", "candidate"):
            s = launcher.add(ServerProcess(side, [], backend="llama.cpp", memory_share=share))
            argv = llama_server_argv(assets_found.llama_server, assets_found.model, s.port, ctx=2048)
            s.argv = apply_memory_share(argv, "llama.cpp", share)
            assert s.argv.count("-c") == 1 and s.argv[s.argv.index("-c") + 1] == "1024"

            def start(s=s, real=s.start):
                events.append(f"start {s.name}")
                real()

            def healthy(timeout, on_progress=None, s=s, real=s.wait_healthy):
                real(timeout, on_progress)
                events.append(f"healthy {s.name}")

            s.start, s.wait_healthy = start, healthy
        launcher.start_all(timeout=120)
        assert events == ["start baseline", "healthy baseline", "start candidate", "healthy candidate"]
        for s in launcher.servers:
            props = httpx.get(s.url + "/props", timeout=60).json()
            assert props["default_generation_settings"]["n_ctx"] == 1024, props.get("default_generation_settings")
    assert all(s.exited() is not None for s in launcher.servers)
