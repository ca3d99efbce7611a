"""GPU probing through a fake NVML (no NVIDIA GPU here), host and process probes, and `spectui doctor`."""

import json
import os

from spectui.machine.doctor import doctor_report
from spectui.machine.probes import GPUProbe, ProcessProbe, host_sample
from tests.fakes import FakeNVML


def test_gpu_probe_reads_memory_and_utilisation():
    nv = FakeNVML()
    probe = GPUProbe(nv)
    [g] = probe.sample()
    assert g.name == "NVIDIA GeForce RTX 4090" and g.memory_total == 24 * 1024**3 and g.utilisation == 37
    probe.close()
    assert nv.shutdowns == 1


def test_not_supported_is_missing_not_zero():
    [g] = GPUProbe(FakeNVML(util_supported=False)).sample()
    assert g.utilisation is None and g.memory_used == 6 * 1024**3


def test_no_driver_degrades_to_no_gpus_with_a_reason():
    probe = GPUProbe(FakeNVML(fail_init=True))
    assert probe.sample() == [] and not probe.available()
    assert "NVML" in probe.error


def test_real_pynvml_on_this_machine_does_not_crash():
    probe = GPUProbe()  # the real nvidia-ml-py: no GPU here, so no devices and a reason
    gpus = probe.sample()
    assert isinstance(gpus, list)
    if not gpus:
        assert probe.error


def test_host_and_process_samples():
    h = host_sample()
    assert h.memory_total > h.memory_used > 0 and h.cpu_count >= 1
    p = ProcessProbe().sample(os.getpid())
    assert p.alive and p.rss > 0
    gone = ProcessProbe().sample(2**22 + 12345)
    assert not gone.alive and gone.rss is None


def test_doctor_json_keys(capsys):
    r = doctor_report(GPUProbe(FakeNVML()))
    for key in ("llama_server", "llama_server_build", "model", "draft_model", "gpus", "host"):
        assert key in r
    assert r["gpus"][0]["memory_total"] == 24 * 1024**3
    from spectui.cli.main import main

    assert main(["doctor", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["llama_server"] and doc["llama_server_build"].startswith("b11434")
    assert doc["model"].endswith(".gguf") and doc["draft_model"].endswith(".gguf")
    assert doc["host"]["cpu_count"] >= 1
