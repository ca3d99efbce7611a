"""backends.registry: the server kinds written once. Each kind names the class that says it is that kind;
make_backend, --backend's choices and profile validation all read it; listing the kinds imports no backend."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from spectui.backends.detect import make_backend
from spectui.backends.registry import BACKENDS, KIND_CHOICES
from spectui.core.errors import InputError


@pytest.mark.parametrize("kind", list(BACKENDS))
async def test_each_kind_makes_its_own_class(kind):
    async with httpx.AsyncClient() as client:
        backend = make_backend(kind, "http://127.0.0.1:9/", client, api_key=None)
    assert type(backend) is BACKENDS[kind] and backend.kind == kind and backend.url == "http://127.0.0.1:9"


async def test_an_unknown_kind_is_one_line_naming_the_choices():
    async with httpx.AsyncClient() as client:
        with pytest.raises(InputError, match="unknown backend 'tgi'") as exc:
            make_backend("tgi", "http://x", client)
    assert ", ".join(KIND_CHOICES) in exc.value.one_line()


def test_the_cli_offers_the_registry_kinds():
    r = subprocess.run(
        [sys.executable, "-m", "spectui", "compare", "--backend", "tgi"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and all(f"'{k}'" in r.stderr for k in KIND_CHOICES), r.stderr


def test_listing_the_kinds_imports_no_backend_module():
    code = (
        "import sys; from spectui.backends.registry import KIND_CHOICES; "
        "print(sorted(m for m in sys.modules if m.startswith(('httpx', 'spectui.backends.llamacpp'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
