"""`spectui doctor`: what spectui found on this machine."""

from __future__ import annotations

from spectui.machine import assets
from spectui.machine.probes import GPUProbe, host_sample


def doctor_report(gpu_probe: GPUProbe | None = None) -> dict:
    found = assets.find_all()
    probe = gpu_probe or GPUProbe()
    gpus = [g.to_json() for g in probe.sample()]
    host = host_sample().to_json()
    return {
        "llama_server": str(found.llama_server) if found.llama_server else None,
        "llama_server_build": assets.server_build(found.llama_server) if found.llama_server else None,
        "llama_quantize": str(found.llama_quantize) if found.llama_quantize else None,
        "model": str(found.model) if found.model else None,
        "draft_model": str(found.draft_model) if found.draft_model else None,
        "cache_dir": str(assets.cache_dir()),
        "gpus": gpus,
        "gpu_note": None if gpus else (probe.error or "no NVIDIA GPU found"),
        "host": host,
    }


def doctor_text(r: dict) -> str:
    def show(v, fix):
        return v if v else f"not found — {fix}"

    gib = 1024**3
    lines = [
        f"llama-server   {show(r['llama_server'], 'run `spectui setup`, or set SPECTUI_LLAMA_SERVER')}",
        f"  build        {r['llama_server_build'] or '—'}",
        f"model          {show(r['model'], 'run `spectui setup`, or set SPECTUI_MODEL')}",
        f"draft model    {show(r['draft_model'], 'run `spectui setup`, or set SPECTUI_DRAFT_MODEL')}",
        f"cache          {r['cache_dir']}",
    ]
    if r["gpus"]:
        for g in r["gpus"]:
            mem = f"{g['memory_total'] / gib:.1f} GiB" if g["memory_total"] else "memory N/A"
            lines.append(f"GPU {g['index']}          {g['name']}, {mem}")
    else:
        lines.append(f"GPUs           none ({r['gpu_note']})")
    h = r["host"]
    lines.append(
        f"host           {h['system']} {h['machine']}, {h['cpu_count']} CPUs, "
        f"{h['memory_total'] / gib:.1f} GiB RAM ({h['memory_used'] / gib:.1f} GiB used)"
    )
    return "\n".join(lines)
