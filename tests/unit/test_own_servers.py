"""The live panel's processes: a server spectui did not launch is found by its port (PID, RSS, GPU memory
where NVML lists it), not "not a local process"."""

from __future__ import annotations

import os
import socket
from types import SimpleNamespace

from spectui.machine.probes import GPUProbe, SideProcesses, local_port
from tests.fakes import FakeNVML


class NVMLWithProcesses(FakeNVML):
    """FakeNVML plus the per-process lists NVML gives (usedGpuMemory in bytes, per GPU)."""

    def __init__(self, used_by: dict[int, int]) -> None:
        super().__init__()
        self.used_by = used_by

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in self.used_by.items()]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        return []


def test_local_port_only_for_this_machine():
    assert local_port("http://127.0.0.1:8080") == 8080
    assert local_port("http://localhost:9/v1") == 9
    assert local_port("http://10.1.2.3:8080") is None
    assert local_port("replay://baseline") is None
    assert local_port("http://[::1]:7") == 7


def test_a_server_listening_here_is_found_by_its_port_with_its_gpu_memory():
    with socket.socket() as s:  # this test's own process stands in for the user's llama-server
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        gpus = GPUProbe(nvml=NVMLWithProcesses({os.getpid(): 512 * 1024**2}))
        sides = SideProcesses(gpus=gpus)
        got = sides.sample({}, {"baseline": f"http://127.0.0.1:{port}", "candidate": "http://10.0.0.1:1"})
    assert set(got) == {"baseline"}  # the remote one is not a local process: no row
    p = got["baseline"]
    assert p.pid == os.getpid() and p.by_port and p.alive
    assert p.rss is not None and p.rss > 0
    assert p.gpu_memory == 512 * 1024**2


def test_a_launched_pid_wins_and_no_nvml_is_no_gpu_figure():
    sides = SideProcesses(gpus=GPUProbe(nvml=FakeNVML(fail_init=True)))
    got = sides.sample({"candidate": os.getpid()}, {"candidate": "http://127.0.0.1:1"})
    assert got["candidate"].pid == os.getpid() and not got["candidate"].by_port
    assert got["candidate"].gpu_memory is None


def test_a_port_nobody_listens_on_is_looked_up_again_only_after_the_retry():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: nothing found
        sides = SideProcesses(retry=5.0)
        now = [100.0]
        sides._clock = lambda: now[0]
        url = f"http://127.0.0.1:{port}"
        assert sides.sample({}, {"baseline": url}) == {}
        s.listen()
        now[0] += 1.0
        assert sides.sample({}, {"baseline": url}) == {}  # within the retry: not looked up again
        now[0] += 5.0
        assert sides.sample({}, {"baseline": url})["baseline"].pid == os.getpid()
