"""spectui's GPU path on a real NVIDIA GPU: what the live panel and the memory plan read through NVML, checked
against CUDA's own count while memory is taken and given back.

Run where a GPU exists (`python bench/gpu_real.py`); prints figures, and says so and exits 0 where there is none.
Needs torch with CUDA for the allocation step (skipped, said so, without it).
"""

from __future__ import annotations

import subprocess
import sys
import time

from spectui.machine.probes import GPUProbe

GIB = 1024**3


def _gib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / GIB:.2f} GiB"


def main() -> int:
    probe = GPUProbe()
    if not probe.available():
        print(f"no NVIDIA GPU through NVML ({probe.error}): nothing to check here")
        return 0
    for g in probe.sample():
        print(
            f"GPU {g.index}: {g.name} · used {_gib(g.memory_used)} of {_gib(g.memory_total)}"
            f" · free {_gib(g.memory_free)} · utilisation {g.utilisation}%"
        )
    mem = probe.memory(0)
    print(
        f"plan's view of GPU 0: total {_gib(mem.total)}, free {_gib(mem.free)} ({mem.source})"
        if mem
        else "no plan view"
    )
    try:
        import torch
    except ImportError:
        print("torch not installed: allocation check skipped")
        torch = None
    if torch is not None and torch.cuda.is_available():
        worst = 0.0
        for size_gib in (1, 8, 32):
            before = probe.memory(0)
            block = torch.empty(size_gib * GIB, dtype=torch.uint8, device="cuda")
            torch.cuda.synchronize()
            time.sleep(0.2)
            after = probe.memory(0)
            cuda_free, cuda_total = torch.cuda.mem_get_info()
            seen = (before.free - after.free) / GIB
            print(
                f"took {size_gib} GiB with torch: spectui saw free fall {seen:.3f} GiB;"
                f" spectui free {after.free / GIB:.3f} GiB vs CUDA's {cuda_free / GIB:.3f} GiB"
                f" (total {after.total / GIB:.2f} vs {cuda_total / GIB:.2f})"
            )
            worst = max(worst, abs(after.free - cuda_free) / GIB)
            del block
            torch.cuda.empty_cache()
        print(f"largest gap between spectui's free memory and CUDA's: {worst:.3f} GiB")
    for args in (
        ["doctor"],
        ["profiles", "list"],
        ["profiles", "check", "s-nvidia"],
        ["profiles", "check", "n-nvidia"],
        ["profiles", "check", "x-gpu"],
    ):
        r = subprocess.run([sys.executable, "-m", "spectui", *args], capture_output=True, text=True, timeout=120)
        print(f"$ spectui {' '.join(args)}  (exit {r.returncode})")
        print((r.stdout + r.stderr).rstrip())
    probe.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
