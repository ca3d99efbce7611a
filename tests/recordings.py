"""Sessions made without a server: recorded llama-server streams (tests/data) played through the real
labeller and run loop, written by the real session writer."""

from __future__ import annotations

import asyncio
from pathlib import Path

from spectui.backends.recorded import ReplayBackend, load_payloads
from spectui.core.runner import run_prompts
from spectui.core.types import GenerationParams, ServerInfo
from spectui.store import prompts
from spectui.store.session_writer import SessionWriter

DATA = Path(__file__).parent / "data"
BASELINE = DATA / "llamacpp-b11434-baseline-fizzbuzz.sse"
DRAFT = DATA / "llamacpp-b11434-draft-simple-fizzbuzz.sse"
INFO = ServerInfo("http://127.0.0.1:8081", build="b11434-pypi", model="SmolLM2-135M-Instruct.Q4_1.gguf")


def payloads(path: Path = BASELINE) -> list[dict]:
    return load_payloads(path)


def changed(stream: list[dict], index: int, content: str) -> list[dict]:
    """A copy of a recorded stream with one event's text replaced, as a lossy KV cache would."""
    out = [dict(p) for p in stream]
    out[index] = dict(out[index], content=content)
    return out


def write_session(
    path: Path,
    baseline: list[dict] | None = None,
    candidate: list[dict] | None = None,
    n_prompts: int = 1,
    max_tokens: int = 64,
) -> Path:
    """A session of `n_prompts` prompts, each the recorded baseline against the recorded candidate."""
    b = ReplayBackend("replay://b", baseline or payloads(BASELINE), INFO, virtual_ms_per_event=12.5)
    c = ReplayBackend("replay://c", candidate or payloads(DRAFT), INFO, virtual_ms_per_event=12.5)
    w = SessionWriter(path)
    w.servers({"baseline": INFO, "candidate": INFO})
    items = [prompts.single(f"fizzbuzz {k}") for k in range(n_prompts)]
    asyncio.run(run_prompts(b, c, items, GenerationParams(max_tokens=max_tokens), observer=w))
    w.close()
    return path
