"""The server kinds spectui speaks, each written once: kind → the Backend class that speaks it.

Read by `--backend auto` detection and make_backend (backends.detect), the CLI's --backend choices, profile
validation (store.profiles) and the drafts commands. A new backend is one module (backends/<name>.py, its
Backend subclass with its capabilities and quirks) and one line here.

The classes are imported on first use (`BACKENDS[kind]`): listing the kinds, as `spectui --help` and profile
validation do, imports nothing (the backend modules pull in httpx, about 150 ms: `python -X importtime -c
"import spectui.backends.llamacpp"`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spectui.backends.base import Backend


class _Registry(Mapping[str, "type[Backend]"]):
    """kind → Backend class, each class imported from its module when first asked for."""

    def __init__(self, where: dict[str, str]) -> None:
        self._where = where  # kind → "module:Class"

    def __getitem__(self, kind: str) -> type[Backend]:
        module, _, name = self._where[kind].partition(":")
        return getattr(import_module(module), name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


BACKENDS: Mapping[str, type[Backend]] = _Registry(
    {
        "llama.cpp": "spectui.backends.llamacpp:LlamaCppBackend",
        "vllm": "spectui.backends.vllm:VLLMBackend",
        "sglang": "spectui.backends.sglang:SGLangBackend",
        "openai": "spectui.backends.openai:OpenAIBackend",
    }
)
AUTO = "auto"  # --backend auto: detect each server's kind from its endpoints (backends.detect)
KIND_CHOICES = (AUTO, *BACKENDS)  # what --backend accepts
