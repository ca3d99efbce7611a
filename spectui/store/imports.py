"""Results from the benchmark tools people already run, as lab-notebook measurements.

`spectui import vllm-bench|aiperf|guidellm FILE` reads the tool's own result file, checks that it is
that tool's (a file of another tool, or a layout spectui does not know, is a one-line error), maps what
the notebook has names for — throughput, TTFT, inter-token latency, time per output token, acceptance —
and keeps every other scalar under the tool's own key. Each measurement says which tool and version
made it (where the file does not carry the version, it says so).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from pathlib import Path

from spectui.core.errors import InputError
from spectui.store.bounded import load_json_file

RESULT_MAX = 256 << 20  # a benchmark tool's result file with per-request records is tens of MiB

TOOLS = ("vllm-bench", "aiperf", "guidellm")
LONG_LIST = 16  # per-request arrays (one value per request) stay in the tool's file, not the notebook
_KINDS = {dict: "an object", list: "an array", str: "text", bool: "true/false", type(None): "null"}


def _kind(v) -> str:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v).replace("inf", "Infinity").replace("nan", "NaN")
    return _KINDS.get(type(v), "a number" if isinstance(v, (int, float)) else type(v).__name__)


class Schema:
    """Typed reads of one tool's file: each value spectui takes is checked where it is taken, and a
    value of the wrong type (or NaN/Infinity as a figure) is one line naming the file and the field,
    never a traceback and never a notebook entry that breaks `notebook show`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def wrong(self, where: str, v, wanted: str) -> InputError:
        return InputError(
            f"{self.path.name}: {where} is {_kind(v)}, not {wanted}",
            hint="the file is damaged or from a version of the tool spectui does not read",
        )

    def obj(self, d: dict, key: str, where: str = "") -> dict:
        """An object field; absent or null is an empty object."""
        v = d.get(key)
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise self.wrong(where + key, v, "an object")
        return v

    def arr(self, d: dict, key: str, where: str = "") -> list:
        v = d.get(key)
        if v is None:
            return []
        if not isinstance(v, list):
            raise self.wrong(where + key, v, "an array")
        return v

    def text(self, d: dict, key: str, where: str = "") -> str | None:
        v = d.get(key)
        if v is None:
            return None
        if not isinstance(v, str):
            raise self.wrong(where + key, v, "text")
        return v

    def figure(self, d: dict, key: str, where: str = "") -> int | float | None:
        """A number the notebook keeps: finite (NaN and Infinity are not figures), never true/false."""
        v = d.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self.wrong(where + key, v, "a finite number")
        return v

    def scalars(self, d: dict, skip: set[str], requests: int | None = None, where: str = "") -> dict:
        """The tool's own values spectui has no name for: scalars and short lists (per-request arrays,
        one value per request, stay in the tool's file). Numbers among them are figures too."""
        out: dict = {}
        for k, v in d.items():
            if k in skip or v is None:
                continue
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[k] = self.figure(d, k, where)
            elif isinstance(v, (str, bool)):
                out[k] = v
            elif (
                isinstance(v, list)
                and len(v) <= LONG_LIST
                and len(v) != requests
                and all(isinstance(x, (int, float, str)) and not isinstance(x, bool) for x in v)
            ):
                for i, x in enumerate(v):
                    if isinstance(x, float) and not math.isfinite(x):
                        raise self.wrong(f"{where}{k}[{i}]", x, "a finite number")
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


VLLM_TEXT = {"model_id"}


def from_vllm_bench(doc: dict, t: Schema) -> list[dict]:
    m: dict = {"source_tool": "vllm bench serve", "source_version": t.text(doc, "vllm_version") or "not in the file"}
    for src, dst in VLLM_MAPPED.items():
        v = t.text(doc, src) if src in VLLM_TEXT else t.figure(doc, src)
        if v is not None:
            m[dst] = v
    rate = t.figure(doc, "spec_decode_acceptance_rate")
    if rate is not None:
        m["acceptance_rate"] = rate / 100  # vLLM writes a percentage; the notebook a fraction
    requests = doc.get("num_prompts") if isinstance(doc.get("num_prompts"), int) else None
    m["vllm_bench"] = t.scalars(doc, set(VLLM_MAPPED) | {"spec_decode_acceptance_rate"}, requests)
    return [_kept(m)]


# -- NVIDIA AIPerf: profile_export_aiperf.json ------------------------------------------------------
AIPERF_METRICS = {
    "output_token_throughput": "output_tokens_per_s",
    "request_throughput": "requests_per_s",
    "time_to_first_token": "ttft_ms",
    "inter_token_latency": "itl_ms",
    "request_latency": "request_latency_ms",
}


def from_aiperf(doc: dict, t: Schema) -> list[dict]:
    m: dict = {"source_tool": "aiperf"}
    config = t.obj(doc, "input_config")
    version = t.text(doc, "aiperf_version") or t.text(config, "aiperf_version", "input_config.")
    m["source_version"] = version or "not in the file"
    records: dict = doc["records"] if isinstance(doc.get("records"), dict) else doc
    unmapped: dict = {}
    for tag, value in records.items():
        if not isinstance(value, dict) or "unit" not in value:
            if isinstance(value, (str, int, float, bool)) and tag not in ("aiperf_version",):
                unmapped.update(t.scalars({tag: value}, set()))  # schema_version, benchmark_id, was_cancelled, …
            continue
        name = AIPERF_METRICS.get(tag)
        for stat in ("avg", "p50", "p99"):
            v = t.figure(value, stat, f"{tag}.")
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
    items = t.arr(t.obj(config, "models", "input_config."), "items", "input_config.models.")
    if items:
        first = items[0] if isinstance(items[0], dict) else None
        if first is None:
            raise t.wrong("input_config.models.items[0]", items[0], "an object")
        model = t.text(first, "name", "input_config.models.items[0].")
        if model:
            m["model"] = model
    urls = t.arr(t.obj(config, "endpoint", "input_config."), "urls", "input_config.endpoint.")
    if urls:
        if not isinstance(urls[0], str):
            raise t.wrong("input_config.endpoint.urls[0]", urls[0], "text")
        m["url"] = urls[0]
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


def from_guidellm(doc: dict, t: Schema) -> list[dict]:
    out = []
    version = t.text(t.obj(doc, "metadata"), "guidellm_version", "metadata.") or t.text(doc, "guidellm_version")
    for i, bench in enumerate(t.arr(doc, "benchmarks"), 1):
        at = f"benchmarks[{i - 1}]."
        if not isinstance(bench, dict):
            raise t.wrong(at[:-1], bench, "an object")
        metrics = t.obj(bench, "metrics", at)
        m: dict = {"source_tool": "guidellm", "source_version": version or "not in the file", "benchmark": i}
        strategy = t.obj(t.obj(bench, "config", at), "strategy", at + "config.") or t.obj(
            t.obj(bench, "scheduler", at), "strategy", at + "scheduler."
        )
        if t.text(strategy, "type_", at + "config.strategy."):
            m["strategy"] = strategy["type_"]
        m.update(_guidellm_mapped(metrics, at, t))
        m["guidellm"] = _guidellm_own(bench, metrics, at, t)
        out.append(_kept(m))
    return out


def _guidellm_mapped(metrics: dict, at: str, t: Schema) -> dict:
    """The distributions spectui has its own names for (rates: their mean; latencies: mean, median, p99)."""
    m: dict = {}
    for tag, name in (
        ("output_tokens_per_second", "output_tokens_per_s"),
        ("requests_per_second", "requests_per_s"),
        ("time_to_first_token_ms", "ttft_ms"),
        ("inter_token_latency_ms", "itl_ms"),
        ("time_per_output_token_ms", "tpot_ms"),
        ("request_latency", "request_latency_s"),
    ):
        where = f"{at}metrics.{tag}."
        dist = t.obj(t.obj(metrics, tag, at + "metrics."), "successful", where)
        where += "successful."
        if name.endswith("_per_s"):
            if (v := t.figure(dist, "mean", where)) is not None:
                m[name] = v
            continue
        pct = t.obj(dist, "percentiles", where)
        for key, v in (
            ("mean", t.figure(dist, "mean", where)),
            ("median", t.figure(dist, "median", where)),
            ("p99", t.figure(pct, "p99", where + "percentiles.")),
        ):
            if v is not None:
                m[f"{name}_{key}"] = v
    return m


def _guidellm_own(bench: dict, metrics: dict, at: str, t: Schema) -> dict:
    """Every other distribution guidellm reports, by its own name, with the request totals and the duration."""
    own: dict = {}
    for tag, value in metrics.items():
        succ = value.get("successful") if isinstance(value, dict) else None
        if tag in GUIDELLM_MAPPED or not isinstance(succ, dict):
            continue
        where = f"{at}metrics.{tag}.successful."
        for key, v in (
            ("mean", t.figure(succ, "mean", where)),
            ("median", t.figure(succ, "median", where)),
            ("p99", t.figure(t.obj(succ, "percentiles", where), "p99", where + "percentiles.")),
        ):
            if v is not None:
                own[f"{tag}_{key}"] = v
    totals = t.obj(metrics, "request_totals", at + "metrics.")
    for k in ("successful", "errored", "incomplete", "total"):
        if (v := t.figure(totals, k, at + "metrics.request_totals.")) is not None:
            own[f"requests_{k}"] = v
    if (v := t.figure(bench, "duration", at)) is not None:
        own["duration"] = v
    return own


def _looks_like(doc) -> str | None:
    if not isinstance(doc, dict):
        return None
    if VLLM_SIGNATURE <= set(doc):
        return "vllm-bench"
    if "benchmarks" in doc and isinstance(doc.get("benchmarks"), list):
        return "guidellm"
    records: dict = doc["records"] if isinstance(doc.get("records"), dict) else doc
    if any(isinstance(v, dict) and "unit" in v and "avg" in v for v in records.values()):
        return "aiperf"
    return None


READERS: dict[str, Callable[[dict, Schema], list[dict]]] = {
    "vllm-bench": from_vllm_bench,
    "aiperf": from_aiperf,
    "guidellm": from_guidellm,
}


def read(tool: str, path: Path, version: str | None = None) -> list[dict]:
    """The tool's result file as notebook measurements; InputError for a file that is not that tool's."""
    if tool not in READERS:
        raise InputError(f"unknown tool {tool!r}", hint=f"one of {', '.join(TOOLS)}")
    doc = load_json_file(path, f"{tool} result file", RESULT_MAX)  # the one bounded loader: type, size, depth
    found = _looks_like(doc)
    if found != tool:
        what = f"looks like a {found} result" if found else "is not a result file spectui knows"
        raise InputError(f"{path} {what}, not {tool}'s", hint=f"spectui import {found} {path}" if found else "")
    rows = READERS[tool](doc, Schema(path))
    if not rows:
        raise InputError(f"{path} holds no results")
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    if version:  # the user's word for a file that does not carry its tool's version
        rows = [{**m, "source_version": version} for m in rows]
    return [{"date": now, "kind": "import", "source_file": str(path.name), **m} for m in rows]
