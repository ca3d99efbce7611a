"""Back-to-back requests on one client: llama-server (b11434) closes a connection after a streamed answer,
and a client that reuses it at that moment gets 'Server disconnected' or 'Can not write request body'
(half of 60 template + stream pairs failed so before the stamped transport sent such a request again; the
sampling screen showed 3 of 20 seeds failed). A request the server never took is sent once more; one it
answered never is."""

from __future__ import annotations

import asyncio

import pytest

from spectui.backends.transport import stamped_client

pytestmark = pytest.mark.server


def test_back_to_back_template_and_stream_pairs_all_succeed(llama_servers):
    url = llama_servers["baseline"]

    async def pairs(n: int) -> list[str]:
        failures = []
        async with stamped_client() as client:
            for i in range(n):
                try:
                    r = await client.post(
                        url + "/apply-template", json={"messages": [{"role": "user", "content": f"hi {i}"}]}
                    )
                    r.raise_for_status()
                    body = {"prompt": r.json()["prompt"], "n_predict": 2, "stream": True, "seed": i}
                    async with client.stream("POST", url + "/completion", json=body) as s:
                        s.raise_for_status()
                        async for _ in s.aiter_bytes():
                            pass
                except Exception as exc:  # every failure is counted, whatever its kind
                    failures.append(f"{i}: {type(exc).__name__} {exc}")
        return failures

    assert asyncio.run(pairs(24)) == []
