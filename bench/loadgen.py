"""The sweep as a load generator: spectui's client against a peer client on the same scripted server.

A fast scripted server (aiohttp, its own process) streams OpenAI-compatible SSE at a fixed rate per
stream and stamps every event with its own monotonic clock (CLOCK_MONOTONIC is one clock for every
process on Linux, and Python's perf_counter reads it). At each concurrency level N, N requests go out at
once, first from spectui's sweep client (labs.sweep.levels._run_side on a vLLM-shaped backend, the code
`spectui sweep` runs), then from the peer: `vllm bench serve` (vLLM's own benchmark module, from the
vLLM environment `spectui setup --vllm` installs). For each client:

- aggregate tokens/s received: events received / (last event − first request at the server);
- client CPU per token: the client process's CPU time over the same window (sampled with psutil every
  20 ms and interpolated) / events;
- inter-token-latency error: each gap between two events as the client saw it, less the same gap as
  the server stamped it; p50 and p99 of its absolute value;
- spectui's own read lag (p99): how long its kernel-stamped chunks waited before it read them, the
  figure by which `spectui sweep` tells a user that the client, not the server, fell behind.

Prints a table per level and, last, spectui's throughput over the peer's at each level.
    python bench/loadgen.py [--levels 1,16,64,256] [--tokens 64] [--rate 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


# -- the scripted server --------------------------------------------------------------------------
def serve(port: int, tokens: int, rate: float) -> None:
    from aiohttp import web

    stamps: dict[str, list[int]] = {}
    arrivals: list[int] = []
    seq = [0]

    async def models(request):
        return web.json_response({"object": "list", "data": [{"id": "scripted", "max_model_len": 4096}]})

    async def paced(request, n_field: str, event, final):
        """Stream `n` events at `rate` per second, stamping each as it is written; event(rid, k, ms, last)
        makes one event's JSON, final(n, ms) the bytes that end the stream."""
        arrivals.append(time.perf_counter_ns())
        body = await request.json()
        n = min(int(body.get(n_field) or tokens), tokens)
        seq[0] += 1
        rid = f"r{seq[0]}"
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        mine = stamps.setdefault(rid, [])
        start = time.perf_counter()
        for k in range(n):
            delay = start + k / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            ev = event(rid, k, (time.perf_counter() - start) * 1000, k == n - 1)
            mine.append(time.perf_counter_ns())
            await resp.write(b"data: " + json.dumps(ev).encode() + b"\n\n")
        await resp.write(final(n, (time.perf_counter() - start) * 1000))
        await resp.write_eof()
        return resp

    def text(rid: str, k: int) -> str:  # the request id leads its first token: clients' rows are matched by it
        return f"{rid}t{k} " if k == 0 else f"t{k} "

    async def completions(request):
        """OpenAI-compatible, as vLLM streams it: choices[0].text and token_ids per chunk, finish_reason on
        the last token's chunk, then a usage chunk with no choices, then [DONE]."""

        def final(n, ms):
            end = {
                "object": "text_completion",
                "model": "scripted",
                "choices": [],
                "usage": {"prompt_tokens": 8, "completion_tokens": n},
            }
            return b"data: " + json.dumps(end).encode() + b"\n\ndata: [DONE]\n\n"

        def event(rid, k, ms, last):
            choice = {"index": 0, "text": text(rid, k), "token_ids": [1000 + k]}
            choice["finish_reason"] = "length" if last else None
            return {"id": rid, "object": "text_completion", "model": "scripted", "choices": [choice]}

        return await paced(request, "max_tokens", event, final)

    async def completion(request):
        """llama.cpp-shaped: content, tokens, tokens_predicted and cumulative timings on every event; the
        last event has stop: true and no [DONE]."""

        def final(n, ms):
            end = {
                "content": "",
                "tokens": [],
                "tokens_predicted": n,
                "tokens_evaluated": 8,
                "stop": True,
                "stop_type": "limit",
                "timings": {"prompt_n": 8, "prompt_ms": 1.0, "predicted_n": n, "predicted_ms": ms},
            }
            return b"data: " + json.dumps(end).encode() + b"\n\n"

        return await paced(
            request,
            "n_predict",
            lambda rid, k, ms, last: {
                "content": text(rid, k),
                "tokens": [1000 + k],
                "tokens_predicted": k + 1,
                "tokens_evaluated": 8,
                "stop": False,
                "timings": {"prompt_n": 8, "prompt_ms": 1.0, "predicted_n": k + 1, "predicted_ms": ms},
            },
            final,
        )

    async def dump(request):
        out = {"stamps": stamps, "arrivals": arrivals}
        return web.json_response(out)

    async def reset(request):
        stamps.clear()
        arrivals.clear()
        return web.json_response({"ok": True})

    app = web.Application()
    app.add_routes(
        [
            web.get("/v1/models", models),
            web.post("/v1/completions", completions),
            web.post("/completion", completion),
            web.get("/stamps", dump),
            web.post("/reset", reset),
            web.get("/health", models),
        ]
    )
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


# -- spectui's client, as its own process ----------------------------------------------------------
def spectui_client(url: str, n: int, tokens: int, out: str, shape: str = "openai") -> None:

    from spectui.backends.vllm import VLLMBackend
    from spectui.core.types import GenerationParams
    from spectui.labs.sweep.levels import _run_side

    async def go():
        from spectui.backends.transport import stamped_client

        async with stamped_client(n * 2 + 4) as client:  # the client `spectui sweep` uses
            if shape == "llamacpp":  # /completion, parsed and labelled as a llama-server's stream
                from spectui.backends.llamacpp import LlamaCppBackend

                b = LlamaCppBackend(url, client)
            else:
                b = VLLMBackend(url, client)
                await b.identify()
            lvl = await _run_side(b, [f"p{i}" for i in range(n)], GenerationParams(max_tokens=tokens), "x")
            rows = []
            for r in lvl.recorders:
                first = r.tokens[0].data.decode() if r.tokens else ""
                rows.append(
                    {"rid": first.split("t", 1)[0], "t_ns": [t.t_ns for t in r.tokens], "failed": bool(r.failed)}
                )
            Path(out).write_text(json.dumps({"rows": rows, "read_lag_ms": lvl.read_lag_ms}))

    asyncio.run(go())


# -- the orchestration -----------------------------------------------------------------------------
def sample_cpu(pid: int, stop, samples: list) -> None:
    import psutil

    try:
        p = psutil.Process(pid)
        while not stop.is_set():
            c = p.cpu_times()
            samples.append((time.perf_counter_ns(), c.user + c.system))
            time.sleep(0.02)
    except Exception:
        pass


def cpu_between(samples: list, a: int, b: int) -> float | None:
    def at(t):
        prev = None
        for ts, c in samples:
            if ts >= t:
                return c if prev is None else prev[1] + (c - prev[1]) * (t - prev[0]) / max(1, ts - prev[0])
            prev = (ts, c)
        return samples[-1][1] if samples else None

    x, y = at(a), at(b)
    return None if x is None or y is None else y - x


def run_client(argv: list[str], env=None) -> list:
    import threading

    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    stop, samples = threading.Event(), []
    th = threading.Thread(target=sample_cpu, args=(proc.pid, stop, samples), daemon=True)
    th.start()
    _, err = proc.communicate(timeout=600)
    stop.set()
    th.join()
    if proc.returncode != 0:
        raise RuntimeError(f"client failed: {err.decode()[-800:]}")
    return samples


def figures(client_rows: dict[str, list[int]], server: dict, samples: list) -> dict:
    stamps = server["stamps"]
    events = sum(len(v) for v in client_rows.values())
    first_arrival = min(server["arrivals"]) if server["arrivals"] else 0
    last = max((v[-1] for v in stamps.values() if v), default=first_arrival)
    window_s = (max((v[-1] for v in client_rows.values() if v), default=last) - first_arrival) / 1e9
    errors = []
    for rid, ts in client_rows.items():
        srv = stamps.get(rid) or []
        for k in range(1, min(len(ts), len(srv))):
            errors.append(abs((ts[k] - ts[k - 1]) - (srv[k] - srv[k - 1])) / 1e6)
    errors.sort()
    cpu = cpu_between(samples, first_arrival, max((v[-1] for v in client_rows.values() if v), default=last))

    def pct(p):
        return errors[min(len(errors) - 1, int(p * len(errors)))] if errors else float("nan")

    return {
        "events": events,
        "tokens_per_s": events / window_s if window_s > 0 else float("nan"),
        "cpu_us_per_token": (cpu / events * 1e6) if cpu is not None and events else float("nan"),
        "itl_err_p50_ms": pct(0.50),
        "itl_err_p99_ms": pct(0.99),
    }


def main(levels: list[int], tokens: int, rate: float) -> None:
    import httpx

    from spectui.machine import assets
    from spectui.machine.launcher import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--tokens", str(tokens), "--rate", str(rate)]
    )
    vpy, hf = assets.find_vllm_python(), assets.find_hf_model()
    try:
        for _ in range(100):
            try:
                httpx.get(url + "/health", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        print(f"scripted server {url}: {tokens} tokens a request at {rate:g} tokens/s per stream")
        print(
            f"{'N':>4} {'client':<10} {'tok/s':>9} {'CPU µs/tok':>11} {'ITL err p50':>12} {'p99 ms':>8} "
            f"{'read lag p99 ms':>16}"
        )
        ratios = []
        for n in levels:
            row = {}
            with tempfile.TemporaryDirectory() as d:
                # spectui's sweep client, and the same on llama.cpp-shaped SSE (row spectui/l: its labeller
                # and timings on every event)
                out = Path(d) / "spectui.json"
                for name, extra in (
                    ("spectui", []),
                    ("spectui/l", ["--shape", "llamacpp"]),
                ):
                    httpx.post(url + "/reset")
                    argv = [sys.executable, __file__, "--spectui-client", url, "--n", str(n), "--tokens", str(tokens)]
                    samples = run_client([*argv, "--out", str(out), *extra])
                    doc = json.loads(out.read_text())
                    rows = {r["rid"]: r["t_ns"] for r in doc["rows"]}
                    row[name] = figures(rows, httpx.get(url + "/stamps").json(), samples)
                    row[name]["read_lag_p99_ms"] = (doc["read_lag_ms"] or [None, None])[1]
                # the peer: vllm bench serve
                if vpy is not None:
                    httpx.post(url + "/reset")
                    argv = [
                        str(vpy),
                        str(ROOT / "bench" / "_vllm_bench.py"),
                        "--backend",
                        "openai",
                        "--base-url",
                        url,
                        "--endpoint",
                        "/v1/completions",
                        "--model",
                        "scripted",
                        "--tokenizer",
                        str(hf),
                        "--dataset-name",
                        "random",
                        "--random-input-len",
                        "8",
                        "--random-output-len",
                        str(tokens),
                        "--num-prompts",
                        str(n),
                        "--max-concurrency",
                        str(n),
                        "--ignore-eos",
                        "--save-result",
                        "--save-detailed",
                        "--result-dir",
                        d,
                        "--result-filename",
                        "peer.json",
                        "--disable-tqdm",
                        "--seed",
                        "1",
                    ]
                    samples = run_client(argv, env={**os.environ, "HF_HUB_OFFLINE": "1"})
                    doc = json.loads((Path(d) / "peer.json").read_text())
                    srv = httpx.get(url + "/stamps").json()
                    peer_rows = {}  # its own perf_counter readings: the same monotonic clock as ours
                    for text, start, ttft, itls in zip(
                        doc["generated_texts"], doc["start_times"], doc["ttfts"], doc["itls"]
                    ):
                        t = start + ttft
                        ts = [t]
                        for gap in itls:
                            t += gap
                            ts.append(t)
                        peer_rows[text.split("t", 1)[0]] = [int(x * 1e9) for x in ts]
                    row["vllm bench"] = figures(peer_rows, srv, samples)
            for name, f in row.items():
                print(
                    f"{n:>4} {name:<10} {f['tokens_per_s']:>9.0f} {f['cpu_us_per_token']:>11.1f} "
                    f"{f['itl_err_p50_ms']:>12.3f} {f['itl_err_p99_ms']:>8.3f} "
                    + (f"{f['read_lag_p99_ms']:>16.3f}" if f.get("read_lag_p99_ms") is not None else f"{'—':>16}"),
                    flush=True,
                )
            if "vllm bench" in row:
                ratios.append((n, row["spectui"]["tokens_per_s"] / row["vllm bench"]["tokens_per_s"]))
        if ratios:
            print("spectui / vllm bench throughput: " + ", ".join(f"N={n} {r:.3f}" for n, r in ratios))
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--levels", default="1,16,64,256")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--spectui-client", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--shape", default="openai", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve:
        serve(a.serve, a.tokens, a.rate)
    elif a.spectui_client:
        spectui_client(a.spectui_client, a.n, a.tokens, a.out, a.shape)
    else:
        main([int(x) for x in a.levels.split(",")], a.tokens, a.rate)
