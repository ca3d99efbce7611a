"""Results from the benchmark tools people already run, as lab-notebook measurements.

`spectui import vllm-bench|aiperf|guidellm FILE` reads the tool's own result file, checks that it is
that tool's (a file of another tool, or a layout spectui does not know, is a one-line error), maps what
the notebook has names for — throughput, TTFT, inter-token latency, time per output token, acceptance —
and keeps every other scalar under the tool's own key. Each measurement says which tool and version
made it (where the file does not carry the version, it says so).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

from spectui.core.errors import InputError

TOOLS = ("vllm-bench", "aiperf", "guidellm")
LONG_LIST = 16  # per-request arrays (one value per request) stay in the tool's file, not the notebook


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _scalars(d: dict, skip: set[str], requests: int | None = None) -> dict:
    """The tool's own values spectui has no name for: scalars and short lists (per-request arrays, one value
    per request, are left out: they stay in the tool's file)."""
    out: dict = {}
    for k, v in d.items():
        if k in skip or v is None:
            continue
        if isinstance(v, (str, int, float, bool)):
            out[k] = v
        elif (
            isinstance(v, list)
            and len(v) <= LONG_LIST
            and len(v) != requests
            and all(isinstance(x, (int, float, str)) for x in v)
        ):
            out[k] = v
    return out


def _kept(m: dict) -> dict:
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in m.items() if v is not None}


# -- vLLM: `vllm bench serve --save-result` ------------------------------------------------------------
VLLM_SIGNATURE = {"backend", "completed", "total_output_tokens", "output_throughput", "mean_ttft_ms"}
VLLM_MAPPED = {
    "output_throughput": "output_tokens_per_s",
    "total_token_throughput": "total_tokens_per_s",
    "request_throughput": "requests_per_s",
    "mean_ttft_ms": "ttft_ms_mean",
    "median_ttft_ms": "ttft_ms_median",
    "p99_ttft_ms": "ttft_ms_p99",
    "mean_itl_ms": "itl_ms_mean",
    "median_itl_ms": "itl_ms_median",
    "p99_itl_ms": "itl_ms_p99",
    "mean_tpot_ms": "tpot_ms_mean",
    "median_tpot_ms": "tpot_ms_median",
    "p99_tpot_ms": "tpot_ms_p99",
    "completed": "requests_completed",
    "failed": "requests_failed",
    "max_concurrency": "concurrency",
    "model_id": "model",
    "spec_decode_draft_tokens": "drafted",
    "spec_decode_accepted_tokens": "accepted",
    "spec_decode_acceptance_length": "mean_accepted_length",
}


def from_vllm_bench(doc: dict) -> list[dict]:
    m: dict = {"source_tool": "vllm bench serve", "source_version": doc.get("vllm_version") or "not in the file"}
    for src, dst in VLLM_MAPPED.items():
        if doc.get(src) is not None:
            m[dst] = doc[src]
    rate = _num(doc.get("spec_decode_acceptance_rate"))
    if rate is not None:
        m["acceptance_rate"] = rate / 100  # vLLM writes a percentage; the notebook a fraction
    requests = doc.get("num_prompts") if isinstance(doc.get("num_prompts"), int) else None
    m["vllm_bench"] = _scalars(doc, set(VLLM_MAPPED) | {"spec_decode_acceptance_rate"}, requests)
    return [_kept(m)]


# -- NVIDIA AIPerf: profile_export_aiperf.json ------------------------------------------------------
AIPERF_METRICS = {
    "output_token_throughput": "output_tokens_per_s",
    "request_throughput": "requests_per_s",
    "time_to_first_token": "ttft_ms",
    "inter_token_latency": "itl_ms",
    "request_latency": "request_latency_ms",
}


def from_aiperf(doc: dict) -> list[dict]:
    m: dict = {"source_tool": "aiperf"}
    version = doc.get("aiperf_version") or (doc.get("input_config") or {}).get("aiperf_version")
    m["source_version"] = version or "not in the file"
    records = doc.get("records") if isinstance(doc.get("records"), dict) else doc
    unmapped: dict = {}
    for tag, value in records.items():
        if not isinstance(value, dict) or "unit" not in value:
            if isinstance(value, (str, int, float, bool)) and tag not in ("aiperf_version",):
                unmapped[tag] = value  # schema_version, benchmark_id, was_cancelled, …
            continue
        name = AIPERF_METRICS.get(tag)
        for stat in ("avg", "p50", "p99"):
            v = _num(value.get(stat))
            if v is None:
                continue
            if name is not None:
                suffix = {"avg": "mean", "p50": "median", "p99": "p99"}[stat]
                key = name if name.endswith("_per_s") else f"{name}_{suffix}"
                if name.endswith("_per_s") and stat != "avg":
                    continue
                m[key] = v
            else:
                unmapped[f"{tag}_{stat}"] = v
    items = ((doc.get("input_config") or {}).get("models") or {}).get("items") or []
    if items and isinstance(items[0], dict) and items[0].get("name"):
        m["model"] = items[0]["name"]
    endpoint = (doc.get("input_config") or {}).get("endpoint") or {}
    if endpoint.get("urls"):
        m["url"] = endpoint["urls"][0]
    m["aiperf"] = unmapped
    return [_kept(m)]


# -- guidellm: benchmarks.json -------------------------------------------------------------------------
GUIDELLM_MAPPED = {
    "output_tokens_per_second",
    "requests_per_second",
    "time_to_first_token_ms",
    "inter_token_latency_ms",
    "time_per_output_token_ms",
    "request_latency",
    "request_totals",
}


def from_guidellm(doc: dict) -> list[dict]:
    out = []
    version = (doc.get("metadata") or {}).get("guidellm_version") or doc.get("guidellm_version")
    for i, bench in enumerate(doc.get("benchmarks") or [], 1):
        if not isinstance(bench, dict):
            continue
        metrics = bench.get("metrics") or {}
        m: dict = {"source_tool": "guidellm", "source_version": version or "not in the file", "benchmark": i}
        strategy = (bench.get("config") or {}).get("strategy") or bench.get("scheduler", {}).get("strategy") or {}
        if isinstance(strategy, dict) and strategy.get("type_"):
            m["strategy"] = strategy["type_"]
        for tag, name in (
            ("output_tokens_per_second", "output_tokens_per_s"),
            ("requests_per_second", "requests_per_s"),
            ("time_to_first_token_ms", "ttft_ms"),
            ("inter_token_latency_ms", "itl_ms"),
            ("time_per_output_token_ms", "tpot_ms"),
            ("request_latency", "request_latency_s"),
        ):
            dist = (metrics.get(tag) or {}).get("successful") or {}
            if not isinstance(dist, dict):
                continue
            pct = dist.get("percentiles") or {}
            if name.endswith("_per_s"):
                if _num(dist.get("mean")) is not None:
                    m[name] = dist["mean"]
                continue
            for key, v in (("mean", dist.get("mean")), ("median", dist.get("median")), ("p99", pct.get("p99"))):
                if _num(v) is not None:
                    m[f"{name}_{key}"] = v
        own: dict = {}
        for tag, value in metrics.items():  # every other distribution guidellm reports, by its own name
            dist = value.get("successful") if isinstance(value, dict) else None
            if tag in GUIDELLM_MAPPED or not isinstance(dist, dict):
                continue
            for key, v in (
                ("mean", dist.get("mean")),
                ("median", dist.get("median")),
                ("p99", (dist.get("percentiles") or {}).get("p99")),
            ):
                if _num(v) is not None:
                    own[f"{tag}_{key}"] = v
        totals = metrics.get("request_totals") or {}
        for k in ("successful", "errored", "incomplete", "total"):
            if _num(totals.get(k)) is not None:
                own[f"requests_{k}"] = totals[k]
        if _num(bench.get("duration")) is not None:
            own["duration"] = bench["duration"]
        m["guidellm"] = own
        out.append(_kept(m))
    return out


def _looks_like(doc) -> str | None:
    if not isinstance(doc, dict):
        return None
    if VLLM_SIGNATURE <= set(doc):
        return "vllm-bench"
    if "benchmarks" in doc and isinstance(doc.get("benchmarks"), list):
        return "guidellm"
    records = doc.get("records") if isinstance(doc.get("records"), dict) else doc
    if any(isinstance(v, dict) and "unit" in v and "avg" in v for v in records.values()):
        return "aiperf"
    return None


READERS: dict[str, Callable[[dict], list[dict]]] = {
    "vllm-bench": from_vllm_bench,
    "aiperf": from_aiperf,
    "guidellm": from_guidellm,
}


def read(tool: str, path: Path, version: str | None = None) -> list[dict]:
    """The tool's result file as notebook measurements; InputError for a file that is not that tool's."""
    if tool not in READERS:
        raise InputError(f"unknown tool {tool!r}", hint=f"one of {', '.join(TOOLS)}")
    try:
        doc = json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise InputError(f"{path} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a folder", hint="give the tool's result file") from None
    except UnicodeDecodeError:
        raise InputError(f"{path} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not JSON (line {exc.lineno}: {exc.msg})") from None
    found = _looks_like(doc)
    if found != tool:
        what = f"looks like a {found} result" if found else "is not a result file spectui knows"
        raise InputError(f"{path} {what}, not {tool}'s", hint=f"spectui import {found} {path}" if found else "")
    rows = READERS[tool](doc)
    if not rows:
        raise InputError(f"{path} holds no results")
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    if version:  # the user's word for a file that does not carry its tool's version
        rows = [{**m, "source_version": version} for m in rows]
    return [{"date": now, "kind": "import", "source_file": str(path.name), **m} for m in rows]
