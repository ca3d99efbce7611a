"""The SGLang backend: stream /generate, read meta_info and /metrics, identify with /server_info.

Mirrors SGLang 0.5.x as documented (docs.sglang.ai, "Native APIs": POST /generate; sglang python/sglang/srt/entrypoints/http_server.py; field names vary by release): `text` and `output_ids`
are cumulative unless the server runs with --incremental-streaming-output (both are handled: a chunk
whose text does not extend the previous text is taken as an increment). At the end `meta_info` holds
`prompt_tokens`, `completion_tokens`, `cached_tokens` and, under speculation, `spec_verify_ct` (steps)
with `spec_accept_length` / `spec_accept_rate` (or older/newer spellings). Labels are inferred from
chunking (one chunk per step), as SGLang gives no per-step counts. SGLang has no chat-template
endpoint, so prompts are rendered as ChatML (OpenAIBackend.render_chat), SmolLM2's template.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from spectui.backends import props as P
from spectui.backends.base import Capabilities
from spectui.backends.chunks import ChunkLabeller
from spectui.backends.metrics import SGLANG, total
from spectui.backends.openai import STOP_TYPES, OpenAIBackend
from spectui.backends.sse import post_sse
from spectui.core.errors import BadEvent, NotLlamaServer, StreamBroken, checked, describe
from spectui.core.events import SpecReport, StreamEvent, StreamFailed, StreamFinished, StreamStarted
from spectui.core.types import GenerationParams, ServerInfo

STEP_KEYS = ("spec_verify_ct", "spec_verify_count", "spec_num_verify")
ACCEPT_LEN_KEYS = ("spec_accept_length", "spec_avg_accept_length", "avg_spec_accept_length")
ACCEPT_RATE_KEYS = ("spec_accept_rate", "spec_acceptance_rate")
ACCEPTED_KEYS = ("spec_accept_token_num", "spec_num_accepted_tokens", "spec_accepted_tokens")
DRAFTED_KEYS = ("spec_draft_token_num", "spec_num_draft_tokens", "spec_draft_tokens")


def _first(d: dict, keys):
    for k in keys:
        if d.get(k) is not None:
            return d[k]
    return None


def spec_report(meta: dict) -> SpecReport | None:
    """SGLang's end-of-request speculation fields, whichever spelling this release uses."""
    steps = _first(meta, STEP_KEYS)
    if not steps:
        return None
    steps = int(steps)
    accepted = _first(meta, ACCEPTED_KEYS)
    completion = meta.get("completion_tokens")
    if accepted is None and completion is not None:
        accepted = max(0, int(completion) - steps - 1)  # 1 prefill token, then accepted + 1 per step
    drafted = _first(meta, DRAFTED_KEYS)
    rate = _first(meta, ACCEPT_RATE_KEYS)
    if drafted is None and rate and accepted is not None:
        drafted = round(int(accepted) / float(rate))
    return SpecReport(
        "SGLang",
        None,
        None,
        steps,
        None if accepted is None else int(accepted),
        None if drafted is None else int(drafted),
        completion,
    )


def generate_body(prompt: str, params: GenerationParams) -> dict:
    """POST /generate's body: SGLang's own sampling parameters, streamed."""
    return {
        "text": prompt,
        "stream": True,
        "sampling_params": {
            "temperature": params.temperature,
            "max_new_tokens": params.max_tokens,
            "sampling_seed": params.seed,
            **({"top_p": params.top_p} if params.top_p is not None else {}),
        },
    }


class ChunkDeltas:
    """What each /generate chunk adds: SGLang streams the text so far (cumulative, its default) or only the new
    part (--incremental-streaming-output). Told apart by the second chunk with text, then held to; cumulative
    text that stops extending is a broken stream."""

    def __init__(self) -> None:
        self.text_so_far, self.ids_so_far = "", 0
        self.mode: str | None = None

    def new_part(self, text: str, ids: list | None) -> tuple[str, list | None]:
        extends = text.startswith(self.text_so_far) and (ids is None or len(ids) >= self.ids_so_far)
        if self.mode is None and self.text_so_far and text:
            self.mode = "cumulative" if extends and len(text) > len(self.text_so_far) else "incremental"
        if self.mode == "cumulative" and not extends:
            raise StreamBroken(
                f"SGLang's cumulative text stopped extending the previous text after "
                f"{len(self.text_so_far.encode('utf-8'))} bytes"
            )
        if self.mode != "incremental" and extends:
            new_text = text[len(self.text_so_far) :]
            new_ids = ids[self.ids_so_far :] if isinstance(ids, list) else None
            self.text_so_far = text
            self.ids_so_far = len(ids) if isinstance(ids, list) else self.ids_so_far
            return new_text, new_ids
        self.text_so_far += text
        self.ids_so_far += len(ids) if isinstance(ids, list) else 0
        return text, ids


class SGLangBackend(OpenAIBackend):
    kind = "sglang"
    capabilities = Capabilities(cache_reset=True, per_request_spec=True, counters=True, token_ids=True)
    counter_names = SGLANG
    ready_path = "/health"  # SGLang answers 200 here once the model is loaded

    async def identify(self) -> ServerInfo:
        body = None
        for path in ("/server_info", "/get_server_info"):
            r = await self._get(path)
            if r.status_code == 200:
                try:
                    body = r.json()
                except ValueError:
                    body = None
                break
        if not isinstance(body, dict):
            raise NotLlamaServer(f"{self.url} has no /server_info: not an SGLang server")
        # each field normalised here, once (backends.props): one type whatever the server sent
        args = P.obj(body.get("server_args")) or body
        info = ServerInfo(
            url=self.url,
            backend="sglang",
            build=f"sglang {P.name(body.get('version')) or '?'}",
            model=P.basename(args.get("served_model_name")) or P.basename(args.get("model_path")) or "?",
            n_ctx=P.count(args.get("context_length")),
        )
        algo = P.text(args.get("speculative_algorithm"))
        self.speculative = bool(algo)
        info.speculative = {"type": algo or "none"}
        if P.scalar(args.get("speculative_num_draft_tokens")) is not None:
            info.speculative["n_max"] = args["speculative_num_draft_tokens"]
        if P.text(args.get("kv_cache_dtype")) not in (None, "auto"):
            info.kv_cache = {"dtype": args["kv_cache_dtype"]}
        if P.flag(args.get("disable_radix_cache")) is not None:
            info.cache_prompt = not args["disable_radix_cache"]
        m = await self.metrics()
        info.metrics_enabled = m is not None
        self.info = info
        return info

    async def reset_cache(self) -> str:
        """POST /flush_cache (SGLang empties its radix cache when no request is running)."""
        try:
            r = await self.client.post(self.url + "/flush_cache", timeout=30, headers=self._headers)
        except httpx.HTTPError:
            return "could not reach /flush_cache"
        return (
            "/flush_cache done" if r.status_code == 200 else f"cannot clear: /flush_cache answered HTTP {r.status_code}"
        )

    async def stream(self, prompt: str, params: GenerationParams) -> AsyncIterator[StreamEvent]:
        clock = self.clock
        yield StreamStarted(clock(), prompt)
        lab = ChunkLabeller(self.speculative)
        chunks = ChunkDeltas()
        meta: dict = {}
        try:
            async for t, obj in post_sse(
                self.client,
                self.url + "/generate",
                generate_body(prompt, params),
                self._headers,
                params.idle_timeout,
                params.deadline,
                clock=clock,
            ):
                text = checked(obj, "text", str, "")
                ids = checked(obj, "output_ids", list)
                meta = checked(obj, "meta_info", dict) or meta
                new_text, new_ids = chunks.new_part(text, ids)
                n = len(new_ids) if isinstance(new_ids, list) else (1 if new_text else 0)
                for ev in lab.feed(new_text.encode("utf-8"), new_ids, n, t):
                    yield ev
        except (StreamBroken, BadEvent) as exc:
            yield StreamFailed(clock(), f"{describe(exc)} (after {lab.index} tokens)")
            return
        if not meta:
            yield StreamFailed(clock(), f"stream ended after {lab.index} tokens without meta_info")
            return
        timings = {}
        if meta.get("prompt_tokens") is not None:
            timings["prompt_n"] = meta["prompt_tokens"] - (meta.get("cached_tokens") or 0)
        if meta.get("cached_tokens") is not None:
            timings["cache_n"] = meta["cached_tokens"]
        fin = meta.get("finish_reason")
        stop = fin.get("type") if isinstance(fin, dict) else fin
        yield StreamFinished(
            clock(),
            STOP_TYPES.get(stop or "", stop or "none"),
            timings,
            meta.get("prompt_tokens"),
            spec=spec_report(meta),
        )

    async def kv_usage(self):
        m = await self.metrics()
        if not m:
            return None
        used = total(m, "sglang:num_used_tokens")
        frac = total(m, "sglang:token_usage")
        if used is not None and frac:
            return (int(used), int(round(used / frac)))
        return (int(round(frac * 1000)), 1000) if frac is not None else None
