"""What a certificate was measured on: both servers (build, speculative and cache flags, launch command
line where known, model and draft files), the hardware, spectui's version, the prompt set's hash, the date.

A model or draft file on this machine is identified by its sha256 (or, with `hash_files=False`, by size
and modification time, and the certificate says so); a file only the server can see is identified by the
path the server reports, and the certificate says that too.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import time
from pathlib import Path

import psutil

from spectui import __version__
from spectui.backends.launchspec import LaunchSpec, flag_value
from spectui.core.errors import redact_argv, redact_credentials
from spectui.core.types import SIDES, Prompt, ServerInfo
from spectui.machine.probes import GPUProbe

CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return _sha256_of(fh)


def _sha256_of(fh) -> str:
    h = hashlib.sha256()
    while chunk := fh.read(CHUNK):
        h.update(chunk)
    return h.hexdigest()


def _stamp(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


# A model file's sha256 for this process, by (device, inode, size, mtime, ctime): a prove hashes each side's
# model (and draft), the two sides mostly name the same files, and the TUI proves again and again. Only files
# unchanged for RACY_NS are kept (a timestamp ticks every few ms, so a file written twice within one tick
# could keep its stamps: git's "racy" rule); sessions and certificates are always hashed afresh.
RACY_NS = 2_000_000_000
_MODEL_HASHES: dict[tuple[int, int, int, int, int], str] = {}


def model_sha256(path: Path) -> str:
    """The key is the open file's own stat (fstat), and it is hashed from that same descriptor: a file
    replaced meanwhile (os.replace) is another inode, and one written meanwhile changes its stamps."""
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        now = time.time_ns()
        key = _stamp(st)
        if key in _MODEL_HASHES:
            return _MODEL_HASHES[key]
        digest = _sha256_of(fh)
        unchanged = _stamp(os.fstat(fh.fileno())) == key
    if unchanged and now - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_NS:
        _MODEL_HASHES[key] = digest
    return digest


def prompt_set_hash(prompts: list[Prompt]) -> str:
    """sha256 of the prompts as canonical JSON (ids, categories and texts, in order): two runs on the same
    set (whatever its file is called) have the same hash; any change to a prompt changes it."""
    doc = json.dumps([p.to_json() for p in prompts], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(doc.encode("utf-8", errors="surrogatepass")).hexdigest()


def file_identity(path: str | Path | None, hash_files: bool = True) -> dict | None:
    """How a model file is identified: sha256 where the file is here (or size and mtime, said so), the
    reported path alone where it is not."""
    if not path:
        return None
    p = Path(path).expanduser()
    if p.is_dir():
        return folder_identity(p, hash_files)
    if not p.is_file():
        return {"path": str(path), "identity": "reported path only (the file is not on this machine)"}
    st = p.stat()
    out = {
        "path": str(p),
        "bytes": st.st_size,
        "mtime": dt.datetime.fromtimestamp(st.st_mtime, dt.UTC).isoformat(timespec="seconds"),
    }
    if hash_files:
        out["sha256"] = model_sha256(p)
        out["identity"] = "sha256"
    else:
        out["identity"] = "size and mtime (not hashed: --no-hash)"
    return out


def folder_files(folder: Path) -> list[Path]:
    """A model folder's files (a Hugging Face folder: config, tokenizer, safetensors …), in a fixed order;
    hidden files and folders (.cache, .git, a download tool's locks) are not part of the model."""
    out = []
    for f in sorted(folder.rglob("*")):
        rel = f.relative_to(folder)
        if f.is_file() and not any(part.startswith(".") for part in rel.parts):
            out.append(f)
    return out


def folder_identity(folder: Path, hash_files: bool = True) -> dict:
    """A model that is a folder: the sha256 of its manifest (each file's relative path and sha256, one line
    each, sorted), so anyone with the same files gets the same hash; each file's hash is listed too."""
    files = folder_files(folder)
    out: dict = {"path": str(folder), "bytes": sum(f.stat().st_size for f in files), "files": len(files)}
    if not hash_files:
        out["identity"] = "folder: file sizes only (not hashed: --no-hash)"
        return out
    listed = {str(f.relative_to(folder).as_posix()): model_sha256(f) for f in files}
    manifest = "".join(f"{rel}\0{digest}\n" for rel, digest in listed.items())
    out["sha256"] = hashlib.sha256(manifest.encode("utf-8", errors="surrogatepass")).hexdigest()
    out["identity"] = "folder sha256 (of each file's path and sha256, sorted)"
    out["file_sha256"] = listed
    return out


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "?"


def hardware(gpu_probe=None) -> dict:
    """CPU, cores, RAM and NVIDIA GPUs (NVML); no GPU is a value, never an error."""

    probe = gpu_probe or GPUProbe()
    gpus = [{"index": g.index, "name": g.name, "memory_total": g.memory_total} for g in probe.sample()]
    return {
        "cpu": cpu_model(),
        "cores_logical": os.cpu_count(),
        "cores_physical": psutil.cpu_count(logical=False),
        "memory_total": int(psutil.virtual_memory().total),
        "system": f"{platform.system()} {platform.release()} {platform.machine()}",
        "gpus": gpus,
        "gpu_note": None if gpus else (probe.error or "no NVIDIA GPU found"),
    }


def where(hw: dict) -> str:
    """`on this CPU` / `on NVIDIA H200`: what the verdict line says the speed was measured on."""
    gpus = hw.get("gpus") or []
    if not gpus:
        return "on this CPU"
    names = sorted({str(g.get("name")) for g in gpus})
    return f"on {len(gpus)}× {names[0]}" if len(gpus) > 1 and len(names) == 1 else f"on {', '.join(names)}"


def machine_key(hw: dict | None) -> str:
    hw = hw or {}
    return json.dumps({"cpu": hw.get("cpu"), "gpus": [g.get("name") for g in hw.get("gpus") or []]}, sort_keys=True)


def machines(mo: dict) -> list[tuple[dict, list[int]]]:
    """The distinct machines a certificate was measured on, each with the shard indices that ran on it
    (a merged certificate's shards; [] for one that is not merged)."""
    found: dict[str, tuple[dict, list[int]]] = {}
    shards = mo.get("shards") or []
    for sh in shards:
        hw = sh.get("hardware") or {}
        found.setdefault(machine_key(hw), (hw, []))[1].append(int((sh.get("shard") or {}).get("index", 0)))
    if not shards:
        hw = mo.get("hardware") or {}
        found[machine_key(hw)] = (hw, [])
    return list(found.values())


def machine_name(hw: dict) -> str:
    """`NVIDIA H200` / `CPU Intel Xeon …`: one machine among several."""
    gpus = sorted({str(g.get("name")) for g in hw.get("gpus") or []})
    return ", ".join(gpus) if gpus else f"CPU {hw.get('cpu') or '?'}"


def where_measured(mo: dict) -> str:
    """`on this CPU`, `on NVIDIA H200`, or `on 2 machines: NVIDIA H200; CPU …` (merged shards)."""
    found = machines(mo)
    if len(found) <= 1:
        return where(mo.get("hardware") or {})
    return f"on {len(found)} machines: " + "; ".join(machine_name(hw) for hw, _ in found)


def server_facts(info: ServerInfo, argv: list[str] | None, hash_files: bool = True) -> dict:
    """One side as measured: its identity as it reported it, its launch command line where spectui
    launched it or can read it from the local process, the flags spectui reads from that, and its files."""
    spec = LaunchSpec.from_argv(argv)
    model_path = info.model_path
    if not model_path and argv:
        model_path = flag_value(argv, "-m", "--model") or model_path
    draft = spec.draft_model or (info.speculative or {}).get("draft_model")

    shown = redact_argv(argv) if argv else None  # a certificate is made to be shared: no key, no token in it
    return {
        **info.to_json(),
        "launch_argv": shown,
        "launch_flags": {k: redact_credentials(v) for k, v in spec.values.items()} if argv else None,
        "prefix_cache_flag": spec.prefix_cache,
        "model_file": file_identity(model_path, hash_files),
        "draft_file": file_identity(str(draft), hash_files) if draft else None,
    }


def measured_on(
    infos: dict[str, ServerInfo],
    argvs: dict[str, list[str] | None],
    prompts: list[Prompt],
    set_name: str,
    hash_files: bool = True,
    gpu_probe=None,
) -> dict:
    return {
        "servers": {side: server_facts(infos[side], argvs.get(side), hash_files) for side in SIDES},
        "hardware": hardware(gpu_probe),
        "spectui": __version__,
        "prompt_set": {"name": set_name, "sha256": prompt_set_hash(prompts), "count": len(prompts)},
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
