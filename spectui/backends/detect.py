"""One factory for every server kind, and `--backend auto`: tell servers apart by their endpoints.

llama.cpp answers /props with default_generation_settings; vLLM answers /version and exports `vllm:`
metrics; SGLang answers /server_info (older: /get_server_info); anything else that lists /v1/models is
treated as a plain OpenAI-compatible server (text, timing and usage only).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import httpx

from spectui.backends.registry import AUTO, BACKENDS, KIND_CHOICES
from spectui.core.errors import InputError, NotLlamaServer, ServerUnreachable, redact, register_secret

if TYPE_CHECKING:
    from spectui.backends.base import Backend


def connect_reason(exc: BaseException) -> str:
    """Why a connection failed, in a few words: the OS's words for the error underneath ("connection
    refused"), else the exception's first line whole (cutting it at a width left "[Connect call failed
    ('127.0.0.1'" with its brackets open)."""
    seen = exc
    for _ in range(8):  # the httpx error, the transport's, the OSError under them
        if isinstance(seen, OSError) and seen.errno:
            return os.strerror(seen.errno).lower()
        nxt = seen.__cause__ or seen.__context__
        if nxt is None:
            break
        seen = nxt
    lines = str(exc).splitlines()
    return lines[0] if lines and lines[0] else "refused"


async def detect(url: str, client: httpx.AsyncClient, headers: dict | None = None) -> str:
    url = url.rstrip("/")

    shown = redact(url)

    async def get(path):
        try:
            return await client.get(url + path, timeout=5, headers=headers or {})
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ServerUnreachable(f"cannot connect to {shown} ({connect_reason(exc)})") from None
        except httpx.TimeoutException:
            # it accepted the connection and then said nothing: asking other paths would only wait again
            raise ServerUnreachable(
                f"{shown} accepted the connection but did not answer {path} within 5 s",
                hint="the server may be stuck or still starting; check it, or name --backend",
            ) from None
        except httpx.HTTPError:
            return None

    def body_of(r):
        try:
            body = r.json()
        except ValueError:  # HTML or any other text: not the JSON this kind of server answers
            return None
        return body if isinstance(body, dict) else None

    r = await get("/props")
    if r is not None and r.status_code == 503 and (body_of(r) or {}).get("error") is not None:
        return "llama.cpp"  # loading: llama-server answers every path 503 with an error object
    if r is not None and r.status_code == 200 and "default_generation_settings" in (body_of(r) or {}):
        return "llama.cpp"
    for path in ("/server_info", "/get_server_info"):
        r = await get(path)
        body = body_of(r) if r is not None and r.status_code == 200 else None
        if body is not None and ("model_path" in body or "server_args" in body or "version" in body):
            return "sglang"
    r = await get("/version")
    if r is not None and r.status_code == 200:
        m = await get("/metrics")
        if m is not None and m.status_code == 200 and "vllm:" in m.text:
            return "vllm"
        if "version" in (body_of(r) or {}):
            return "vllm"
    r = await get("/v1/models")
    if r is not None and (r.status_code in (401, 403) or (r.status_code == 200 and body_of(r) is not None)):
        return "openai"
    raise NotLlamaServer(
        f"{shown} is not a llama.cpp, vLLM, SGLang or OpenAI-compatible server",
        hint="check the URL, or name the kind with --backend",
    )


def api_key_from(env_name: str | None) -> str | None:
    """The bearer token, read from the environment variable the user names (never from a file)."""
    if not env_name:
        return None
    value = os.environ.get(env_name)
    if not value:
        raise InputError(f"--api-key-env {env_name}: that environment variable is not set")
    register_secret(value)  # never in a session, report, notebook or message
    return value


def make_backend(kind: str, url: str, client: httpx.AsyncClient, api_key: str | None = None):
    """The backend of the named kind (backends.registry) for the server at `url`."""
    if kind not in BACKENDS:
        raise InputError(f"unknown backend {kind!r}", hint=f"one of {', '.join(KIND_CHOICES)}")
    backend: Callable[..., Backend] = BACKENDS[kind]  # each server backend takes (url, client, api_key=)
    return backend(url, client, api_key=api_key)


async def resolve(kind: str, url: str, client: httpx.AsyncClient, api_key: str | None = None):
    """A backend for `url`; with kind auto, the detected one (and which it found)."""
    if kind == AUTO:
        kind = await detect(url, client, {"Authorization": f"Bearer {api_key}"} if api_key else None)
    return make_backend(kind, url, client, api_key), kind
