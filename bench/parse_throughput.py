"""Tokens/s that spectui's SSE parsing and labelling sustain, against a bare httpx line reader.

Both read the same replayed llama-server stream (a recorded draft-simple stream repeated to N tokens),
served from memory through httpx.MockTransport, in the same run. Prints both figures and the ratio.
    python bench/parse_throughput.py [--tokens 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spectui.backends.llamacpp import LlamaCppBackend
from spectui.backends.recorded import load_payloads, repeat_stream  # noqa: E402
from spectui.core.events import TokenEvent  # noqa: E402
from spectui.core.types import GenerationParams  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "llamacpp-b11434-draft-simple-fizzbuzz.sse"


def body_for(n: int) -> bytes:
    payloads = repeat_stream(load_payloads(DATA), n)
    return "".join(f"data: {json.dumps(p)}\n\n" for p in payloads).encode()


async def bare(client: httpx.AsyncClient) -> int:
    n = 0
    async with client.stream("POST", "http://replay/completion", json={}) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                n += 1
    return n


async def bare_json(client: httpx.AsyncClient) -> int:
    """The least any client must do: read lines and decode each event's JSON (stdlib json)."""
    n = 0
    async with client.stream("POST", "http://replay/completion", json={}) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                json.loads(line[6:])
                n += 1
    return n


async def engine(client: httpx.AsyncClient) -> int:
    backend = LlamaCppBackend("http://replay", client)
    n = 0
    async for ev in backend.stream("x", GenerationParams()):
        if isinstance(ev, TokenEvent):
            n += 1
    return n


async def main(tokens: int, repeats: int) -> None:
    body = body_for(tokens)
    transport = httpx.MockTransport(
        lambda req: httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
    )
    async with httpx.AsyncClient(transport=transport) as client:
        best = {"bare": 0.0, "bare_json": 0.0, "engine": 0.0}
        counts = {}
        for _ in range(repeats):
            for name, fn in (("bare", bare), ("bare_json", bare_json), ("engine", engine)):
                t0 = time.perf_counter()
                counts[name] = await fn(client)
                rate = counts[name] / (time.perf_counter() - t0)
                best[name] = max(best[name], rate)
    print(f"stream: {tokens} tokens ({len(body) / 1e6:.1f} MB of SSE), best of {repeats}")
    print(f"bare httpx line reader : {best['bare']:>10,.0f} events/s")
    print(f"bare reader + json     : {best['bare_json']:>10,.0f} events/s")
    print(f"spectui parse + label  : {best['engine']:>10,.0f} tokens/s  ({counts['engine']} tokens labelled)")
    print(f"ratio engine/bare      : {best['engine'] / best['bare']:.2f}  (target >= 0.80)")
    print(f"ratio engine/bare+json : {best['engine'] / best['bare_json']:.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    asyncio.run(main(a.tokens, a.repeats))
