"""Hardening, round 2 (issue 26): each case failed (a traceback, a leak, a wrong figure) before its fix.

Expected values are written from the input, not read back from spectui's output.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spectui.core.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args, env=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "spectui", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def one_line_error(r) -> str:
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("spectui: error: "), r.stderr
    return lines[0]


# -- item 5: credentials, redacted in one place ----------------------------------------------------------
def test_registered_url_credentials_are_redacted_exactly_and_nothing_else():
    from spectui.core.errors import redact_credentials, register_urls_in

    register_urls_in(["compare", "--baseline", "http://u1:pass-9@h:1", "--candidate=https://k:v@h:2/x"])
    doc = '{"baseline_token": "abc", "text": "see http://u1:pass-9@h:1 and k:v@"}'
    out = redact_credentials(doc)
    assert "pass-9" not in out and "k:v@" not in out
    assert '"baseline_token": "abc"' in out  # a document's own fields are never touched


def test_the_console_stream_redacts_what_passes_through():
    from spectui.core.errors import redacting_stream, register_url

    register_url("http://carol:pw-77@127.0.0.1:5")
    raw = io.StringIO()
    stream = redacting_stream(raw)
    print("spectui: baseline http://carol:pw-77@127.0.0.1:5 is llama.cpp", file=stream)
    assert raw.getvalue() == "spectui: baseline http://***@127.0.0.1:5 is llama.cpp\n"
    assert redacting_stream(stream) is stream


def test_error_lines_are_redacted_even_when_printed_raw():
    from spectui.core.errors import ServerUnreachable

    assert "pw" not in ServerUnreachable("cannot connect to http://dave:pw@h:1").one_line()


# -- item 11: the Markdown report escapes what servers say ------------------------------------------------
def test_markdown_report_escapes_server_supplied_text():
    from spectui.core.report import markdown_report
    from spectui.core.types import GenerationParams, ServerInfo

    evil = ServerInfo(url="http://eve:pw@h:1/<b>", build="<script>alert(1)</script>|x", model="m|`x`*_[a](b)")
    plain = ServerInfo(url="http://h:2", build="b1", model="m")
    md = markdown_report({"baseline": evil, "candidate": plain}, [], GenerationParams(), "sequential")
    assert "<script>" not in md and "<b>" not in md and "pw@" not in md
    row = next(ln for ln in md.splitlines() if ln.startswith("| baseline |"))
    # five cells: an escaped pipe (\|) does not end one
    assert row.replace("\\|", "").count("|") == 6
    assert "&lt;script&gt;" in row and "m\\|\\`x\\`\\*\\_\\[a\\](b)" in row


# -- items 7, 8, 12: imported values are checked by type; `notebook show` survives any value --------------
TOOLS = ROOT / "tests" / "data" / "tools"
TOOL_FILES = {
    "vllm-bench": TOOLS / "vllm-bench-0.32.0-vllm-ngram.json",
    "aiperf": TOOLS / "aiperf-0.13.0-llamacpp.json",
    "guidellm": TOOLS / "guidellm-0.8.1-llamacpp.json",
}
WRONG = ["fast", 7, [1, "x"], {"a": 1}, True, float("nan"), float("inf")]
FIGURE_SUFFIXES = ("_per_s", "_mean", "_median", "_p99", "_rate")
FIGURE_NAMES = {"drafted", "accepted", "requests_completed", "requests_failed", "concurrency", "mean_accepted_length"}


def _paths(obj, depth=0, pre=()):
    """Every field of a result file down to depth 6 (the first element of each array)."""
    if pre:
        yield pre
    if depth >= 6:
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, depth + 1, (*pre, k))
    elif isinstance(obj, list) and obj:
        yield from _paths(obj[0], depth + 1, (*pre, 0))


def _clean(v) -> bool:
    """What a notebook row may hold: text, true/false, finite numbers, dates, and lists/tables of those."""
    import datetime as dt
    import math

    if isinstance(v, dict):
        return all(isinstance(k, str) and _clean(x) for k, x in v.items())
    if isinstance(v, list):
        return all(_clean(x) for x in v)
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, (str, int, bool, dt.datetime))


@pytest.mark.parametrize("tool", list(TOOL_FILES))
def test_every_field_of_the_wrong_type_is_a_line_or_a_clean_row(tool):
    """Each field of a real result file in turn set to text, a number, a list, an object, true, NaN and
    Infinity: the import is either one InputError or rows that hold only clean values. (On the old code
    'output_throughput': 'fast' went into the notebook, and wrong-typed nested fields raised
    AttributeError and TypeError.)"""
    from spectui.store import imports

    path = TOOL_FILES[tool]
    doc = json.loads(path.read_text())
    schema = imports.Schema(path)
    refused = 0
    for where in list(_paths(doc)):
        parent = doc
        for k in where[:-1]:
            parent = parent[k]
        original = parent[where[-1]]
        for value in WRONG:
            parent[where[-1]] = value
            try:
                if imports._looks_like(doc) != tool:
                    continue
                rows = imports.READERS[tool](doc, schema)
            except InputError as exc:
                refused += 1
                assert path.name in str(exc) and "\n" not in str(exc)
                continue
            finally:
                parent[where[-1]] = original
            for row in rows:
                assert _clean(row), (where, value, row)
                for k, v in row.items():  # the notebook's own figure names hold numbers only
                    if k.endswith(FIGURE_SUFFIXES) or k in FIGURE_NAMES:
                        assert isinstance(v, (int, float)) and not isinstance(v, bool), (where, value, k, v)
    assert refused > 20  # the check does refuse (a figure of the wrong type, NaN, a nested field)


@pytest.mark.parametrize(
    "tool,patch,field",
    [
        ("vllm-bench", {"output_throughput": "fast"}, "output_throughput is text"),
        ("vllm-bench", {"mean_ttft_ms": float("nan")}, "mean_ttft_ms is NaN"),
        ("vllm-bench", {"output_throughput": float("inf")}, "output_throughput is Infinity"),
        ("aiperf", {"input_config": {"models": "SmolLM2"}}, "input_config.models is text"),
        ("aiperf", {"time_to_first_token": {"unit": "ms", "avg": "1"}}, "time_to_first_token.avg is text"),
        ("guidellm", {"benchmarks": [5]}, "benchmarks[0] is a number"),
    ],
)
def test_the_import_line_names_the_field(tool, patch, field, tmp_path):
    doc = json.loads(TOOL_FILES[tool].read_text())
    doc.update(patch)
    f = tmp_path / "result.json"
    f.write_text(json.dumps(doc))  # NaN and Infinity as Python writes them: the literals NaN, Infinity
    nb = tmp_path / "nb.toml"
    r = _cli("import", tool, str(f), "--notebook", str(nb))
    assert r.returncode == 2 and field in one_line_error(r)
    assert not nb.exists()  # nothing appended


def test_deeply_nested_json_is_one_line(tmp_path):
    f = tmp_path / "deep.json"
    f.write_text("[" * 100_000 + "]" * 100_000)
    r = _cli("import", "aiperf", str(f), "--notebook", str(tmp_path / "nb.toml"))
    assert r.returncode == 2 and "nested too deeply" in one_line_error(r)


NOTEBOOK_KEYS = [
    "date",
    "prompt_id",
    "speedup",
    "acceptance_rate",
    "mean_accepted_length",
    "identical",
    "verdict",
    "candidate_config",
    "candidate_build",
    "source_tool",
    "output_tokens_per_s",
    "ttft_ms_mean",
    "itl_ms_mean",
    "source_version",
    "source_file",
]
TOML_VALUES = ['"fast"', "nan", "inf", "-inf", "[1, 2]", "{ a = 1 }", "true", "1979-05-27T07:32:00Z", "12", '""']


@pytest.mark.parametrize("kind", ["compare", "import"])
def test_notebook_show_survives_any_value_a_hand_edit_can_hold(tmp_path, kind):
    from spectui.store import notebook

    nb = tmp_path / "nb.toml"
    blocks = []
    for key in NOTEBOOK_KEYS:
        for value in TOML_VALUES:
            kind_line = 'kind = "import"\n' if kind == "import" and key != "kind" else ""
            blocks.append(f"[[measurement]]\n{kind_line}{key} = {value}\n")
    nb.write_text("\n".join(blocks))
    text = notebook.show_text(nb)
    assert text.count("\n") == len(blocks) + 2  # one line per measurement, after the three header lines
    r = _cli("notebook", "show", "--notebook", str(nb))
    assert r.returncode == 0 and "Traceback" not in r.stderr


# -- items 8, 12: prompt files ------------------------------------------------------------------------------
NOWHERE = ["--baseline", "http://127.0.0.1:9", "--candidate", "http://127.0.0.1:9"]


def test_a_lone_surrogate_in_a_prompt_file_is_one_line_before_any_server(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text(
        '{"messages": [{"role": "user", "content": "ok"}]}\n{"messages": [{"role": "user", "content": "a\\ud800b"}]}\n'
    )
    r = _cli("compare", *NOWHERE, "--prompts", str(f))
    line = one_line_error(r)
    assert r.returncode == 2 and "line 2" in line and "\\ud800" in line


@pytest.mark.parametrize("text", ["[" * 50_000 + "]" * 50_000, '{"messages": ' + "[" * 50_000 + "]" * 50_000 + "}\n"])
def test_deeply_nested_prompt_files_are_one_line(tmp_path, text):
    f = tmp_path / "p.jsonl"
    f.write_text(text)
    r = _cli("compare", *NOWHERE, "--prompts", str(f))
    assert r.returncode == 2 and "nested too deeply" in one_line_error(r)


def test_a_toml_prompt_set_may_start_with_a_byte_order_mark(tmp_path):
    from spectui.store.prompts import load_set

    f = tmp_path / "set.toml"
    f.write_bytes('\ufeffname = "bom"\n[[prompt]]\nid = "a"\ntext = "Hi."\n'.encode())
    name, prompts = load_set(str(f))
    assert name == "bom" and [p.id for p in prompts] == ["a"]


def test_sampling_more_prompts_than_the_set_holds_says_so(tmp_path):
    f = tmp_path / "set.toml"
    f.write_text('[[prompt]]\ntext = "a"\n[[prompt]]\ntext = "b"\n[[prompt]]\ntext = "c"\n')
    r = _cli("compare", *NOWHERE, "--prompts", str(f), "--sample", "10")
    assert "spectui: warning: --sample 10: the set holds 3 prompts; running all 3" in r.stderr
    r = _cli("compare", *NOWHERE, "--prompts", str(f), "--sample", "2")
    assert "warning" not in r.stderr


# -- items 8, 10: what a server says about itself is normalised at the backend ----------------------------
def _llamacpp_with(props: dict, slots=None):
    import httpx

    from spectui.backends.llamacpp import LlamaCppBackend

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/props":
            return httpx.Response(200, json=props)
        if request.url.path == "/slots":
            return httpx.Response(200, json=slots) if slots is not None else httpx.Response(501)
        return httpx.Response(404)

    return LlamaCppBackend("http://odd:1", httpx.AsyncClient(transport=httpx.MockTransport(answer)))


ODD_PROPS = [
    {"build_info": 11434, "model_path": 5, "total_slots": "four", "default_generation_settings": {"n_ctx": "big"}},
    {"build_info": ["b1"], "model_path": ["/m/x.gguf"], "total_slots": True, "default_generation_settings": []},
    {
        "build_info": None,
        "model_path": {"p": 1},
        "model_alias": 7,
        "total_slots": -1,
        "default_generation_settings": {"params": {"speculative": ["x"], "speculative.n_max": [1]}},
    },
    {"default_generation_settings": {"params": {"speculative": {"type": 3, "n_max": "8", "model": 9}}}},
]


@pytest.mark.parametrize("props", ODD_PROPS)
async def test_odd_props_become_typed_fields_and_survive_a_session_round_trip(props, tmp_path):
    from spectui.store.session import SessionWriter, load_session

    backend = _llamacpp_with(props, slots=[{"speculative": "yes", "params": [], "n_ctx": "x", "next_token": 5}])
    info = await backend.identify()
    assert info.build is None or isinstance(info.build, str)
    assert info.model is None or isinstance(info.model, str)
    assert info.slots is None or (type(info.slots) is int and info.slots >= 0)
    assert info.n_ctx is None or type(info.n_ctx) is int
    assert await backend.kv_usage() in (None, (0, 0))
    w = SessionWriter(tmp_path / "s.jsonl")
    w.servers({"baseline": info, "candidate": info})
    w.close()
    s = load_session(tmp_path / "s.jsonl")
    assert s.warnings == []  # the servers record is read back whole…
    assert (
        s.infos["candidate"].build == info.build and s.infos["candidate"].slots == info.slots
    )  # …with both identities


async def test_a_numeric_build_is_still_the_builds_name():
    info = await _llamacpp_with({"build_info": 11434, "default_generation_settings": {}}).identify()
    assert info.build == "11434"
