"""Any OpenAI-compatible server: /v1/completions streamed, text, timing and usage; tokens labelled unknown.

The final usage chunk carries `usage` (with `prompt_tokens_details.cached_tokens` where enabled); vLLM
adds `metrics.speculative_decoding` (see vllm.py). Field names drift between releases: what is missing
is shown as missing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import httpx

from spectui.backends import props as P
from spectui.backends.base import Backend, Capabilities
from spectui.backends.chunks import ChunkLabeller
from spectui.backends.metrics import parse_metrics
from spectui.backends.sse import error_text as _error_text
from spectui.backends.sse import post_sse
from spectui.backends.sse import why as _why
from spectui.core.errors import (
    BadEvent,
    NotLlamaServer,
    ServerHTTPError,
    ServerLoading,
    ServerUnreachable,
    StreamBroken,
    checked,
    describe,
)
from spectui.core.events import SpecReport, StreamEvent, StreamFailed, StreamFinished, StreamStarted
from spectui.core.types import GenerationParams, ServerInfo

STOP_TYPES = {"length": "limit", "stop": "eos"}  # OpenAI finish reasons in llama.cpp's stop_type terms


def usage_timings(usage: dict, extra: dict) -> dict:
    """The final chunk's `usage` (and vLLM's `metrics`) as the timings spectui reads: prompt tokens computed
    and cached, completion tokens, vLLM's per-request rate."""
    timings = {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if usage.get("prompt_tokens") is not None:
        timings["prompt_n"] = usage["prompt_tokens"] - (cached or 0)
    if cached is not None:
        timings["cache_n"] = cached
    if extra.get("tokens_per_second") is not None:
        # vLLM's per-request rate counts from arrival, prefill included: not a decode rate
        timings["tokens_per_second_incl_prefill"] = extra["tokens_per_second"]
    if usage.get("completion_tokens") is not None:
        timings["completion_tokens"] = usage["completion_tokens"]
    return timings


class OpenAIBackend(Backend):
    """Any OpenAI-compatible /v1/completions endpoint: text, timing and usage; tokens labelled unknown."""

    kind = "openai"
    capabilities = Capabilities(logprobs=True)
    ready_path = "/v1/models"  # polled until 200 while the server loads

    def __init__(
        self,
        url: str,
        client: httpx.AsyncClient,
        api_key: str | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
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
        deadline = time.monotonic() + timeout
        while True:
            try:
                r = await self._get(self.ready_path, timeout=5)
                if r.status_code == 200:
                    return
                if r.status_code in (401, 403):
                    raise ServerHTTPError(
                        f"{self.url} refused the API key (HTTP {r.status_code})",
                        r.status_code,
                        hint="check the environment variable named by --api-key-env",
                    )
                if r.status_code == 404:  # an answer, not "still loading": this path does not exist there
                    raise NotLlamaServer(
                        f"{self.url} has no {self.ready_path}: not a {self.kind} server",
                        hint="check the URL, or name the right kind with --backend",
                    )
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
        try:
            listed = P.obj(r.json()).get("data")
        except ValueError:
            raise NotLlamaServer(f"{self.url}/v1/models is not JSON: not an OpenAI-compatible server") from None
        data = P.obj(listed[0]) if isinstance(listed, list) and listed else {}
        self.model = P.name(data.get("id"))  # normalised once here (backends.props)
        info = ServerInfo(url=self.url, backend=self.kind, model=self.model, n_ctx=P.count(data.get("max_model_len")))
        info.speculative = {"type": "unknown (not reported)"}
        self.info = info
        return info

    async def render_chat(self, messages: list[dict]) -> str:
        # no template endpoint on plain OpenAI-compatible servers: ChatML as SmolLM2 uses it
        parts = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages]
        return "".join(parts) + "<|im_start|>assistant\n"

    def request_body(self, prompt: str, params: GenerationParams) -> dict:
        body = {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "seed": params.seed,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if params.top_p is not None:
            body["top_p"] = params.top_p
        return body

    def _labeller(self) -> ChunkLabeller:
        return ChunkLabeller(None)  # a plain OpenAI-compatible server does not say whether it speculates

    async def stream(self, prompt: str, params: GenerationParams) -> AsyncIterator[StreamEvent]:
        clock = self.clock
        yield StreamStarted(clock(), prompt)
        lab = self._labeller()
        usage: dict = {}
        extra: dict = {}
        finish = None
        try:
            async for t, obj in post_sse(
                self.client,
                self.url + "/v1/completions",
                self.request_body(prompt, params),
                self._headers,
                params.idle_timeout,
                params.deadline,
                clock=clock,
            ):
                if obj.get("usage"):
                    usage = checked(obj, "usage", dict, {})
                    extra = checked(obj, "metrics", dict, {})
                for choice in checked(obj, "choices", list, []):
                    if not isinstance(choice, dict):
                        raise BadEvent("choices[]", choice)
                    text = checked(choice, "text", str, "")
                    ids = checked(choice, "token_ids", list)
                    n = len(ids) if isinstance(ids, list) else (1 if text else 0)
                    for ev in lab.feed(text.encode("utf-8"), ids if isinstance(ids, list) else None, n, t):
                        yield ev
                    finish = choice.get("finish_reason") or finish
        except (StreamBroken, BadEvent) as exc:
            yield StreamFailed(clock(), f"{describe(exc)} (after {lab.index} tokens)")
            return
        if finish is None and not usage:
            yield StreamFailed(clock(), f"stream ended after {lab.index} tokens without a finish reason")
            return
        yield StreamFinished(
            clock(),
            STOP_TYPES.get(finish or "", finish or "none"),
            usage_timings(usage, extra),
            usage.get("prompt_tokens"),
            spec=self._spec_report(extra.get("speculative_decoding"), usage.get("completion_tokens")),
        )

    def _spec_report(self, sd: dict | None, completion_tokens: int | None) -> SpecReport | None:
        """vLLM's `metrics.speculative_decoding`: per-step lists with `detailed`, totals with `summary`."""
        if not sd:
            return None

        def ints(key):
            v = sd.get(key)
            return [int(x) for x in v] if isinstance(v, list) else None

        def num(key):
            return int(sd[key]) if sd.get(key) is not None else None

        return SpecReport(
            "vLLM",
            ints("per_step_accepted"),
            ints("per_step_drafted"),
            num("num_spec_steps"),
            num("num_accepted_draft_tokens"),
            num("num_draft_tokens"),
            completion_tokens,
        )

    async def metrics(self) -> dict[str, float] | None:
        try:
            r = await self._get("/metrics")
        except ServerUnreachable:
            return None
        return parse_metrics(r.text) if r.status_code == 200 else None
