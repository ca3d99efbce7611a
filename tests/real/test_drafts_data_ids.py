"""Training data in the speculators format needs every answer token's id. llama.cpp's stream withholds a
token whose bytes end inside a UTF-8 character (' ≈' is two tokens for SmolLM2) and sends its text with the
next token, without its id; `drafts data` asks the server again for the greedy answer's ids. The ids must
spell the streamed answer exactly, the withheld one included."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from spectui.backends.llamacpp import LlamaCppBackend
from spectui.core.types import GenerationParams, Prompt
from spectui.labs.drafts import data as drafts_data

pytestmark = pytest.mark.server

# answered by SmolLM2-135M-Instruct Q4_1 (greedy) with '… 1.60934 ≈ …': a token withheld in the stream
PROMPT = Prompt(
    "km", "code", [{"role": "user", "content": "Write a short Python function that converts kilometres to miles."}]
)


def test_an_answer_with_a_withheld_token_gets_every_id(llama_servers):
    url = llama_servers["baseline"]
    params = GenerationParams(max_tokens=96, temperature=0.0, seed=42)

    async def go():
        async with httpx.AsyncClient(timeout=120) as client:
            backend = LlamaCppBackend(url, client)
            text, extra = await drafts_data.answer(backend, PROMPT, params, "speculators")
            rendered = await drafts_data.render_prompt(backend, PROMPT)
            streamed = [t.token_id for t in (await drafts_data.run_side("baseline", backend, rendered, params)).tokens]
            # the last id is the end of generation, which the stream counts but sends no text for
            spelled = await backend.detokenize(extra["answer_ids"][:-1])
            return text, extra, streamed, spelled

    text, extra, streamed, spelled = asyncio.run(go())
    assert None in streamed, "the stream gave every id: this prompt no longer exercises a withheld token"
    assert len(extra["answer_ids"]) == len(streamed)
    assert all(type(i) is int for i in extra["answer_ids"])
    assert [i for i, s in zip(extra["answer_ids"], streamed, strict=True) if s is not None] == [
        s for s in streamed if s is not None
    ]
    assert spelled == text  # the ids spell the answer the stream gave, byte for byte
