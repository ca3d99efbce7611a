"""Hardware profiles: the machine a course track expects and the server pairs worth comparing on it.

A profile is a TOML file (bundled in profiles/, or the user's ~/.config/spectui/profiles/, which adds
to or overrides the bundled ones by name):

    name = "cpu-demo"
    description = "…"
    track = "CPU"
    [hardware]
    gpu_vendor = "none"          # nvidia | apple | none | any
    min_gpu_memory_gib = 0       # per GPU (NVIDIA) or unified memory (Apple)
    min_memory_gib = 2           # host RAM
    [variables.model]            # a value the user sets: its environment variable and what it is
    env = "SPECTUI_MODEL"
    description = "the target model (GGUF)"
    [variables.model.stated]     # optional: its size where the file is not on this machine (memory plan)
    params_b = 8.03              # billions of parameters (or size_gib = the weights' size)
    dtype = "bf16"               # weight type: f32 | f16 | bf16 | fp8 | int8 | q8_0 | q4_0
    layers = 32                  # the shape the KV cache needs: layers, KV heads, head size
    kv_heads = 8
    head_dim = 128
    context = 131072             # trained context, used where argv sets none
    source = "Llama-3.1-8B config.json"
    [memory]
    slots = 1                    # sequences the plan keeps KV cache for on vLLM/SGLang (llama.cpp: -c is all)
    [[comparison]]
    id = "draft"
    title = "draft-model speculation"
    kind = "speculation"         # speculation | prefix-cache | kv-cache
    baseline = { backend = "llama.cpp", argv = ["{llama_server}", "-m", "{model}"] }
    candidate = { backend = "llama.cpp", argv = ["{llama_server}", "-m", "{model}", "-md", "{draft_model}"] }

argv is a list (never a shell string). `{host}` and `{port}` are filled by the launcher (127.0.0.1
and a free port unless the server table sets `host`/`port`); where argv names neither, spectui adds
`--host H --port P`. Built-in variables: {llama_server}, {model}, {draft_model} (the cached build and
SmolLM2 unless SPECTUI_LLAMA_SERVER / SPECTUI_MODEL / SPECTUI_DRAFT_MODEL say otherwise), {model_f32}
(the model's F32 copy, `spectui setup` makes it), {model_demo} (the model in the format `spectui formats`
recommends here, machine.assets.DEMO_FORMAT; `spectui setup` makes it).
"""

from __future__ import annotations

import ipaddress
import os
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from spectui.backends.registry import BACKENDS
from spectui.core.errors import InputError
from spectui.core.types import SIDES
from spectui.machine import assets
from spectui.machine.launcher import ServerProcess, apply_memory_share, free_port, share_env
from spectui.machine.probes import GPUProbe
from spectui.store.bounded import parse_toml_text
from spectui.store.locations import config_dir, read_config_file, resource_dir

if TYPE_CHECKING:
    from spectui.machine.probes import GPUMemory

VENDORS = {"nvidia", "apple", "none", "any"}
KINDS = {"speculation", "prefix-cache", "kv-cache"}
TOP_KEYS = {"name", "description", "track", "hardware", "variables", "comparison", "notes", "memory"}
HW_KEYS = {"gpu_vendor", "min_gpu_memory_gib", "min_memory_gib"}
CMP_KEYS = {"id", "title", "kind", "baseline", "candidate", "notes"}
SRV_KEYS = {"backend", "argv", "host", "port", "env", "ready_timeout"}
VAR_KEYS = {"env", "description", "default", "stated"}
STATED_KEYS = {"params_b", "size_gib", "dtype", "layers", "kv_heads", "head_dim", "context", "source"}
MEMORY_KEYS = {"slots"}
# bytes per weight; q8_0 and q4_0 are ggml's 32-value blocks of 34 and 18 bytes
WEIGHT_BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "q8_0": 34 / 32, "q4_0": 18 / 32}
GIB = 1024**3


@dataclass(frozen=True)
class ServerSpec:
    backend: str
    argv: list[str]
    host: str = "127.0.0.1"
    port: int = 0
    env: dict = field(default_factory=dict)
    ready_timeout: float = 180.0


@dataclass(frozen=True)
class Comparison:
    id: str
    title: str
    kind: str
    baseline: ServerSpec
    candidate: ServerSpec


@dataclass(frozen=True)
class StatedModel:
    """A model's size and shape as the profile states it, for planning where its file is not on this machine."""

    source: str
    params_b: float | None = None
    dtype: str = "bf16"
    size_gib: float | None = None
    layers: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    context: int | None = None

    @property
    def weight_bytes(self) -> int | None:
        if self.size_gib is not None:
            return round(self.size_gib * GIB)
        if self.params_b is not None:
            return round(self.params_b * 1e9 * WEIGHT_BYTES[self.dtype])
        return None

    def dims(self) -> dict | None:
        """The shape in spectui.labs.memory.kv's terms (None if the profile does not state it)."""
        if not (self.layers and self.kv_heads and self.head_dim):
            return None
        return {
            "arch": "stated",
            "layers": self.layers,
            "kv_heads": self.kv_heads,
            "head_k": self.head_dim,
            "head_v": self.head_dim,
            "context_trained": self.context,
        }


@dataclass(frozen=True)
class Variable:
    name: str
    env: str
    description: str
    default: str | None = None
    stated: StatedModel | None = None


@dataclass
class Profile:
    name: str
    description: str
    track: str
    gpu_vendor: str
    min_gpu_memory_gib: float
    min_memory_gib: float
    variables: dict[str, Variable]
    comparisons: list[Comparison]
    path: str
    warnings: list[str] = field(default_factory=list)
    slots: int = 1  # [memory] slots: sequences the memory plan keeps KV cache for on vLLM and SGLang

    def comparison(self, cid: str) -> Comparison:
        for c in self.comparisons:
            if c.id == cid:
                return c
        raise InputError(
            f"profile {self.name} has no comparison {cid!r}",
            hint=f"its comparisons: {', '.join(c.id for c in self.comparisons)}",
        )


def _line_of(text: str, key: str) -> int | None:
    for i, line in enumerate(text.splitlines(), 1):
        if re.match(rf"\s*{re.escape(key)}\s*=", line):
            return i
    return None


def parse_profile(text: str, path: str) -> Profile:
    data = parse_toml_text(text, f"profile {path}")  # depth checked first; tomllib names line and column

    def err(key: str, what: str) -> InputError:
        line = _line_of(text, key.rsplit(".", 1)[-1])
        return InputError(f"profile {path}{f', line {line}' if line else ''}, key {key!r}: {what}")

    warnings = [f"profile {path}: unknown key {k!r} ignored" for k in data if k not in TOP_KEYS]
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise err("name", "missing or not a string")
    vendor, nums = _parse_hardware(data.get("hardware") or {}, err, warnings, path)
    variables = _parse_variables(data.get("variables") or {}, err, warnings, path)
    slots = _parse_slots(data.get("memory") or {}, err, warnings, path)
    comps = _parse_comparisons(data.get("comparison"), err, warnings, path)
    return Profile(
        name,
        str(data.get("description", "")),
        str(data.get("track", "")),
        vendor,
        nums["min_gpu_memory_gib"],
        nums["min_memory_gib"],
        variables,
        comps,
        path,
        warnings,
        slots,
    )


def _parse_hardware(hw, err, warnings: list[str], path: str) -> tuple[str, dict[str, float]]:
    """[hardware]: the GPU vendor and the least GPU memory and memory (GiB) the profile needs."""
    if not isinstance(hw, dict):
        raise err("hardware", "must be a table")
    warnings += [f"profile {path}: unknown key 'hardware.{k}' ignored" for k in hw if k not in HW_KEYS]
    vendor = hw.get("gpu_vendor", "any")
    if vendor not in VENDORS:
        raise err("hardware.gpu_vendor", f"{vendor!r} is not one of {', '.join(sorted(VENDORS))}")
    nums = {}
    for k in ("min_gpu_memory_gib", "min_memory_gib"):
        v = hw.get(k, 0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < float("inf"):  # NaN too
            raise err(f"hardware.{k}", "must be a finite number >= 0")
        nums[k] = float(v)
    return vendor, nums


def _parse_slots(mem, err, warnings: list[str], path: str) -> int:
    """[memory]: the slots (parallel sequences) each server is sized for."""
    if not isinstance(mem, dict):
        raise err("memory", "must be a table")
    warnings += [f"profile {path}: unknown key 'memory.{k}' ignored" for k in mem if k not in MEMORY_KEYS]
    slots = mem.get("slots", 1)
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
        raise err("memory.slots", "must be a whole number >= 1")
    return slots


def _parse_comparisons(raw, err, warnings: list[str], path: str) -> list[Comparison]:
    """The [[comparison]] tables: each a unique id, a kind, and its two sides."""
    if not isinstance(raw, list) or not raw:
        raise err("comparison", "a profile needs at least one [[comparison]]")
    comps = []
    seen = set()
    for i, c in enumerate(raw, 1):
        where = f"comparison[{i}]"
        if not isinstance(c, dict):
            raise err(where, "must be a table")
        warnings += [f"profile {path}: unknown key '{where}.{k}' ignored" for k in c if k not in CMP_KEYS]
        cid = c.get("id")
        if not isinstance(cid, str) or not cid:
            raise err(f"{where}.id", "missing")
        if cid in seen:
            raise err(f"{where}.id", f"duplicate id {cid!r}")
        seen.add(cid)
        kind = c.get("kind", "speculation")
        if kind not in KINDS:
            raise err(f"{where}.kind", f"{kind!r} is not one of {', '.join(sorted(KINDS))}")
        sides: dict[str, ServerSpec] = {}
        for side in SIDES:
            sides[side] = _parse_side(c.get(side), f"{where}.{side}", side, sides.get("baseline"), err, warnings, path)
        comps.append(Comparison(cid, str(c.get("title", cid)), kind, sides["baseline"], sides["candidate"]))
    return comps


def _parse_variables(raw_vars, err, warnings: list[str], path: str) -> dict[str, Variable]:
    """The [variables.NAME] tables: each names the environment variable that gives its value."""
    variables = {}
    if not isinstance(raw_vars, dict):
        raise err("variables", "must be a table of [variables.NAME] tables")
    for vname, v in raw_vars.items():
        if not isinstance(v, dict) or not isinstance(v.get("env"), str):
            raise err(f"variables.{vname}", 'needs env = "NAME_OF_ENVIRONMENT_VARIABLE"')
        warnings += [f"profile {path}: unknown key 'variables.{vname}.{k}' ignored" for k in v if k not in VAR_KEYS]
        stated = _parse_stated(v.get("stated"), f"variables.{vname}.stated", err, warnings, path)
        variables[vname] = Variable(vname, v["env"], str(v.get("description", "")), v.get("default"), stated)
    return variables


def _parse_side(s, at: str, side: str, baseline: ServerSpec | None, err, warnings: list[str], path: str) -> ServerSpec:
    """One side of a [[comparison]] (`at` names it, comparison[i].baseline): the server it launches and how."""
    if not isinstance(s, dict):
        raise err(at, "missing: give { backend = …, argv = [ … ] }")
    warnings += [f"profile {path}: unknown key '{at}.{k}' ignored" for k in s if k not in SRV_KEYS]
    backend = s.get("backend")
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise err(f"{at}.backend", f"{backend!r} is not one of {', '.join(sorted(BACKENDS))}")
    argv = s.get("argv")
    if isinstance(argv, str):
        raise err(f"{at}.argv", "must be a list of arguments, not a shell string")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise err(f"{at}.argv", "must be a non-empty list of strings")
    port = s.get("port", 0)
    if isinstance(port, bool) or not isinstance(port, int) or not (port == 0 or 1024 <= port < 65536):
        raise err(f"{at}.port", "must be 0 (pick a free one) or a port from 1024 to 65535")
    if port and side == "candidate" and baseline is not None and port == baseline.port:
        raise err(f"{at}.port", f"{port} is the baseline's port too: give each side its own")
    env = s.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise err(f"{at}.env", 'must be a table of strings: env = { NAME = "value" }')
    ready = s.get("ready_timeout", 180)
    if isinstance(ready, bool) or not isinstance(ready, (int, float)) or not 0 < ready < float("inf"):
        raise err(f"{at}.ready_timeout", "must be a positive number of seconds")
    host = s.get("host", "127.0.0.1")
    if not isinstance(host, str) or not host:
        raise err(f"{at}.host", "must be a host name or address")
    if not is_loopback(host):  # as `spectui serve` warns for the same choice
        warnings.append(
            f"profile {path}: {at}.host {host!r} lets other machines reach the launched "
            "server (no API key): use 127.0.0.1 unless that is meant"
        )
    return ServerSpec(backend, list(argv), host, port, dict(env), float(ready))


def _parse_stated(raw, where: str, err, warnings: list[str], path: str) -> StatedModel | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise err(where, "must be a table: [" + where + "]")
    warnings += [f"profile {path}: unknown key '{where}.{k}' ignored" for k in raw if k not in STATED_KEYS]
    source = raw.get("source")
    if not isinstance(source, str) or not source:
        raise err(f"{where}.source", 'say where the figures come from (source = "…")')
    dtype = raw.get("dtype", "bf16")
    if dtype not in WEIGHT_BYTES:
        raise err(f"{where}.dtype", f"{dtype!r} is not one of {', '.join(WEIGHT_BYTES)}")
    nums: dict = {}
    for k in ("params_b", "size_gib"):
        v = raw.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0):
            raise err(f"{where}.{k}", "must be a positive number")
        nums[k] = float(v) if v is not None else None
    for k in ("layers", "kv_heads", "head_dim", "context"):
        v = raw.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
            raise err(f"{where}.{k}", "must be a positive whole number")
        nums[k] = v
    if nums["params_b"] is None and nums["size_gib"] is None:
        raise err(where, "needs params_b (billions of parameters, with dtype) or size_gib")
    return StatedModel(source, dtype=dtype, **nums)


def is_loopback(host: str) -> bool:
    """Whether a bind address keeps a server to this machine (localhost, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def user_profile_dir() -> Path:
    return config_dir() / "profiles"


def load_profiles(dirs: list[Path] | None = None) -> tuple[dict[str, Profile], list[str]]:
    """Bundled profiles, then the user's (a user profile with the same name overrides)."""
    out: dict[str, Profile] = {}
    problems: list[str] = []
    for d in dirs if dirs is not None else [resource_dir("profiles"), user_profile_dir()]:
        if not d.is_dir():
            continue
        for path in sorted(d.glob("*.toml")):
            try:
                p = parse_profile(read_config_file(path, "profile"), str(path))
            except InputError as exc:  # one bad file is one line; the others still load
                problems.append(exc.one_line())
                continue
            problems += p.warnings
            out[p.name] = p
    return out, problems


# -- hardware ----------------------------------------------------------------------------------------
@dataclass
class Hardware:
    gpu_vendor: str  # nvidia | apple | none
    gpus: list[tuple[str, int]]  # (name, memory bytes)
    memory: int  # host RAM bytes (unified memory on Apple Silicon)
    note: str = ""
    gpu_memory: GPUMemory | None = None  # the first GPU's total and free bytes from NVML, for the memory plan

    def describe(self) -> str:
        if self.gpu_vendor == "nvidia":
            g = ", ".join(f"{n} ({m / GIB:.0f} GB)" for n, m in self.gpus)
            return f"NVIDIA: {g}; RAM {self.memory / GIB:.0f} GB"
        if self.gpu_vendor == "apple":
            return f"Apple Silicon, {self.memory / GIB:.0f} GB unified memory"
        return f"no GPU found ({self.note or 'CPU only'}); RAM {self.memory / GIB:.0f} GB"


def detect(gpu_probe=None) -> Hardware:
    probe = gpu_probe or GPUProbe()
    gpus = probe.sample()
    mem = psutil.virtual_memory().total
    if gpus:
        return Hardware("nvidia", [(g.name, g.memory_total or 0) for g in gpus], mem, gpu_memory=probe.memory(0))
    if platform.system() == "Darwin" and platform.machine() == "arm64":
        return Hardware("apple", [], mem)
    return Hardware("none", [], mem, probe.error or "")


def fits(profile: Profile, hw: Hardware) -> tuple[bool, str]:
    """Whether this machine suits the profile, and why not."""
    need = profile.gpu_vendor
    if hw.memory < profile.min_memory_gib * GIB:
        return False, f"needs {profile.min_memory_gib:g} GB of RAM, this machine has {hw.memory / GIB:.0f} GB"
    if need == "nvidia":
        if hw.gpu_vendor != "nvidia":
            return False, "needs an NVIDIA GPU; " + (
                "this is Apple Silicon" if hw.gpu_vendor == "apple" else "none found"
            )
        best = max(m for _, m in hw.gpus)
        if best < profile.min_gpu_memory_gib * GIB:
            return False, (
                f"needs {profile.min_gpu_memory_gib:g} GB of GPU memory (the full lab's floor), "
                f"the largest GPU here has {best / GIB:.1f} GB"
            )
    if need == "apple":
        if hw.gpu_vendor != "apple":
            return False, "needs Apple Silicon (unified memory, Metal)"
        if hw.memory < profile.min_gpu_memory_gib * GIB:
            return False, f"needs {profile.min_gpu_memory_gib:g} GB of unified memory"
    return True, "fits"


def preselect(profiles: dict[str, Profile], hw: Hardware) -> Profile | None:
    """The most demanding profile that fits (a 24 GB NVIDIA machine gets the full lab, not the demo)."""
    fitting = [p for p in profiles.values() if fits(p, hw)[0]]
    if not fitting:
        return None
    order = {"nvidia": 3, "apple": 2, "any": 1, "none": 0}
    return max(
        fitting,
        key=lambda p: (
            order[p.gpu_vendor] if p.gpu_vendor == hw.gpu_vendor else -1,
            p.min_gpu_memory_gib,
            p.min_memory_gib,
        ),
    )


# -- making a comparison runnable ------------------------------------------------------------------------
def builtin_values() -> dict[str, str | None]:
    found = assets.find_all()
    return {
        "llama_server": str(found.llama_server) if found.llama_server else None,
        "model": str(found.model) if found.model else None,
        "draft_model": str(found.draft_model) if found.draft_model else None,
        "model_f32": str(found.model_f32) if found.model_f32 else None,
        "model_demo": str(found.model_demo) if found.model_demo else None,
    }


def variable_value(profile: Profile, name: str, values: dict | None = None) -> tuple[str | None, str]:
    """A {name}'s value as resolve_argv fills it, and where it came from (for the memory plan's sources)."""
    vals = builtin_values() if values is None else values
    var = profile.variables.get(name)
    if var is not None and os.environ.get(var.env):
        return os.environ[var.env], f"{var.env}"
    if vals.get(name) is not None:
        return str(vals[name]), "built-in" if var is None else f"{var.env} not set, built-in"
    if var is not None and var.default is not None:
        return str(var.default), f"{var.env} not set, profile default"
    return None, f"{var.env} not set" if var is not None else "no value"


def resolve_argv(profile: Profile, spec: ServerSpec, host: str, port: int, values: dict | None = None) -> list[str]:
    """Fill {variables}; a missing one names the environment variable to set."""
    vals = dict(builtin_values() if values is None else values)
    for v in profile.variables.values():
        env = os.environ.get(v.env)
        if env:
            vals[v.name] = env
        elif v.name not in vals or vals[v.name] is None:
            vals[v.name] = v.default
    vals["host"], vals["port"] = host, str(port)
    out = []
    for arg in spec.argv:

        def sub(m: re.Match) -> str:
            key = m.group(1)
            if vals.get(key) is None:
                var = profile.variables.get(key)
                how = (
                    f"set {var.env} ({var.description})"
                    if var
                    else (
                        "run `spectui setup`"
                        if key in ("llama_server", "model", "draft_model", "model_f32", "model_demo")
                        else "define it in [variables]"
                    )
                )
                raise InputError(f"profile {profile.name}: {{{key}}} has no value", hint=how)
            return str(vals[key])

        out.append(re.sub(r"\{([a-z_][a-z0-9_]*)\}", sub, arg))
    if not any("{host}" in a or "{port}" in a for a in spec.argv):
        out += ["--host", host, "--port", str(port)]
    for arg, nxt in zip(out, out[1:] + [""]):
        if arg in ("-m", "--model", "-md", "--spec-draft-model", "--model-path") and nxt and "/" in nxt:
            # vLLM and SGLang take a Hugging Face repo id ("org/name") too, never one that starts like a path:
            # a missing folder is said here, not after a minute of the server's start-up (HFValidationError)
            local = spec.backend == "llama.cpp" or nxt.startswith(("/", "./", "../", "~"))
            if local and not Path(nxt).expanduser().exists() and not nxt.startswith(("hf:", "http")):
                raise InputError(
                    f"profile {profile.name}: model file {nxt} does not exist",
                    hint="set the variable that names it (spectui profiles show " + profile.name + ")",
                )
    return out


def servers_for(profile: Profile, comparison: Comparison, values: dict | None = None, shares: dict | None = None):
    """The comparison's two servers, ready to start: argv resolved, 127.0.0.1 and free ports by default.

    `shares` ({"baseline": MemoryShare, "candidate": …}, a memory plan's `shares`) puts each server's GPU
    memory share into its argv (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static, llama.cpp
    -ngl/-c), replacing what the profile had, so neither engine claims the other's memory.
    """
    out = []
    for side, spec in (("baseline", comparison.baseline), ("candidate", comparison.candidate)):
        port = spec.port or free_port(spec.host)
        share = (shares or {}).get(side)
        argv = apply_memory_share(resolve_argv(profile, spec, spec.host, port, values), spec.backend, share)
        out.append(
            ServerProcess(
                side,
                argv,
                host=spec.host,
                port=port,
                env=share_env(spec.backend, share, spec.env),
                ready_timeout=spec.ready_timeout,
                backend=spec.backend,
                memory_share=share,
            )
        )
    return out[0], out[1]


def profile_text(p: Profile, hw: Hardware | None = None) -> str:
    lines = [
        f"{p.name} (track {p.track or '—'}): {p.description}",
        f"  file: {p.path}",
        f"  hardware: GPU {p.gpu_vendor}"
        + (f", ≥ {p.min_gpu_memory_gib:g} GB GPU memory" if p.min_gpu_memory_gib else "")
        + f", ≥ {p.min_memory_gib:g} GB RAM",
    ]
    if hw is not None:
        ok, why = fits(p, hw)
        lines.append(f"  this machine: {'fits' if ok else 'does not fit: ' + why}")
    if p.variables:
        lines.append("  variables (set these in the environment):")
        for v in p.variables.values():
            state = "set" if os.environ.get(v.env) else "NOT SET"
            lines.append(f"    {v.env:<24} {{{v.name}}}  {v.description}  [{state}]")
    lines.append("  comparisons:")
    for c in p.comparisons:
        lines.append(f"    {c.id:<18} {c.kind:<13} {c.title}  ({c.baseline.backend} vs {c.candidate.backend})")
    return "\n".join(lines)
