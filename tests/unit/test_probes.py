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


def _gpus_the_driver_lists() -> list[tuple[str, int]] | None:
    """(name, total MiB) per GPU as nvidia-smi reports it; [] where the machine has no NVIDIA device
    node; None where there are device nodes but no nvidia-smi to ask."""
    import glob
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")
    if smi:
        r = subprocess.run(
            [smi, "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"], capture_output=True, text=True
        )
        if r.returncode == 0:
            rows = [line.rsplit(",", 1) for line in r.stdout.splitlines() if line.strip()]
            return [(name.strip(), int(mib)) for name, mib in rows]
    return [] if not glob.glob("/dev/nvidia[0-9]*") else None


def test_real_pynvml_sees_what_the_driver_lists():
    """The real nvidia-ml-py against an independent witness: nvidia-smi, or the absence of any NVIDIA
    device node (then no GPUs and a reason, never a crash)."""
    import pytest

    probe = GPUProbe()
    gpus = probe.sample()
    listed = _gpus_the_driver_lists()
    if listed is None:
        pytest.skip("NVIDIA device nodes but no nvidia-smi to check NVML against")
    assert [g.name for g in gpus] == [name for name, _ in listed]
    assert [g.memory_total // 2**20 for g in gpus] == [mib for _, mib in listed]
    if not listed:
        assert probe.error and not probe.available()
    else:
        assert probe.error is None and all(g.memory_used is not None for g in gpus)


def test_host_and_process_samples():
    h = host_sample()
    assert h.memory_total > h.memory_used > 0 and h.cpu_count >= 1
    p = ProcessProbe().sample(os.getpid())
    assert p.alive and p.rss > 0
    gone = ProcessProbe().sample(2**22 + 12345)
    assert not gone.alive and gone.rss is None


def test_doctor_json_reports_what_it_found(capsys, tmp_path, monkeypatch):
    """Server-free: a stub llama-server that prints a b11434 --version line, and two model files."""
    from spectui.cli.main import main

    stub = tmp_path / "llama-server"
    stub.write_text("#!/bin/sh\necho 'version: 0.6.0-dev (build 11434, commit pypi)' >&2\n")
    stub.chmod(0o755)
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    (tmp_path / "d.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("SPECTUI_LLAMA_SERVER", str(stub))
    monkeypatch.setenv("SPECTUI_MODEL", str(tmp_path / "m.gguf"))
    monkeypatch.setenv("SPECTUI_DRAFT_MODEL", str(tmp_path / "d.gguf"))
    r = doctor_report(GPUProbe(FakeNVML()))
    assert r["gpus"][0]["memory_total"] == 24 * 1024**3 and r["gpus"][0]["name"] == "NVIDIA GeForce RTX 4090"
    assert r["gpu_note"] is None
    assert main(["doctor", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["llama_server"] == str(stub) and doc["llama_server_build"] == "b11434-pypi"  # "build N, commit C"
    assert doc["model"] == str(tmp_path / "m.gguf") and doc["draft_model"] == str(tmp_path / "d.gguf")
    assert doc["host"]["cpu_count"] == os.cpu_count()
    assert main(["doctor"]) == 0
    text = capsys.readouterr().out
    assert f"llama-server   {stub}" in text and "build        b11434-pypi" in text


def test_doctor_says_what_to_do_when_nothing_is_found(capsys, tmp_path, monkeypatch):
    from spectui.cli.main import main

    for var in ("SPECTUI_LLAMA_SERVER", "SPECTUI_MODEL", "SPECTUI_DRAFT_MODEL"):
        monkeypatch.setenv(var, str(tmp_path / "missing"))
    assert main(["doctor"]) == 0
    text = capsys.readouterr().out
    assert "llama-server   not found — run `spectui setup`, or set SPECTUI_LLAMA_SERVER" in text
    assert "model          not found — run `spectui setup`, or set SPECTUI_MODEL" in text
    assert "draft model    not found — run `spectui setup`, or set SPECTUI_DRAFT_MODEL" in text
