"""Contract tests: vLLM on its real captured responses; SGLang and OpenAI-compatible servers scripted.

A scripted HTTP transport (httpx.MockTransport) replays the bytes; SGLang cannot run on this machine
(its wheels and kernels are CUDA-only), so its transcripts follow SGLang 0.5.x's documented /generate
stream and meta_info (both cumulative and --incremental-streaming-output).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from spectui.backends.detect import detect, make_backend
from spectui.backends.metrics import delta, parse_metrics, total
from spectui.core.figures import SideRecorder
from spectui.core.types import GenerationParams

CAP = Path(__file__).parent.parent / "data" / "vllm-0.32.0-cpu"


def http_body(name: str) -> tuple[int, bytes]:
    raw = (CAP / name).read_bytes()
    head, _, body = raw.partition(b"\r\n\r\n")
    if not body:
        head, _, body = raw.partition(b"\n\n")
    return int(head.split(b" ")[1]), body


def run(backend, prompt="x", params=GenerationParams(max_tokens=32)):
    async def go():
        rec = SideRecorder("side")
        async for ev in backend.stream(prompt, params):
            rec.feed(ev)
        return rec

    return asyncio.run(go())


def vllm_transport(stream_file: str, speculative_metrics: str):
    def handler(req: httpx.Request) -> httpx.Response:
        path = req.url.path
        if path == "/v1/completions":
            body = json.loads(req.content)
            assert body["return_token_ids"] is True and body["stream_options"] == {"include_usage": True}
            _, data = http_body(stream_file)
            return httpx.Response(200, content=data, headers={"content-type": "text/event-stream"})
        if path == "/version":
            return httpx.Response(200, content=http_body("version.http")[1])
        if path == "/v1/models":
            return httpx.Response(200, content=http_body("v1_models.http")[1])
        if path == "/metrics":
            return httpx.Response(200, text=(CAP / speculative_metrics).read_text())
        return httpx.Response(404, json={"detail": "Not Found"})

    return httpx.MockTransport(handler)


def test_vllm_detailed_metrics_make_labels_exact():
    async def go():
        async with httpx.AsyncClient(
            transport=vllm_transport("spec_completions_stream_usage.sse", "spec_metrics_final.txt")
        ) as c:
            assert await detect("http://vllm", c) == "vllm"
            b = make_backend("vllm", "http://vllm", c)
            info = await b.identify()
            assert info.build == "vllm 0.32.0" and info.model == "smollm2" and b.speculative
            rec = SideRecorder("candidate")
            async for ev in b.stream("x", GenerationParams(max_tokens=32)):
                rec.feed(ev)
            return rec

    rec = asyncio.run(go())
    f = rec.figures
    # the captured stream: 9 chunks, per_step_accepted [3,4,4,1,4,4,1,4], per_step_drafted [4]*8, 32 tokens
    assert f.tokens == 32 and len(rec.tokens) == 32
    assert (f.drafted, f.accepted, f.steps) == (32, 25, 8)
    assert f.labels.startswith("exact (vLLM per-step counts)")
    # the last step was cut by max_tokens after 3 of its 4 accepted drafts: 24 accepted shown, 7 target tokens
    assert f.label_counts == {"first": 1, "accepted": 24, "target": 7}
    assert [t.rejected for t in rec.tokens if t.label == "target"][:3] == [1, 0, 0]
    assert rec.output().decode().startswith(" apple, banana, apple")
    assert f.mean_accepted_length == pytest.approx(1 + 25 / 8)
    assert f.server_decode_tps is None  # vLLM's tokens_per_second counts prefill: not a decode rate
    assert f.server_tps_incl_prefill == pytest.approx(189.14898608331745)


def test_vllm_metrics_names_and_deltas():
    base = parse_metrics((CAP / "base_metrics.txt").read_text())
    spec = parse_metrics((CAP / "spec_metrics_final.txt").read_text())
    assert total(base, "vllm:spec_decode_num_draft_tokens_total") is None  # no speculation: missing, not zero
    assert total(spec, "vllm:spec_decode_num_draft_tokens_total") == 3640.0
    assert total(spec, "vllm:prefix_cache_hits_total") == 640.0
    assert delta({}, spec, "vllm:spec_decode_num_accepted_tokens_total") == 2719.0
    assert delta(None, spec, "vllm:spec_decode_num_accepted_tokens_total") is None


def test_vllm_http_error_is_reported_not_raised():
    status, body = http_body("error_too_long.http")

    def handler(req):
        return httpx.Response(status, content=body)

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as c:
            b = make_backend("vllm", "http://vllm", c)
            b.model = "smollm2"
            rec = SideRecorder("x")
            async for ev in b.stream("x", GenerationParams(max_tokens=5000)):
                rec.feed(ev)
            return rec

    rec = asyncio.run(go())
    assert rec.failed is not None and "HTTP 400" in rec.failed.message and "max_tokens" in rec.failed.message


def _sse(objs):
    return "".join(f"data: {json.dumps(o)}\n\n" for o in objs).encode() + b"data: [DONE]\n\n"


SGLANG_INFO = {
    "version": "0.5.23",
    "model_path": "/models/smollm2",
    "served_model_name": "smollm2",
    "speculative_algorithm": "EAGLE3",
    "speculative_num_draft_tokens": 4,
    "disable_radix_cache": False,
    "context_length": 2048,
}


def sglang_transport(chunks: list[dict]):
    def handler(req):
        if req.url.path in ("/server_info",):
            return httpx.Response(200, json=SGLANG_INFO)
        if req.url.path == "/health":
            return httpx.Response(200)
        if req.url.path == "/generate":
            body = json.loads(req.content)
            assert body["stream"] is True and "max_new_tokens" in body["sampling_params"]
            return httpx.Response(200, content=_sse(chunks), headers={"content-type": "text/event-stream"})
        if req.url.path == "/metrics":
            return httpx.Response(200, text="sglang:token_usage 0.25\nsglang:num_used_tokens 512\n")
        if req.url.path == "/flush_cache":
            return httpx.Response(200)
        return httpx.Response(404)

    return httpx.MockTransport(handler)


META = {
    "prompt_tokens": 20,
    "completion_tokens": 9,
    "cached_tokens": 16,
    "finish_reason": {"type": "length"},
    "spec_verify_ct": 3,
    "spec_accept_length": 2.67,
}


def _chunks(cumulative: bool):
    steps = [("Hello", [1]), (" there, my", [2, 3, 4]), (" friend. How", [5, 6, 7]), (" are", [8]), (" you", [9])]
    out, text, ids = [], "", []
    for i, (t, tid) in enumerate(steps):
        text += t
        ids += tid
        meta = META if i == len(steps) - 1 else {"prompt_tokens": 20}
        out.append(
            {"text": text if cumulative else t, "output_ids": list(ids) if cumulative else tid, "meta_info": meta}
        )
    return out


@pytest.mark.parametrize("cumulative", [True, False], ids=["cumulative", "incremental"])
def test_sglang_stream_both_modes(cumulative):
    async def go():
        async with httpx.AsyncClient(transport=sglang_transport(_chunks(cumulative))) as c:
            assert await detect("http://sg", c) == "sglang"
            b = make_backend("sglang", "http://sg", c)
            info = await b.identify()
            assert info.build == "sglang 0.5.23" and info.speculative["type"] == "EAGLE3"
            assert await b.kv_usage() == (512, 2048)
            assert await b.reset_cache() == "/flush_cache done"
            rec = SideRecorder("c")
            async for ev in b.stream("x", GenerationParams(max_tokens=9)):
                rec.feed(ev)
            return rec

    rec = asyncio.run(go())
    assert rec.output() == b"Hello there, my friend. How are you"
    assert rec.figures.tokens == 9 and rec.figures.steps == 3
    assert rec.figures.accepted == 9 - 3 - 1
    assert rec.figures.prompt_cached == 16 and rec.figures.prompt_tokens == 4
    assert [t.label for t in rec.tokens[:4]] == ["first", "accepted", "accepted", "target"]
    assert rec.figures.labels.startswith("inferred from chunking")
    assert rec.figures.stop_type == "limit"


def test_openai_compatible_uses_the_bearer_token_and_labels_unknown(monkeypatch):
    from spectui.backends.detect import api_key_from

    monkeypatch.setenv("MY_GATEWAY_KEY", "sk-test-123")
    key = api_key_from("MY_GATEWAY_KEY")
    seen = []

    def handler(req):
        seen.append(req.headers.get("authorization"))
        if req.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "gw-model"}]})
        if req.url.path == "/v1/completions":
            chunks = [
                {"choices": [{"text": "Hi", "finish_reason": None}]},
                {"choices": [{"text": " there", "finish_reason": "stop"}]},
                {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}},
            ]
            return httpx.Response(200, content=_sse(chunks))
        return httpx.Response(404)

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as c:
            assert await detect("http://gw", c, {"Authorization": f"Bearer {key}"}) == "openai"
            b = make_backend("openai", "http://gw", c, key)
            await b.identify()
            rec = SideRecorder("c")
            async for ev in b.stream("x", GenerationParams(max_tokens=4)):
                rec.feed(ev)
            return rec

    rec = asyncio.run(go())
    assert all(h == "Bearer sk-test-123" for h in seen[-3:])
    assert rec.output() == b"Hi there" and rec.figures.ttft_ms is not None
    assert {t.label for t in rec.tokens[1:]} == {"unknown"}  # never guessed: the server does not say
    with pytest.raises(Exception, match="not set"):
        api_key_from("NO_SUCH_VARIABLE_SET")


def _vllm_capture_text() -> str:
    """The captured vLLM stream's text, read from the raw capture (json per `data:` line)."""
    _, body = http_body("spec_completions_stream_usage.sse")
    text = ""
    for line in body.decode().splitlines():
        if line.startswith("data: {"):
            text += "".join(c.get("text", "") for c in json.loads(line[6:]).get("choices", []))
    return text


def llamacpp_transport(text: str, pieces: int = 3):
    """A scripted llama-server (b11434's /props and /completion shapes) answering `text` in `pieces`-byte
    chunks, one token id each, then the final event."""

    def handler(req: httpx.Request) -> httpx.Response:
        if req.url.path == "/props":
            return httpx.Response(
                200,
                json={
                    "build_info": "b11434-pypi",
                    "model_path": "/m/SmolLM2-135M-Instruct.Q4_1.gguf",
                    "total_slots": 1,
                    "default_generation_settings": {"n_ctx": 2048, "params": {}},
                },
            )
        if req.url.path == "/completion":
            data = text.encode()
            chunks = [data[i : i + pieces].decode() for i in range(0, len(data), pieces)]
            events = [
                {"content": c, "tokens": [100 + k], "tokens_predicted": k + 1, "timings": {}}
                for k, c in enumerate(chunks)
            ]
            events.append({"content": "", "stop": True, "stop_type": "limit", "tokens_predicted": len(chunks)})
            body = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
            return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
        return httpx.Response(404)

    return httpx.MockTransport(handler)


@pytest.mark.parametrize("change", [None, 17, "shorter"], ids=["same", "one-byte", "prefix"])
def test_a_llamacpp_baseline_against_a_vllm_candidate_is_compared_byte_for_byte(change):
    """A mixed pair through the real backends and run loop: the same text in other token splits is
    identical (text only: two models, so no ids compared); a changed byte or a cut output differs
    exactly where the raw bytes part."""
    from spectui.core.runner import compare_prompt
    from spectui.core.types import Prompt
    from tests.oracles import first_difference

    vllm_text = _vllm_capture_text()
    text = vllm_text
    if change == "shorter":
        text = vllm_text[:-5]
    elif change is not None:
        text = vllm_text[:change] + ("X" if vllm_text[change] != "X" else "Y") + vllm_text[change + 1 :]

    async def go():
        async with (
            httpx.AsyncClient(transport=llamacpp_transport(text)) as cb,
            httpx.AsyncClient(
                transport=vllm_transport("spec_completions_stream_usage.sse", "spec_metrics_final.txt")
            ) as cv,
        ):
            assert await detect("http://llama", cb) == "llama.cpp" and await detect("http://vllm", cv) == "vllm"
            base, cand = make_backend("llama.cpp", "http://llama", cb), make_backend("vllm", "http://vllm", cv)
            await base.identify()
            await cand.identify()
            prompt = Prompt("mixed", raw="List fruit:")
            return await compare_prompt(base, cand, prompt, GenerationParams(max_tokens=32))

    r = asyncio.run(go())
    assert r.baseline.output() == text.encode() and r.candidate.output() == vllm_text.encode()
    assert r.compared == "text"  # two models: their token ids mean different things
    byte = first_difference(text.encode(), vllm_text.encode())
    if byte is None:
        assert r.identical is True and r.divergence is None
    else:
        assert r.identical is False and r.divergence.byte == byte


def test_really_cold_runs_clear_each_servers_cache():
    from spectui.labs.prefix import clear_cache

    calls = []

    def handler(req):
        calls.append((req.method, req.url.path))
        return httpx.Response(200, json={})

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as c:
            v = await clear_cache(make_backend("vllm", "http://v", c))
            s = await clear_cache(make_backend("sglang", "http://s", c))
            o = await clear_cache(make_backend("openai", "http://o", c))
            return v, s, o

    v, s, o = asyncio.run(go())
    assert ("POST", "/reset_prefix_cache") in calls and ("POST", "/flush_cache") in calls
    assert v == "/reset_prefix_cache done" and s == "/flush_cache done"
    assert "no way to clear" in o  # said, not pretended


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_the_draft_probe_says_it_is_not_available_for_vllm_and_sglang(kind):
    """README: rejected drafts are rebuilt for llama.cpp's drafters; vLLM and SGLang candidates: not
    available, said so per prompt (the result carries why, and no steps)."""
    from spectui.core.runner import compare_prompt
    from spectui.core.types import Prompt
    from spectui.run.probe import probe_prompt

    transport = (
        vllm_transport("spec_completions_stream_usage.sse", "spec_metrics_final.txt")
        if kind == "vllm"
        else sglang_transport(_chunks(True))
    )

    async def go():
        async with httpx.AsyncClient(transport=transport) as c:
            cand = make_backend(kind, f"http://{kind}", c)
            await cand.identify()
            r = await compare_prompt(cand, cand, Prompt("p", raw="x"), GenerationParams(max_tokens=9))
            return cand, await probe_prompt(cand, r)

    cand, found = asyncio.run(go())
    assert found.steps == [] and found.unavailable
    reported = cand.info.speculative.get("type") or "none reported"
    assert found.unavailable == f"no reconstruction for this server's drafter ({reported})"
