"""The llama.cpp `llama-server` backend: identify, render chat prompts, stream /completion, probe, slot caches."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import httpx

from spectui.backends import metrics as M
from spectui.backends import props as P
from spectui.backends.base import Backend, Capabilities
from spectui.backends.labeller import LlamaCppLabeller
from spectui.backends.llamacpp_timing import CompletionTimings, completion_body, timings_from
from spectui.backends.metrics import parse_metrics
from spectui.backends.sse import error_text as _error_text
from spectui.backends.sse import post_sse
from spectui.backends.sse import why as _why
from spectui.core.errors import (
    BadEvent,
    InputError,
    NotLlamaServer,
    ServerHTTPError,
    ServerLoading,
    ServerUnreachable,
    StreamBroken,
    Unsupported,
    describe,
)
from spectui.core.events import StreamEvent, StreamFailed, StreamFinished, StreamStarted
from spectui.core.types import GenerationParams, ServerInfo, SlotResult


class LlamaCppBackend(Backend):
    """One llama-server, reached over HTTP. Server quirks stay in here."""

    kind = "llama.cpp"
    capabilities = Capabilities(
        slots=True,
        cache_reset=True,
        cache_prompt_control=True,
        per_step_counts=True,
        counters=True,
        logprobs=True,
        token_ids=True,
        chat_template=True,
        prompt_timings=True,
    )
    counter_names = M.LLAMACPP

    def __init__(
        self,
        url: str,
        client: httpx.AsyncClient,
        api_key: str | None = None,  # llama-server --api-key: sent as a bearer token, never saved anywhere
        clock: Callable[[], int] = time.perf_counter_ns,
    ):
        self.url = url.rstrip("/")
        self.client = client
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.clock = clock
        self.info: ServerInfo | None = None

    # -- HTTP helpers ------------------------------------------------------------------------
    async def _get(self, path: str, timeout: float = 10.0) -> httpx.Response:
        try:
            return await self.client.get(self.url + path, timeout=timeout, headers=self._headers)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ServerUnreachable(f"cannot connect to {self.url} ({_why(exc)})") from None
        except httpx.TimeoutException:
            raise ServerUnreachable(f"{self.url}{path} did not answer within {timeout:.0f} s") from None
        except httpx.HTTPError as exc:
            raise ServerUnreachable(f"{self.url}{path}: {_why(exc)}") from None

    async def _post_json(self, path: str, body: dict, timeout: float = 30.0) -> dict:
        try:
            r = await self.client.post(self.url + path, json=body, timeout=timeout, headers=self._headers)
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
        # every field normalised here, once (backends.props): a session then records both identities whole
        info = ServerInfo(url=self.url)
        info.build = P.name(props.get("build_info"))
        info.model = P.basename(props.get("model_path")) or P.text(props.get("model_alias"))
        info.model_path = P.text(props.get("model_path"))
        info.slots = P.count(props.get("total_slots"))
        info.has_chat_template = bool(P.text(props.get("chat_template")))
        gen = P.obj(props.get("default_generation_settings"))
        info.n_ctx = P.count(gen.get("n_ctx")) or P.count(props.get("n_ctx"))
        params = P.obj(gen.get("params"))
        spec = P.obj(params.get("speculative"))
        info.speculative = _speculative_from(spec, params)
        if "cache_prompt" in params:
            info.cache_prompt = P.flag(params["cache_prompt"])
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
        if isinstance(spec, bool) and isinstance(info.speculative, dict):
            info.speculative["enabled"] = spec
            if spec and info.speculative.get("type") in (None, "none"):
                # /props shows the request default ("none"); the slot says a drafter is loaded
                info.speculative["type"] = "on"
        p = P.obj(s0.get("params"))
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
        if params.top_p is not None:
            body["top_p"] = params.top_p
        return body

    async def stream(self, prompt: str, params: GenerationParams) -> AsyncIterator[StreamEvent]:
        """Stream one completion as events; a failure ends the stream with StreamFailed, never raises."""
        labeller = LlamaCppLabeller()
        yield StreamStarted(self.clock(), prompt)
        try:
            async for t, obj in post_sse(
                self.client,
                self.url + "/completion",
                self.request_body(prompt, params),
                headers=self._headers,
                idle_timeout=params.idle_timeout,
                deadline=params.deadline,
                clock=self.clock,
            ):
                for ev in labeller.feed(obj, t):
                    if isinstance(ev, StreamFinished) and ev.settings and self.info is not None:
                        self._learn_settings(ev.settings)
                    yield ev
                if labeller.finished is not None:
                    return
            yield StreamFailed(self.clock(), f"stream ended after {labeller.index} tokens without a final event")
        except (StreamBroken, BadEvent) as exc:
            yield StreamFailed(self.clock(), f"{describe(exc)} (after {labeller.index} tokens)")

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

    async def top_logprobs(self, prompt: str, prefix_ids: list[int], n: int = 3) -> list[tuple[int | None, str, float]]:
        """POST /completion with the prompt's tokens plus `prefix_ids`, n_predict 1 and n_probs: the server's
        own top tokens at that position (ids, text, logprob), computed without the prompt cache."""
        tok = await self._post_json("/tokenize", {"content": prompt, "add_special": True})
        ids = tok.get("tokens")
        if not isinstance(ids, list):
            raise NotLlamaServer(f"{self.url}/tokenize did not return tokens")
        body = await self._post_json(
            "/completion",
            {"prompt": [*ids, *prefix_ids], "n_predict": 1, "n_probs": n, "temperature": 0, "cache_prompt": False},
            timeout=120,
        )
        probs = body.get("completion_probabilities")
        if not isinstance(probs, list) or not probs or not isinstance(probs[0], dict):
            raise NotLlamaServer(f"{self.url}/completion returned no completion_probabilities")
        out = []
        for e in probs[0].get("top_logprobs") or []:
            if isinstance(e, dict) and isinstance(e.get("logprob"), (int, float)):
                out.append((e.get("id"), str(e.get("token", "")), float(e["logprob"])))
        return out

    async def timed_completion(self, ids: list[int], n_predict: int, slot: int | None = 0) -> CompletionTimings:
        reply = await self._post_json("/completion", completion_body(ids, n_predict, slot), timeout=300)
        return timings_from(reply, self.url)

    async def top_logprobs_in_batch(
        self, prompt: str, prefix_ids: list[int], n: int, batch: int
    ) -> tuple[list[tuple[int | None, str, float]], int]:
        # slot 0 is primed with the context minus its last `batch` tokens plus one other token (so the cache
        # covers exactly the prefix), then asked for the whole context: the server processes the last
        # `batch` tokens in one batch on the cached prefix, and its timings.prompt_n says how many it did
        tok = await self._post_json("/tokenize", {"content": prompt, "add_special": True})
        ids = tok.get("tokens")
        if not isinstance(ids, list):
            raise NotLlamaServer(f"{self.url}/tokenize did not return tokens")
        full = [*ids, *prefix_ids]
        if not 1 <= batch < len(full):
            raise Unsupported(f"a batch of {batch} tokens does not fit a context of {len(full)}")
        head, first = full[:-batch], full[-batch]
        other = first + 1 if first > 0 else first + 2
        base = {"n_predict": 1, "temperature": 0, "cache_prompt": True, "id_slot": 0, "stream": False}
        await self._post_json("/completion", {**base, "prompt": [*head, other]}, timeout=120)
        body = await self._post_json("/completion", {**base, "prompt": full, "n_probs": n}, timeout=120)
        probs = body.get("completion_probabilities")
        timings = body.get("timings")
        if not isinstance(probs, list) or not probs or not isinstance(probs[0], dict):
            raise NotLlamaServer(f"{self.url}/completion returned no completion_probabilities")
        processed = timings.get("prompt_n") if isinstance(timings, dict) else None
        out = [
            (e.get("id"), str(e.get("token", "")), float(e["logprob"]))
            for e in probs[0].get("top_logprobs") or []
            if isinstance(e, dict) and isinstance(e.get("logprob"), (int, float))
        ]
        return out, processed if isinstance(processed, int) and not isinstance(processed, bool) else -1

    async def tokenize(self, text: str) -> list[int]:
        # /completion tokenizes a prompt string with add_special and parse_special on; so do we
        body = await self._post_json("/tokenize", {"content": text, "add_special": True, "parse_special": True})
        ids = body.get("tokens")
        if not isinstance(ids, list) or not all(type(i) is int for i in ids):
            raise NotLlamaServer(f"{self.url}/tokenize did not return token ids")
        return ids

    async def detokenize(self, ids: list[int]) -> str:
        body = await self._post_json("/detokenize", {"tokens": list(ids)})
        content = body.get("content")
        if not isinstance(content, str):
            raise NotLlamaServer(f"{self.url}/detokenize did not return text")
        return content

    async def greedy_ids(self, context: list[int], n: int, top: int = 2) -> list[tuple[int, list[tuple[int, float]]]]:
        """n greedy tokens after `context` (ids), the way a drafter takes its top-1 token, each with the
        `top` best (id, log-probability) at its position.

        A drafter does not stop at end-of-generation, the server does: when it stops early on an
        end-of-generation token, go on from the context plus what came so far. The prompt cache stays on
        so each step's longer context reuses the last one's.
        """
        out: list[tuple[int, list[tuple[int, float]]]] = []
        while len(out) < n:
            body = await self._post_json(
                "/completion",
                {
                    "prompt": [*context, *(i for i, _ in out)],
                    "n_predict": n - len(out),
                    "temperature": 0,
                    "cache_prompt": True,
                    "return_tokens": True,
                    "n_probs": top,
                    "stream": False,
                },
                timeout=120,
            )
            ids = body.get("tokens")
            if not isinstance(ids, list) or not all(type(i) is int for i in ids):
                raise NotLlamaServer(f"{self.url}/completion did not return token ids (return_tokens)")
            probs = body.get("completion_probabilities")
            probs = probs if isinstance(probs, list) else []
            for k, tid in enumerate(ids):
                entry = probs[k] if k < len(probs) and isinstance(probs[k], dict) else {}
                alts = [
                    (e["id"], float(e["logprob"]))
                    for e in entry.get("top_logprobs") or []
                    if isinstance(e, dict) and type(e.get("id")) is int and isinstance(e.get("logprob"), (int, float))
                ]
                out.append((tid, alts))
            if not ids or body.get("stop_type") != "eos":
                break  # a limit, a stop word or nothing at all: no more to ask for
        return out[:n]

    async def reset_cache(self, slot: int = 0) -> str:
        """Erase the slot's cache (needs --slot-save-path); cold runs also send cache_prompt: false."""
        try:
            r = await self.client.post(f"{self.url}/slots/{slot}?action=erase", timeout=10, headers=self._headers)
        except httpx.HTTPError:
            return "could not reach /slots to erase"
        if r.status_code == 200:
            return f"slot {slot} erased"
        if r.status_code == 501:
            return "cannot erase (server started without --slot-save-path); cold turns use cache_prompt: false"
        return f"erase answered HTTP {r.status_code}"

    async def slot_action(self, action: str, slot: int = 0, filename: str | None = None) -> SlotResult:
        return slot_result(
            action, slot, filename, await slot_action(self.client, self.url, action, slot, filename, self._headers)
        )

    async def slots(self) -> list[dict]:
        r = await self._get("/slots")
        if r.status_code != 200:
            return []
        try:
            data = r.json()
        except ValueError:
            return []
        if isinstance(data, dict):  # the docs show an object, the code returns an array
            data = list(data.values()) if all(isinstance(v, dict) for v in data.values()) else [data]
        return [s for s in data if isinstance(s, dict)] if isinstance(data, list) else []

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
            nxt = P.obj(nxt)
            total += P.count(s.get("n_ctx")) or 0
            used += (P.count(s.get("n_prompt_tokens")) or 0) + (P.count(nxt.get("n_decoded")) or 0)
        return used, total


def _speculative_from(spec: dict, params: dict) -> dict:
    out: dict = {}
    for key in ("type", "types"):
        v = spec.get(key)
        if isinstance(v, list):
            v = ",".join(str(x) for x in v if isinstance(x, str)) or None
        if P.text(v):
            out["type"] = v
    for src, dst in (("n_max", "n_max"), ("n_min", "n_min"), ("p_min", "p_min")):
        if P.scalar(spec.get(src)) is not None:
            out[dst] = spec[src]
    for key in ("model", "draft_model", "model_draft"):
        if P.basename(spec.get(key)):
            out["draft_model"] = P.basename(spec[key])
    for src in ("speculative.n_max", "speculative.n_min"):
        if P.scalar(params.get(src)) is not None:
            out[src.split(".", 1)[1]] = params[src]
    if P.text(params.get("speculative.type")):
        out["type"] = params["speculative.type"]
    return out


def slot_result(action: str, slot: int, filename: str | None, body: dict) -> SlotResult:
    """llama-server's slot reply (n_saved/n_written, n_restored/n_read, n_erased, timings) in spectui's
    terms: read here, once; a value of the wrong type is left out, never passed on."""

    def num(key: str) -> int | None:
        v = body.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

    timings = body["timings"] if isinstance(body.get("timings"), dict) else {}
    ms = timings.get(f"{action}_ms")
    name = body.get("filename")
    count_key = {"save": "n_saved", "restore": "n_restored", "erase": "n_erased"}.get(action, "")
    if body.get(count_key) is not None and num(count_key) is None:  # the count the command reports: not a guess
        raise NotLlamaServer(
            f"the server's slot {action} reply gives {count_key} = {body[count_key]!r}, not a count of tokens",
            hint="is it a llama.cpp llama-server? its slot file may or may not have been written",
        )
    return SlotResult(
        action,
        slot,
        num(count_key),
        num({"save": "n_written", "restore": "n_read"}.get(action, "")),
        name if isinstance(name, str) else filename,
        float(ms) if isinstance(ms, (int, float)) and not isinstance(ms, bool) else None,
    )


async def slot_action(
    client: httpx.AsyncClient, url: str, action: str, slot: int, filename: str | None, headers: dict | None = None
) -> dict:
    """POST /slots/{slot}?action=save|restore|erase; a one-line error naming --slot-save-path when it is off,
    and one for a slot the server does not have (llama-server b11434 answered a save of slot 99 on a 2-slot
    server with another slot's 89 tokens)."""
    if slot < 0:
        raise InputError(f"--slot must be 0 or more, not {slot}")
    total = await _total_slots(client, url, headers)
    if total is not None and slot >= total:
        raise InputError(
            f"{url} has {total} slot{'s' if total != 1 else ''} (0–{total - 1}); there is no slot {slot}",
            hint="give --slot N below the server's -np",
        )
    body = {"filename": filename} if filename else {}
    try:
        r = await client.post(
            f"{url.rstrip('/')}/slots/{slot}?action={action}", json=body, timeout=60, headers=headers or {}
        )
    except (httpx.ConnectError, httpx.ConnectTimeout):
        raise ServerUnreachable(f"cannot connect to {url}") from None
    except httpx.HTTPError as exc:
        raise ServerUnreachable(f"{url}/slots: {_why(exc)}") from None
    if r.status_code == 501:
        raise ServerHTTPError(
            f"{url} cannot {action} slot caches: it was started without --slot-save-path",
            501,
            hint="restart llama-server with --slot-save-path DIR",
        )
    if r.status_code >= 400:
        raise ServerHTTPError(f"{url} slot {action} failed (HTTP {r.status_code}): {_error_text(r)}", r.status_code)
    try:
        body = r.json()
    except ValueError:
        raise NotLlamaServer(f"{url}/slots did not answer JSON") from None
    if not isinstance(body, dict):
        raise NotLlamaServer(f"{url} answered the slot {action} with {type(body).__name__}, not an object")
    return body


async def _total_slots(client: httpx.AsyncClient, url: str, headers: dict | None = None) -> int | None:
    """The server's slot count from /props (None when it does not say)."""
    try:
        r = await client.get(f"{url.rstrip('/')}/props", timeout=10, headers=headers or {})
        return P.count(r.json().get("total_slots")) if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
