"""One factory for every server kind, and `--backend auto`: tell servers apart by their endpoints.

llama.cpp answers /props with default_generation_settings; vLLM answers /version and exports `vllm:`
metrics; SGLang answers /server_info (older: /get_server_info); anything else that lists /v1/models is
treated as a plain OpenAI-compatible server (text, timing and usage only).
"""

from __future__ import annotations

import os

import httpx

from spectui.engine.errors import InputError, NotLlamaServer, ServerUnreachable

KINDS = ("auto", "llama.cpp", "vllm", "sglang", "openai")


async def detect(url: str, client: httpx.AsyncClient, headers: dict | None = None) -> str:
    url = url.rstrip("/")

    async def get(path):
        try:
            return await client.get(url + path, timeout=5, headers=headers or {})
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ServerUnreachable(f"cannot connect to {url} ({str(exc).splitlines()[0][:80] or 'refused'})") from None
        except httpx.HTTPError:
            return None

    r = await get("/props")
    if r is not None and r.status_code in (200, 503):
        try:
            if r.status_code == 503 or "default_generation_settings" in r.json():
                return "llama.cpp"
        except ValueError:
            pass
    for path in ("/server_info", "/get_server_info"):
        r = await get(path)
        if r is not None and r.status_code == 200:
            try:
                body = r.json()
            except ValueError:
                continue
            if isinstance(body, dict) and ("model_path" in body or "server_args" in body or "version" in body):
                return "sglang"
    r = await get("/version")
    if r is not None and r.status_code == 200:
        m = await get("/metrics")
        if m is not None and m.status_code == 200 and "vllm:" in m.text:
            return "vllm"
        try:
            if "version" in r.json():
                return "vllm"
        except ValueError:
            pass
    r = await get("/v1/models")
    if r is not None and r.status_code in (200, 401, 403):
        return "openai"
    raise NotLlamaServer(f"{url} is not a llama.cpp, vLLM, SGLang or OpenAI-compatible server",
                         hint="check the URL, or name the kind with --backend")


def api_key_from(env_name: str | None) -> str | None:
    """The bearer token, read from the environment variable the user names (never from a file)."""
    if not env_name:
        return None
    value = os.environ.get(env_name)
    if not value:
        raise InputError(f"--api-key-env {env_name}: that environment variable is not set")
    return value


def make_backend(kind: str, url: str, client: httpx.AsyncClient, api_key: str | None = None):
    if kind == "llama.cpp":
        from spectui.engine.llamacpp import LlamaCppBackend

        return LlamaCppBackend(url, client)
    if kind == "vllm":
        from spectui.engine.vllm import VLLMBackend

        return VLLMBackend(url, client, api_key)
    if kind == "sglang":
        from spectui.engine.sglang import SGLangBackend

        return SGLangBackend(url, client, api_key)
    if kind == "openai":
        from spectui.engine.vllm import OpenAIBackend

        return OpenAIBackend(url, client, api_key)
    raise InputError(f"unknown backend {kind!r}", hint=f"one of {', '.join(KINDS)}")


async def resolve(kind: str, url: str, client: httpx.AsyncClient, api_key: str | None = None):
    """A backend for `url`; with kind auto, the detected one (and which it found)."""
    if kind == "auto":
        kind = await detect(url, client, {"Authorization": f"Bearer {api_key}"} if api_key else None)
    return make_backend(kind, url, client, api_key), kind
