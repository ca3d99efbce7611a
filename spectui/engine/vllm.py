"""The vLLM (V1 OpenAI-compatible server) backend: /v1/completions streamed with token ids.

One chunk is one engine step; the final usage chunk carries `usage` (with `prompt_tokens_details.
cached_tokens` where enabled) and, with `--per-request-spec-decode-metrics detailed`,
`metrics.speculative_decoding.per_step_accepted/per_step_drafted`. Counters come from /metrics
(`vllm:` names, labelled by engine and model). Field names drift between releases: what is missing is
shown as missing.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import httpx

from spectui.engine import metrics as M
from spectui.engine.chunks import ChunkLabeller
from spectui.engine.errors import NotLlamaServer, ServerHTTPError, ServerLoading, ServerUnreachable, StreamBroken
from spectui.engine.events import SpecReport, StreamEvent, StreamFailed, StreamFinished, StreamStarted
from spectui.engine.llamacpp import GenerationParams, ServerInfo
from spectui.engine.metrics import parse_metrics
from spectui.engine.sse import error_text as _error_text, post_sse, why as _why

STOP_TYPES = {"length": "limit", "stop": "eos"}  # OpenAI finish reasons in llama.cpp's stop_type terms


class OpenAIBackend:
    """Any OpenAI-compatible /v1/completions endpoint: text, timing and usage; tokens labelled unknown."""

    kind = "openai"
    ready_path = "/v1/models"  # polled until 200 while the server loads
    spec_metric_names = (M.VLLM_SPEC_DRAFTED, M.VLLM_SPEC_ACCEPTED, M.VLLM_SPEC_STEPS, M.VLLM_PER_POS)

    def __init__(self, url: str, client: httpx.AsyncClient, api_key: str | None = None,
                 clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.url = url.rstrip("/")
        self.client = client
        self.clock = clock
        self.info: ServerInfo | None = None
        self.model: str | None = None
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}  # never saved anywhere
        self.speculative = False

    async def _get(self, path: str, timeout: float = 10.0) -> httpx.Response:
        try:
            return await self.client.get(self.url + path, timeout=timeout, headers=self._headers)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ServerUnreachable(f"cannot connect to {self.url} ({_why(exc)})") from None
        except httpx.HTTPError as exc:
            raise ServerUnreachable(f"{self.url}{path}: {_why(exc)}") from None

    async def _post(self, path: str, body: dict, timeout: float = 30.0) -> dict:
        try:
            r = await self.client.post(self.url + path, json=body, timeout=timeout, headers=self._headers)
        except httpx.HTTPError as exc:
            raise ServerUnreachable(f"{self.url}{path}: {_why(exc)}") from None
        if r.status_code >= 400:
            raise ServerHTTPError(f"{self.url}{path} answered HTTP {r.status_code}: {_error_text(r)}", r.status_code)
        return r.json()

    async def wait_ready(self, timeout: float = 120.0, on_wait=None) -> None:
        import asyncio

        deadline = time.monotonic() + timeout
        while True:
            try:
                r = await self._get(self.ready_path, timeout=5)
                if r.status_code == 200:
                    return
                if r.status_code in (401, 403):
                    raise ServerHTTPError(f"{self.url} refused the API key (HTTP {r.status_code})", r.status_code,
                                          hint="check the environment variable named by --api-key-env")
            except ServerUnreachable:
                if time.monotonic() > deadline:
                    raise
            if time.monotonic() > deadline:
                raise ServerLoading(f"{self.url} not ready after {timeout:.0f} s")
            if on_wait:
                on_wait("loading", deadline - time.monotonic())
            await asyncio.sleep(0.5)

    async def identify(self) -> ServerInfo:
        r = await self._get("/v1/models")
        if r.status_code != 200:
            raise NotLlamaServer(f"{self.url}/v1/models answered HTTP {r.status_code}: not an OpenAI-compatible server")
        data = (r.json().get("data") or [{}])[0]
        self.model = data.get("id")
        info = ServerInfo(url=self.url, backend=self.kind, model=self.model, n_ctx=data.get("max_model_len"))
        info.speculative = {"type": "unknown (not reported)"}
        self.info = info
        return info

    async def render_chat(self, messages: list[dict]) -> str:
        # no template endpoint on plain OpenAI-compatible servers: ChatML as SmolLM2 uses it
        parts = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages]
        return "".join(parts) + "<|im_start|>assistant\n"

    def request_body(self, prompt: str, params: GenerationParams) -> dict:
        body = {"model": self.model, "prompt": prompt, "max_tokens": params.max_tokens, "temperature": params.temperature,
                "seed": params.seed, "stream": True, "stream_options": {"include_usage": True}}
        return body

    def _labeller(self) -> ChunkLabeller:
        return ChunkLabeller(False)

    async def stream(self, prompt: str, params: GenerationParams) -> AsyncIterator[StreamEvent]:
        clock = self.clock
        yield StreamStarted(clock(), prompt)
        lab = self._labeller()
        usage: dict = {}
        extra: dict = {}
        finish = None
        try:
            async for t, obj in post_sse(self.client, self.url + "/v1/completions", self.request_body(prompt, params),
                                         self._headers, clock=clock):
                if obj.get("usage"):
                    usage = obj["usage"]
                    extra = obj.get("metrics") or {}
                for choice in obj.get("choices") or []:
                    text = choice.get("text") or ""
                    ids = choice.get("token_ids")
                    n = len(ids) if isinstance(ids, list) else (1 if text else 0)
                    for ev in lab.feed(text.encode("utf-8"), ids if isinstance(ids, list) else None, n, t):
                        yield ev
                    finish = choice.get("finish_reason") or finish
        except StreamBroken as exc:
            yield StreamFailed(clock(), f"{exc} (after {lab.index} tokens)")
            return
        if finish is None and not usage:
            yield StreamFailed(clock(), f"stream ended after {lab.index} tokens without a finish reason")
            return
        timings = {}
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        if usage.get("prompt_tokens") is not None:
            timings["prompt_n"] = usage["prompt_tokens"] - (cached or 0)
        if cached is not None:
            timings["cache_n"] = cached
        if extra.get("tokens_per_second") is not None:
            timings["predicted_per_second"] = extra["tokens_per_second"]
        yield StreamFinished(clock(), STOP_TYPES.get(finish or "", finish or "none"), timings, usage.get("prompt_tokens"),
                             spec=self._spec_report(extra.get("speculative_decoding"), usage.get("completion_tokens")))

    def _spec_report(self, sd: dict | None, completion_tokens: int | None) -> SpecReport | None:
        """vLLM's `metrics.speculative_decoding`: per-step lists with `detailed`, totals with `summary`."""
        if not sd:
            return None

        def ints(key):
            v = sd.get(key)
            return [int(x) for x in v] if isinstance(v, list) else None

        def num(key):
            return int(sd[key]) if sd.get(key) is not None else None

        return SpecReport("vLLM", ints("per_step_accepted"), ints("per_step_drafted"), num("num_spec_steps"),
                          num("num_accepted_draft_tokens"), num("num_draft_tokens"), completion_tokens)

    async def metrics(self) -> dict[str, float] | None:
        try:
            r = await self._get("/metrics")
        except ServerUnreachable:
            return None
        return parse_metrics(r.text) if r.status_code == 200 else None

    async def kv_usage(self):
        m = await self.metrics()
        if not m:
            return None
        for name in M.VLLM_KV_USAGE:
            v = M.total(m, name)
            if v is not None:
                return (int(round(v * 1000)), 1000)  # a fraction, shown as per mille of the pool
        return None


class VLLMBackend(OpenAIBackend):
    """vLLM V1: token ids per chunk, /metrics counters, /version, /tokenize for the chat template."""

    kind = "vllm"

    async def identify(self) -> ServerInfo:
        info = await super().identify()
        info.backend = "vllm"
        r = await self._get("/version")
        if r.status_code == 200:
            info.build = f"vllm {r.json().get('version', '?')}"
        m = await self.metrics()
        self.speculative = bool(m) and M.total(m, M.VLLM_SPEC_DRAFTED) is not None
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
