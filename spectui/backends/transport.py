"""The HTTP client for many concurrent streams (the sweep): httpx's interface over aiohttp's transport.

httpx's own HTTP/1.1 stack (httpcore, h11, anyio) costs several times the CPU per streamed event that
aiohttp's C-accelerated parser does; at 64–256 concurrent streams on a 2-core machine that made the
client, not the server, the bottleneck (bench/loadgen.py). httpx-aiohttp keeps every backend's httpx
code as it is and swaps the transport underneath.
"""

from __future__ import annotations

import httpx


def sweep_client(max_connections: int) -> httpx.AsyncClient:
    from httpx_aiohttp import AiohttpTransport  # here, not at import: only the sweep pays for aiohttp

    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    return httpx.AsyncClient(transport=AiohttpTransport(limits=limits))
