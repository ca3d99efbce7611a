"""The llama.cpp `llama-server` backend: identify, render chat prompts, stream /completion, probe."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import httpx

from spectui.engine.errors import (
    NotLlamaServer,
    ServerHTTPError,
    ServerLoading,
    ServerUnreachable,
    StreamBroken,
)
from spectui.engine.events import StreamEvent, StreamFailed, StreamFinished, StreamStarted
from spectui.engine.labeller import LlamaCppLabeller
from spectui.engine.metrics import parse_metrics
from spectui.engine.sse import error_text as _error_text, post_sse, why as _why


@dataclass
class GenerationParams:
    max_tokens: int = 128
    temperature: float = 0.0
    seed: int = 42
    cache_prompt: bool | None = None  # None: the server's default


@dataclass
class ServerInfo:
    """What a server says about itself, as shown in a pane header and saved with a session."""

    url: str
    backend: str = "llama.cpp"
    build: str | None = None
    model: str | None = None
    n_ctx: int | None = None
    slots: int | None = None
    speculative: dict = field(default_factory=dict)  # as reported: type, draft model, n_max…
    kv_cache: dict = field(default_factory=dict)  # type_k / type_v where reported
    cache_prompt: bool | None = None
    has_chat_template: bool = False
    metrics_enabled: bool | None = None
    model_path: str | None = None  # as the server reports it (for sizing its KV cache locally)

    def describe_speedup(self) -> str:
        """One line naming the speed-up configuration as the server reports it."""
        parts = []
        spec = self.speculative
        stype = spec.get("type")
        if stype and stype != "none":
            s = "speculation on (type reported after the first request)" if stype == "on" else f"spec {stype}"
            if spec.get("draft_model"):
                s += f" draft={spec['draft_model']}"
            if spec.get("n_max") is not None:
                s += f" n_max={spec['n_max']}"
            parts.append(s)
        elif spec.get("n_max") and spec.get("draft_model"):
            parts.append(f"spec draft={spec['draft_model']} n_max={spec['n_max']}")
        else:
            parts.append("no speculation")
        if self.kv_cache:
            parts.append("kv " + "/".join(str(v) for v in self.kv_cache.values()))
        if self.cache_prompt is not None:
            parts.append("prompt cache " + ("on" if self.cache_prompt else "off"))
        return ", ".join(parts)

    def to_json(self) -> dict:
        return {
            "url": self.url,
            "backend": self.backend,
            "build": self.build,
            "model": self.model,
            "n_ctx": self.n_ctx,
            "slots": self.slots,
            "speculative": self.speculative,
            "kv_cache": self.kv_cache,
            "cache_prompt": self.cache_prompt,
        }


def _basename(path: str | None) -> str | None:
    if not path:
        return None
    return path.replace("\\", "/").rsplit("/", 1)[-1]


class LlamaCppBackend:
    """One llama-server, reached over HTTP. Server quirks stay in here."""

    kind = "llama.cpp"

    def __init__(self, url: str, client: httpx.AsyncClient, clock: Callable[[], int] = time.perf_counter_ns):
        self.url = url.rstrip("/")
        self.client = client
        self.clock = clock
        self.info: ServerInfo | None = None

    # -- HTTP helpers ------------------------------------------------------------------------
    async def _get(self, path: str, timeout: float = 10.0) -> httpx.Response:
        try:
            return await self.client.get(self.url + path, timeout=timeout)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ServerUnreachable(f"cannot connect to {self.url} ({_why(exc)})") from None
        except httpx.TimeoutException:
            raise ServerUnreachable(f"{self.url}{path} did not answer within {timeout:.0f} s") from None
        except httpx.HTTPError as exc:
            raise ServerUnreachable(f"{self.url}{path}: {_why(exc)}") from None

    async def _post_json(self, path: str, body: dict, timeout: float = 30.0) -> dict:
        try:
            r = await self.client.post(self.url + path, json=body, timeout=timeout)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ServerUnreachable(f"cannot connect to {self.url} ({_why(exc)})") from None
        except httpx.HTTPError as exc:
            raise ServerUnreachable(f"{self.url}{path}: {_why(exc)}") from None
        if r.status_code >= 400:
            raise ServerHTTPError(f"{self.url}{path} answered HTTP {r.status_code}: {_error_text(r)}", r.status_code)
        try:
            return r.json()
        except ValueError:
            raise NotLlamaServer(f"{self.url}{path} did not answer JSON") from None

    # -- identity ------------------------------------------------------------------------------
    async def wait_ready(self, timeout: float = 120.0, on_wait: Callable[[str, float], None] | None = None) -> None:
        """Wait for /health to say ok; llama-server answers 503 while it loads the model."""
        deadline = time.monotonic() + timeout
        first = True
        while True:
            try:
                r = await self._get("/health", timeout=5.0)
            except ServerUnreachable:
                if first:
                    raise
                r = None  # it was there a moment ago: a restart, keep waiting
            first = False
            if r is not None and r.status_code == 200:
                return
            if r is not None and r.status_code not in (503,):
                if r.status_code == 404:
                    raise NotLlamaServer(f"{self.url} has no /health endpoint: not a llama-server")
                raise ServerHTTPError(f"{self.url}/health answered HTTP {r.status_code}", r.status_code)
            left = deadline - time.monotonic()
            if left <= 0:
                raise ServerLoading(f"{self.url} still loading after {timeout:.0f} s")
            if on_wait:
                on_wait("loading", left)
            await asyncio.sleep(min(0.25, left))

    async def identify(self) -> ServerInfo:
        r = await self._get("/props")
        if r.status_code == 404:
            raise NotLlamaServer(f"{self.url} has no /props endpoint: not a llama-server")
        if r.status_code == 503:
            raise ServerLoading(f"{self.url} is still loading")
        if r.status_code >= 400:
            raise ServerHTTPError(f"{self.url}/props answered HTTP {r.status_code}: {_error_text(r)}", r.status_code)
        try:
            props = r.json()
        except ValueError:
            raise NotLlamaServer(f"{self.url}/props is not JSON: not a llama-server") from None
        if not isinstance(props, dict) or "default_generation_settings" not in props:
            raise NotLlamaServer(f"{self.url}/props lacks default_generation_settings: not a llama-server")
        info = ServerInfo(url=self.url)
        info.build = props.get("build_info")
        info.model = _basename(props.get("model_path")) or props.get("model_alias")
        info.model_path = props.get("model_path")
        info.slots = props.get("total_slots")
        info.has_chat_template = bool(props.get("chat_template"))
        gen = props.get("default_generation_settings") or {}
        info.n_ctx = gen.get("n_ctx") or props.get("n_ctx")
        params = gen.get("params") or {}
        spec = params.get("speculative") or {}
        info.speculative = _speculative_from(spec, params)
        if "cache_prompt" in params:
            info.cache_prompt = bool(params["cache_prompt"])
        await self._add_slot_details(info)
        r = await self._get("/metrics")
        info.metrics_enabled = r.status_code == 200
        self.info = info
        return info

    async def _add_slot_details(self, info: ServerInfo) -> None:
        try:
            slots = await self.slots()
        except Exception:  # /slots can be disabled (--no-slots); identity is still useful
            return
        if not slots:
            return
        s0 = slots[0]
        spec = s0.get("speculative")
        if isinstance(spec, bool):
            info.speculative["enabled"] = spec
            if spec and info.speculative.get("type") in (None, "none"):
                # /props shows the request default ("none"); the slot says a drafter is loaded
                info.speculative["type"] = "on"
        p = s0.get("params") or {}
        if isinstance(p.get("speculative"), dict) and not info.speculative.get("n_max"):
            info.speculative.update(_speculative_from(p["speculative"], p))

    # -- generation ----------------------------------------------------------------------------
    async def render_chat(self, messages: list[dict]) -> str:
        """The prompt as the server's own chat template renders it (POST /apply-template)."""
        body = await self._post_json("/apply-template", {"messages": messages})
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise NotLlamaServer(f"{self.url}/apply-template did not return a prompt")
        return prompt

    def request_body(self, prompt: str, params: GenerationParams) -> dict:
        body = {
            "prompt": prompt,
            "n_predict": params.max_tokens,
            "temperature": params.temperature,
            "seed": params.seed,
            "stream": True,
            "timings_per_token": True,
            "return_tokens": True,
        }
        if params.cache_prompt is not None:
            body["cache_prompt"] = params.cache_prompt
        return body

    async def stream(self, prompt: str, params: GenerationParams) -> AsyncIterator[StreamEvent]:
        """Stream one completion as events; a failure ends the stream with StreamFailed, never raises."""
        labeller = LlamaCppLabeller()
        yield StreamStarted(self.clock(), prompt)
        try:
            async for t, obj in post_sse(self.client, self.url + "/completion", self.request_body(prompt, params),
                                         read_timeout=120.0, clock=self.clock):
                for ev in labeller.feed(obj, t):
                    if isinstance(ev, StreamFinished) and ev.settings and self.info is not None:
                        self._learn_settings(ev.settings)
                    yield ev
                if labeller.finished is not None:
                    return
            yield StreamFailed(self.clock(), f"stream ended after {labeller.index} tokens without a final event")
        except StreamBroken as exc:
            yield StreamFailed(self.clock(), f"{exc} (after {labeller.index} tokens)")

    def _learn_settings(self, settings: dict) -> None:
        """The final event names the speculation types the request really used (e.g. 'none,draft-simple')."""
        types = settings.get("speculative.types") or settings.get("speculative.type")
        if types and self.info is not None:
            used = [t for t in str(types).split(",") if t and t != "none"]
            self.info.speculative["type"] = ",".join(used) if used else "none"
        for key in ("speculative.n_max", "speculative.n_min"):
            if key in settings and self.info is not None:
                self.info.speculative[key.split(".", 1)[1]] = settings[key]

    # -- probes --------------------------------------------------------------------------------
    async def metrics(self) -> dict[str, float] | None:
        """Parsed /metrics, or None when the server runs without --metrics."""
        r = await self._get("/metrics")
        if r.status_code != 200:
            return None
        return parse_metrics(r.text)

    async def slots(self) -> list[dict]:
        r = await self._get("/slots")
        if r.status_code != 200:
            return []
        data = r.json()
        if isinstance(data, dict):  # the docs show an object, the code returns an array
            data = list(data.values()) if all(isinstance(v, dict) for v in data.values()) else [data]
        return [s for s in data if isinstance(s, dict)]

    async def kv_usage(self) -> tuple[int, int] | None:
        """(tokens in slots, total context): llama.cpp has no KV gauge, so count slot tokens."""
        slots = await self.slots()
        if not slots:
            return None
        used = total = 0
        for s in slots:
            nxt = s.get("next_token") or {}
            if isinstance(nxt, list):  # an array in the code, an object in the docs
                nxt = nxt[0] if nxt else {}
            total += int(s.get("n_ctx") or 0)
            used += int(s.get("n_prompt_tokens") or 0) + int(nxt.get("n_decoded") or 0)
        return used, total


def _speculative_from(spec: dict, params: dict) -> dict:
    out: dict = {}
    for key in ("type", "types"):
        if spec.get(key) is not None:
            out["type"] = spec[key] if not isinstance(spec[key], list) else ",".join(map(str, spec[key]))
    for src, dst in (("n_max", "n_max"), ("n_min", "n_min"), ("p_min", "p_min")):
        if spec.get(src) is not None:
            out[dst] = spec[src]
    for key in ("model", "draft_model", "model_draft"):
        if spec.get(key):
            out["draft_model"] = _basename(str(spec[key]))
    for src in ("speculative.n_max", "speculative.n_min"):
        if params.get(src) is not None:
            out[src.split(".", 1)[1]] = params[src]
    if params.get("speculative.type"):
        out["type"] = params["speculative.type"]
    return out


