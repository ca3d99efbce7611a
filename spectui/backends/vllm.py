"""The vLLM (V1 OpenAI-compatible server) backend: /v1/completions streamed with token ids.

One chunk is one engine step; the final usage chunk carries `usage` (with `prompt_tokens_details.
cached_tokens` where enabled) and, with `--per-request-spec-decode-metrics detailed`,
`metrics.speculative_decoding.per_step_accepted/per_step_drafted`. Counters come from /metrics
(`vllm:` names, labelled by engine and model).
"""

from __future__ import annotations

import httpx

from spectui.backends import metrics as M
from spectui.backends import props as P
from spectui.backends.base import Capabilities
from spectui.backends.chunks import ChunkLabeller
from spectui.backends.openai import OpenAIBackend
from spectui.core.types import GenerationParams, ServerInfo


class VLLMBackend(OpenAIBackend):
    """vLLM V1: token ids per chunk, /metrics counters, /version, /tokenize for the chat template."""

    kind = "vllm"
    capabilities = Capabilities(
        cache_reset=True,
        per_request_spec=True,
        per_step_counts=True,
        counters=True,
        logprobs=True,
        token_ids=True,
        chat_template=True,
    )
    counter_names = M.VLLM

    async def identify(self) -> ServerInfo:
        info = await super().identify()
        info.backend = "vllm"
        r = await self._get("/version")
        if r.status_code == 200:
            try:
                version = P.name(P.obj(r.json()).get("version"))
            except ValueError:
                version = None
            info.build = f"vllm {version or '?'}"
        m = await self.metrics()
        self.speculative = m is not None and bool(m) and M.total(m, M.VLLM_SPEC_DRAFTED) is not None
        info.metrics_enabled = m is not None
        info.speculative = {"type": "on (spec_decode counters present)" if self.speculative else "none"}
        if m and M.total(m, M.VLLM_PREFIX_QUERIES) is not None:
            info.cache_prompt = True  # prefix caching reports its queries
        self.info = info
        return info

    async def render_chat(self, messages: list[dict]) -> str:
        """The chat template as vLLM applies it: /tokenize with messages, then /detokenize."""
        tok = await self._post("/tokenize", {"model": self.model, "messages": messages, "add_generation_prompt": True})
        det = await self._post("/detokenize", {"model": self.model, "tokens": tok["tokens"]})
        return det["prompt"]

    def request_body(self, prompt: str, params: GenerationParams) -> dict:
        body = super().request_body(prompt, params)
        body["return_token_ids"] = True
        body["add_special_tokens"] = False  # the rendered template already holds them
        return body

    def _labeller(self) -> ChunkLabeller:
        return ChunkLabeller(self.speculative)

    async def reset_cache(self) -> str:
        """POST /reset_prefix_cache (vLLM answers 200 when it emptied the prefix cache)."""
        try:
            r = await self.client.post(self.url + "/reset_prefix_cache", timeout=30, headers=self._headers)
        except httpx.HTTPError:
            return "could not reach /reset_prefix_cache"
        return (
            "/reset_prefix_cache done"
            if r.status_code == 200
            else f"cannot clear: /reset_prefix_cache answered HTTP {r.status_code}"
        )

    async def kv_usage(self):
        m = await self.metrics()
        if not m:
            return None
        for name in M.VLLM_KV_USAGE:
            v = M.total(m, name)
            if v is not None:
                return (int(round(v * 1000)), 1000)  # a fraction, shown as per mille of the pool
        return None
