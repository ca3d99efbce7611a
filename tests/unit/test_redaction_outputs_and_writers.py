"""Credentials redacted, server text escaped, odd files one line, outputs checked before any server, one
writer per session: each case failed (a traceback, a leak, a wrong figure) before its fix.

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
    assert r.returncode == 2 and "levels deep, over the limit" in one_line_error(r)


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


@pytest.mark.parametrize(
    "text",
    ["[" * 50_000 + "]" * 50_000, '{"messages": ' + "[" * 50_000 + "]" * 50_000 + "}\n"],
    ids=["array", "jsonl-line"],
)
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
    from spectui.store.session import load_session
    from spectui.store.session_writer import SessionWriter

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


# -- items 3, 9: every output and input path checked before any server is asked ----------------------------
def _not_a_regular_file(tmp_path) -> Path:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # a pipe stands for /dev/full and other devices (never write those in a test)
    return fifo


@pytest.mark.parametrize(
    "make,flag,said",
    [
        (lambda t: t, "--save", "is a folder"),
        (lambda t: (t / "f.txt").write_text("x") and t / "f.txt" / "out.jsonl", "--save", "is not a folder"),
        (_not_a_regular_file, "--save", "not a regular file"),
        (lambda t: t, "--notebook", "is a folder"),
        (lambda t: (t / "f.txt").write_text("x") and t / "f.txt" / "nb.toml", "--notebook", "is not a folder"),
        (_not_a_regular_file, "--notebook", "not a regular file"),
    ],
)
def test_compare_checks_its_outputs_before_any_server(tmp_path, make, flag, said):
    target = make(tmp_path)
    r = _cli("compare", *NOWHERE, "--prompt", "hi", flag, str(target))
    line = one_line_error(r)
    assert r.returncode == 2 and said in line and "connect" not in line  # refused before any server is asked


@pytest.mark.parametrize("flag", ["--save", "--svg", "--notebook"])
def test_sweep_checks_its_outputs_before_any_server(tmp_path, flag):
    r = _cli("sweep", *NOWHERE, flag, str(_not_a_regular_file(tmp_path)))
    line = one_line_error(r)
    assert r.returncode == 2 and "not a regular file" in line and "connect" not in line


def test_sampling_checks_its_outputs_before_any_server(tmp_path):
    for flag in ("--save", "--notebook"):
        r = _cli("sampling", *NOWHERE, "--prompt", "hi", flag, str(tmp_path))
        assert r.returncode == 2 and "is a folder" in one_line_error(r)


def test_report_o_into_a_path_under_a_file_is_one_line(tmp_path):
    from tests.unit.test_bad_input_nothing_lost import PROMPT, _session, _side

    p = _session(tmp_path, [PROMPT, *_side("baseline", "a"), *_side("candidate", "a")])
    (tmp_path / "f.txt").write_text("x")
    r = _cli("report", str(p), "-o", str(tmp_path / "f.txt" / "r.md"))
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("spectui: error")]
    assert r.returncode == 2 and len(errors) == 1 and "is not a folder" in errors[0] and "Traceback" not in r.stderr


@pytest.mark.parametrize("content,said", [(None, "does not exist"), (b"not a model", "is not a GGUF model file")])
def test_a_bad_draft_model_is_refused_before_the_run(tmp_path, content, said):
    model = tmp_path / "draft.gguf"
    if content is not None:
        model.write_bytes(content)
    r = _cli("compare", *NOWHERE, "--prompt", "hi", "--probe-drafts", "--draft-model", str(model))
    line = one_line_error(r)
    assert r.returncode == 2 and said in line and "connect" not in line


def test_a_draft_model_with_the_gguf_magic_passes_the_check(tmp_path):
    from spectui.cli.outputs import check_gguf

    model = tmp_path / "d.gguf"
    model.write_bytes(b"GGUF\x03\x00\x00\x00")
    assert check_gguf(str(model), "--draft-model") == model


# -- item 4, 12: one writer at a time; two runs in one file; no header-only session -----------------------
def test_a_second_writer_on_the_same_session_is_refused(tmp_path):
    from spectui.store.session_writer import SessionWriter

    path = tmp_path / "s.jsonl"
    first = SessionWriter(path)
    first.servers({})
    with pytest.raises(InputError, match="being written by another spectui run"):
        SessionWriter(path)
    first.close()
    second = SessionWriter(path)  # once the first is done, appending is fine
    second.close()


def test_two_processes_saving_to_one_file_one_is_refused(tmp_path):
    path = tmp_path / "s.jsonl"
    hold = (
        "import sys, time; from spectui.store.session_writer import SessionWriter\n"
        "w = SessionWriter(sys.argv[1]); w.servers({}); print('open', flush=True); sys.stdin.readline()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        r = _cli("compare", *NOWHERE, "--prompt", "hi", "--save", str(path))
        assert r.returncode == 2 and "being written by another spectui run" in one_line_error(r)
    finally:
        holder.communicate("\n", timeout=120)


def _interleaved_lines():
    from tests.unit.test_bad_input_nothing_lost import PROMPT, _side

    a = [PROMPT, *_side("baseline", "hey"), *_side("candidate", "hey")]
    b = [PROMPT, *_side("baseline", "hey"), *_side("candidate", "hey")]
    out = []
    for x, y in zip(a, b):  # two identical runs written into one file at the same time, line by line
        out += [x, y]
    return out


def test_two_runs_interleaved_in_one_file_are_named_not_judged(tmp_path):
    from tests.unit.test_bad_input_nothing_lost import _session

    p = _session(tmp_path, _interleaved_lines())
    r = _cli("replay", str(p), "--no-tui", "--json")
    doc = json.loads(r.stdout)
    assert "holds the lines of two runs written at the same time" in r.stderr
    # the old loader said "DIFFERS at byte 0" for runs that were all identical; no verdict is honest
    assert all(pr["identical"] is None for pr in doc["prompts"]) and r.returncode == 1


def test_runs_appended_one_after_another_are_kept_apart(tmp_path):
    from spectui.store.session import load_session
    from spectui.store.session_writer import SessionWriter
    from tests.unit.test_bad_input_nothing_lost import PROMPT, _side

    path = tmp_path / "s.jsonl"

    for _ in range(2):
        w = SessionWriter(path)
        for line in [PROMPT, *_side("baseline", "hi"), *_side("candidate", "hi"), {"type": "result", "n": 0}]:
            w._write(line)
        w.close()
    s = load_session(path)
    assert len(s.prompts) == 2 and not any(sp.damaged for sp in s.prompts)
    assert any("holds 2 runs appended one after another" in w for w in s.warnings)


def test_a_run_that_records_nothing_leaves_no_file(tmp_path):
    from spectui.store.session_writer import SessionWriter

    path = tmp_path / "s.jsonl"
    SessionWriter(path).close()
    assert not path.exists()
    r = _cli("compare", *NOWHERE, "--prompt", "hi", "--save", str(path))  # nothing answers at NOWHERE
    assert r.returncode == 1 and not path.exists()  # no header-only session left behind


def test_a_full_disk_mid_run_stops_the_file_not_the_run(tmp_path):
    import errno

    from spectui.store.session import load_session
    from spectui.store.session_writer import SessionWriter

    path = tmp_path / "s.jsonl"
    w = SessionWriter(path)
    w.servers({})
    real = w._fh

    class Full:
        def write(self, _):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(real, name)

    w._fh = Full()
    w.servers({})  # no exception: the run goes on
    w.servers({})
    assert w.error and "No space left on device" in w.error
    assert len(w.lines) == 5  # header, run, three servers: all kept in memory
    w.close()
    real.close()
    assert len(load_session(path).prompts) == 0 and path.read_text().count("\n") == 3


# -- item 8: an edited session never crashes replay or a report ------------------------------------------
@pytest.mark.parametrize(
    "result,triage",
    [
        (
            {"metrics_check": {"x": 1}, "accepted_per_position": "x", "metrics_drafted": "8"},
            {"cause": "x", "logprobs": 5},
        ),
        ({"metrics_check": [1], "accepted_per_position": [None, "a"], "metrics_steps": True}, {"cause": 5}),
        ({"metrics_accepted": {"a": 1}}, {"cause": "near-tie", "logprobs": {"positions": 5}, "reruns": "x"}),
    ],
)
def test_an_edited_session_is_read_by_replay_and_every_report(tmp_path, result, triage):
    from tests.unit.test_bad_input_nothing_lost import PROMPT, _session, _side

    lines = [PROMPT, *_side("baseline", "hi"), *_side("candidate", "hi")]
    lines += [
        {"type": "result", "n": 0, "baseline": result, "candidate": result, "identical": True},
        {"type": "triage", "n": 0, "triage": triage},
    ]
    p = _session(tmp_path, lines)
    for args in (
        ("replay", str(p), "--no-tui"),
        ("replay", str(p), "--no-tui", "--json"),
        ("report", str(p)),
        ("report", str(p), "--format", "html"),
        ("report", str(p), "--format", "json"),
        ("sessions", str(tmp_path)),
    ):
        r = _cli(*args)
        assert "Traceback" not in r.stderr and r.returncode in (0, 3), (args, r.stderr)


# -- item 12: `spectui sessions` reads the header and the summary records only -----------------------------
def test_listing_parses_summary_records_not_events(tmp_path, monkeypatch):
    import orjson

    from spectui.store import session_list
    from tests.unit.test_bad_input_nothing_lost import PROMPT, _ev

    head = {"format": "spectui-session", "version": 1, "created": "2026-12-01T00:00:00+00:00"}
    servers = {"type": "servers", "baseline": {"url": "http://b"}, "candidate": {"url": "http://c"}}
    lines = [json.dumps(head), json.dumps(servers)]
    for n in range(2):
        lines.append(json.dumps({**PROMPT, "n": n, "prompt": {"id": f"p{n}", "messages": []}}))
        for side in ("baseline", "candidate"):
            lines.append(json.dumps(_ev(side, "start", 0)))
            lines += [json.dumps(_ev(side, "token", 10 + i, i=i, id=7, d="x", label="target")) for i in range(20_000)]
        result = {"type": "result", "n": n, "identical": True, "speedup": 1.5, "candidate": {"acceptance_rate": 0.5}}
        lines.append(json.dumps(result))
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines) + "\n")
    parsed = []
    real = orjson.loads
    monkeypatch.setattr(session_list.orjson, "loads", lambda b: parsed.append(b) or real(b))
    [row] = session_list.list_sessions(tmp_path)
    assert len(parsed) == 5  # servers, two prompts, two results: none of the 80,004 events
    assert (row.prompt, row.n_prompts, row.identical, row.speedup, row.acceptance) == ("p0", 2, True, 1.5, 0.5)
    assert "identical" in row.line() and "1.50× over the set at 50% accepted" in row.line()


def test_listing_says_what_a_cut_off_run_recorded(tmp_path):
    from spectui.store.session_list import summarise
    from tests.unit.test_bad_input_nothing_lost import PROMPT, _session, _side

    done = {"type": "result", "n": 0, "identical": True, "speedup": 1.2}
    p = _session(tmp_path, [PROMPT, *_side("baseline", "hi"), *_side("candidate", "hi"), done, PROMPT])
    p.write_text(p.read_text() + '{"type":"result","n":1,"identi')  # the last line cut mid-write
    s = summarise(p)
    assert s.n_prompts == 2 and s.identical is None  # the second prompt has no verdict recorded
    assert s.speedup == 1.2
