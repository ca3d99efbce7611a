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


async def measure(tokens: int, repeats: int, names=("bare", "bare_json", "engine")) -> tuple[dict, dict, bytes]:
    """Best rate of each reader over `repeats` rounds, interleaved: ({name: per s}, {name: count}, body)."""
    body = body_for(tokens)
    transport = httpx.MockTransport(
        lambda req: httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
    )
    readers = {"bare": bare, "bare_json": bare_json, "engine": engine}
    best = dict.fromkeys(names, 0.0)
    counts: dict = {}
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(repeats):
            for name in names:
                t0 = time.perf_counter()
                counts[name] = await readers[name](client)
                best[name] = max(best[name], counts[name] / (time.perf_counter() - t0))
    return best, counts, body


async def engine_rate(tokens: int = 50_000, repeats: int = 3) -> float:
    """spectui's parse-and-label rate (tokens/s, best of `repeats`): the engine figure other benchmarks divide by."""
    best, _, _ = await measure(tokens, repeats, ("engine",))
    return best["engine"]


async def main(tokens: int, repeats: int) -> None:
    best, counts, body = await measure(tokens, repeats)
    print(f"stream: {tokens} tokens ({len(body) / 1e6:.1f} MB of SSE), best of {repeats}")
    print(f"bare httpx line reader : {best['bare']:>10,.0f} events/s")
    print(f"bare reader + json     : {best['bare_json']:>10,.0f} events/s")
    print(f"spectui parse + label  : {best['engine']:>10,.0f} tokens/s  ({counts['engine']} tokens labelled)")
    print(f"ratio engine/bare      : {best['engine'] / best['bare']:.2f}")
    print(
        f"ratio engine/bare+json : {best['engine'] / best['bare_json']:.2f}  (the least any client does: read and decode)"
    )
    print(f"engine rate (the keep-up benchmark's yardstick): {best['engine']:,.0f} tokens/s")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    asyncio.run(main(a.tokens, a.repeats))
