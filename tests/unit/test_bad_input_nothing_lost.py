"""Bad servers, bad files, two terminals at once: one clear line, nothing lost.

Each expected value here is written from the input, not read back from spectui's output.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from spectui.backends.labeller import LlamaCppLabeller
from spectui.backends.sse import iter_payloads
from spectui.core.errors import BadEvent, redact, register_secret
from spectui.store import notebook

ROOT = Path(__file__).resolve().parents[2]


# -- the notebook ---------------------------------------------------------------------------------------
def test_twenty_processes_appending_at_once_all_land(tmp_path):
    nb = tmp_path / "notebook.toml"
    code = (
        "import sys; from pathlib import Path; from spectui.store import notebook\n"
        "notebook.append(Path(sys.argv[1]), [{'prompt_id': sys.argv[2], 'speedup': 1.0}])\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(nb), f"p{i}"]) for i in range(20)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    rows = tomllib.loads(nb.read_text())["measurement"]
    assert sorted(r["prompt_id"] for r in rows) == sorted(f"p{i}" for i in range(20))


def test_short_entries_are_tables_so_a_second_append_still_parses(tmp_path):
    nb = tmp_path / "n.toml"
    notebook.append(nb, [{"a": 1}])
    notebook.append(nb, [{"a": 2}])
    assert "measurement = [" not in nb.read_text()
    assert [r["a"] for r in tomllib.loads(nb.read_text())["measurement"]] == [1, 2]


def test_a_notebook_using_the_key_itself_is_left_alone(tmp_path):
    nb = tmp_path / "n.toml"
    nb.write_text("measurement = 5\n")
    where, warning = notebook.append(nb, [{"a": 1}])
    assert nb.read_text() == "measurement = 5\n"  # untouched
    assert where == nb.with_name("n.toml.pending.toml") and "would not parse" in warning
    assert tomllib.loads(where.read_text())["measurement"] == [{"a": 1}]


def test_a_symlinked_notebook_stays_a_link_and_keeps_its_mode(tmp_path):
    target = tmp_path / "real.toml"
    target.write_text("# mine\n")
    os.chmod(target, 0o644)
    link = tmp_path / "link.toml"
    link.symlink_to(target)
    notebook.append(link, [{"a": 1}])
    assert link.is_symlink() and link.resolve() == target
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert target.read_text().startswith("# mine\n")


def test_a_failing_replace_loses_nothing(tmp_path, monkeypatch):
    nb = tmp_path / "n.toml"
    notebook.append(nb, [{"a": 1}])
    before = nb.read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    from spectui.core.errors import InputError

    with pytest.raises(InputError, match="cannot write notebook .*: disk full"):  # one line, not a traceback
        notebook.append(nb, [{"a": 2}])
    assert nb.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no half-written temporary left


# -- sessions -------------------------------------------------------------------------------------------
def _cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "spectui", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_save_onto_a_file_that_is_not_a_session_is_refused(tmp_path):
    from spectui.core.errors import InputError
    from spectui.store.session_writer import SessionWriter

    f = tmp_path / "notes.txt"
    f.write_text("my notes\n")
    with pytest.raises(InputError, match="not a spectui session"):
        SessionWriter(f)
    assert f.read_text() == "my notes\n"


def _session(tmp_path, lines) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    p = tmp_path / "s.jsonl"
    head = {"format": "spectui-session", "version": 1, "created": "2026-12-01T00:00:00+00:00"}
    p.write_text("\n".join(json.dumps(x) for x in [head, *lines]) + "\n")
    return p


PROMPT = {"type": "prompt", "n": 0, "prompt": {"id": "p", "messages": [{"role": "user", "content": "hi"}]}}


def _ev(side, ev, t, **kw):
    return {"type": "event", "n": 0, "side": side, "ev": ev, "t": t, **kw}


def _side(side, text, finish=True):
    out = [_ev(side, "start", 0)]
    for i, ch in enumerate(text):
        out.append(_ev(side, "token", 10 + i, i=i, id=100 + i, d=ch, label="first" if i == 0 else "target"))
    if finish:
        out.append(_ev(side, "finish", 100, stop_type="limit"))
    return out


def test_a_session_cut_inside_the_candidate_is_incomplete_not_a_verdict(tmp_path):
    p = _session(tmp_path, [PROMPT, *_side("baseline", "hello"), *_side("candidate", "he", finish=False)])
    r = _cli("replay", str(p), "--no-tui", "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 1
    assert doc["prompts"][0]["identical"] is None and doc["prompts"][0]["incomplete"] is True


def test_a_prompt_with_no_events_is_incomplete(tmp_path):
    p = _session(tmp_path, [PROMPT])
    r = _cli("replay", str(p), "--no-tui", "--json")
    [prompt] = json.loads(r.stdout)["prompts"]
    assert r.returncode == 1 and prompt["incomplete"] is True and prompt["identical"] is None


def test_a_garbage_line_in_the_middle_is_skipped_and_named(tmp_path):
    lines = [PROMPT, *_side("baseline", "hello"), *_side("candidate", "hello")]
    p = _session(tmp_path, lines)
    text = p.read_text().splitlines()
    text.insert(4, "{not json")
    p.write_text("\n".join(text) + "\n")
    r = _cli("replay", str(p), "--no-tui", "--json")
    assert ":5: unreadable record" in r.stderr
    doc = json.loads(r.stdout)
    assert doc["prompts"][0]["incomplete"] is True  # a damaged prompt gets no verdict
    assert r.returncode == 1


@pytest.mark.parametrize(
    "head", [{"format": "spectui-session", "version": "abc"}, {"format": "spectui-session", "version": None}]
)
def test_a_malformed_header_is_one_line(tmp_path, head):
    p = tmp_path / "s.jsonl"
    p.write_text(json.dumps(head) + "\n")
    r = _cli("replay", str(p), "--no-tui")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "version" in r.stderr


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "servers", "baseline": "x", "candidate": "y"},
        {**PROMPT, "params": ["x"]},
        _ev("baseline", "token", 5, i=0, d=5, label="first"),
    ],
)
def test_malformed_fields_never_crash_replay_report_or_listing(tmp_path, bad):
    p = _session(tmp_path, [PROMPT, bad, *_side("baseline", "hi"), *_side("candidate", "hi")])
    good = tmp_path / "good.jsonl"
    done = {"type": "result", "n": 0, "identical": True}  # the listing reads the recorded verdict
    _session(tmp_path / "g", [PROMPT, *_side("baseline", "hi"), *_side("candidate", "hi"), done]).rename(good)
    for args in (("replay", str(p), "--no-tui"), ("report", str(p))):
        r = _cli(*args)
        assert "Traceback" not in r.stderr, r.stderr
        assert "unreadable record" in r.stderr  # the bad line is named, not silently skipped
    r = _cli("sessions", str(tmp_path))
    lines = r.stdout.splitlines()
    assert "Traceback" not in r.stderr and len(lines) == 2  # the damaged file does not hide the good one
    assert any(good.name in ln and "identical" in ln for ln in lines)


# -- server events --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "obj,field",
    [
        ({"content": 5}, "content"),
        ({"timings": [1]}, "timings"),
        ({"tokens_predicted": "x"}, "tokens_predicted"),
        ({"timings": {"draft_n": "8", "draft_n_accepted": 1}}, "draft_n"),
        ({"tokens": ["a"]}, "tokens[]"),
    ],
)
def test_a_wrong_typed_llamacpp_field_is_named(obj, field):
    with pytest.raises(BadEvent, match=f"{field.replace('[', '.').replace(']', '.')} is"):
        LlamaCppLabeller().feed(obj, 0)


def test_counters_that_go_backwards_are_reported_and_later_tokens_unknown():
    lab = LlamaCppLabeller()
    evs = []
    for obj in (
        {"content": "a", "tokens": [1], "tokens_predicted": 1},
        {"content": "b", "tokens": [2], "tokens_predicted": 2, "timings": {"draft_n": 8, "draft_n_accepted": 0}},
        {"content": "c", "tokens": [3], "tokens_predicted": 3, "timings": {"draft_n": 16, "draft_n_accepted": 1}},
        {"content": "d", "tokens": [4], "tokens_predicted": 4, "timings": {"draft_n": 4, "draft_n_accepted": 1}},
        {"content": "e", "tokens": [5], "tokens_predicted": 5, "timings": {"draft_n": 20, "draft_n_accepted": 2}},
    ):
        evs += lab.feed(obj, 0)
    assert lab.inconsistent and "backwards" in lab.inconsistent
    labels = [e.label for e in evs if hasattr(e, "label")]
    # step 1 (8 drafted, 0 accepted) makes "b" the target's own; step 2 (8, 1) makes "c" an accepted draft
    # and "d" the target's; then drafted falls 16 → 4: nothing after that is labelled by guess
    assert labels == ["first", "target", "accepted", "target", "unknown"]
    assert lab.drafted == 16 and lab.accepted == 1  # the two steps that made sense


def test_sse_unknown_fields_and_a_bare_data_line_are_ignored():
    lines = ["foo: bar", "data", "", "event: x", 'data: {"content": "a"}', "", "id", "retry: 5", ""]
    assert list(iter_payloads(lines)) == [{"content": "a"}]


def test_the_final_event_counts_tokens_that_were_never_sent():
    # llama.cpp b11434 (server-context.cpp): a token ending in incomplete UTF-8 is withheld; when the
    # stream stops there, the final event has content "" and tokens [] while tokens_predicted moved on
    lab = LlamaCppLabeller()
    evs = lab.feed({"content": "ok", "tokens": [11], "tokens_predicted": 1}, 0)
    evs += lab.feed({"content": "", "tokens": [], "tokens_predicted": 3, "stop": True, "stop_type": "limit"}, 1)
    tokens = [e for e in evs if hasattr(e, "label")]
    assert len(tokens) == 3 and [t.data for t in tokens] == [b"ok", b"", b""]


def test_same_text_different_token_counts_is_a_difference():
    from spectui.core.figures import SideRecorder
    from spectui.core.runner import compare_sides

    def rec(final_predicted):
        lab, r = LlamaCppLabeller(), SideRecorder("x")
        for ev in lab.feed({"content": "ok", "tokens": [11], "tokens_predicted": 1}, 0) + lab.feed(
            {"content": "", "tokens": [], "tokens_predicted": final_predicted, "stop": True}, 1
        ):
            r.feed(ev)
        return r

    div, _ = compare_sides(rec(2), rec(3), ids_comparable=False)
    assert div is not None and div.kind == "count" and div.byte == 2


# -- secrets --------------------------------------------------------------------------------------------
def test_credentials_are_redacted_everywhere_spectui_writes():
    register_secret("sk-test-7f3a9")
    text = 'http://alice:pw@host:1/v1 {"headers": {"Authorization": "Bearer sk-test-7f3a9"}} api_key=abc123'
    out = redact(text)
    assert "alice" not in out and "pw@" not in out and "sk-test-7f3a9" not in out and "abc123" not in out
    from spectui.core.types import ServerInfo

    assert ServerInfo(url="http://u:p@h:1").to_json()["url"] == "http://***@h:1"


# -- command-line values --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["compare", "--baseline", "http://x", "--candidate", "http://y", "--prompt", "hi", "--temperature", "nan"],
        ["compare", "--baseline", "http://x", "--candidate", "http://y", "--prompt", "hi", "--temperature", "inf"],
        ["compare", "--baseline", "http://x", "--candidate", "http://y", "--prompt", "hi", "--ready-timeout", "nan"],
        ["compare", "--baseline", "http://x", "--candidate", "http://y", "--prompt", "hi", "--max-tokens", "0"],
        ["theory", "--alpha", "0.5", "--gamma", "4", "--cost", "nan"],
        ["theory", "--alpha", "0.5", "--gamma", "4", "--cost", "inf"],
    ],
)
def test_bad_values_are_one_line_usage_errors(args):
    r = _cli(*args)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr


def test_replay_speed_nan_and_folders_as_files(tmp_path):
    p = _session(tmp_path, [PROMPT, *_side("baseline", "a"), *_side("candidate", "a")])
    assert _cli("replay", str(p), "--speed", "nan").returncode == 2
    r = _cli("report", str(p), "-o", str(tmp_path))
    assert r.returncode == 2 and "folder" in r.stderr
    r = _cli("notebook", "show", "--notebook", str(tmp_path))
    assert "Traceback" not in r.stderr


# -- themes and profiles --------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ['name = "t"\ncolors = ["primary"]\n', 'name = "t"\n[colors]\nprimary = "#zzz"\n'])
def test_bad_themes_are_reported_and_skipped(tmp_path, text):
    from spectui.store.themes import load_themes

    (tmp_path / "t.toml").write_text(text)
    loaded = load_themes([tmp_path])
    assert loaded.themes == [] and len(loaded.problems) == 1 and "skipped" in loaded.problems[0]


@pytest.mark.parametrize(
    "server,key", [('env = "FOO=1"', "env"), ('ready_timeout = "soon"', "ready_timeout"), ("port = true", "port")]
)
def test_bad_profile_fields_name_the_key(server, key):
    from spectui.core.errors import InputError
    from spectui.store.profiles import parse_profile

    text = (
        f'name = "p"\n[[comparison]]\nid = "c"\nbaseline = {{ backend = "llama.cpp", argv = ["x"] }}\n'
        f'candidate = {{ backend = "llama.cpp", argv = ["x"], {server} }}\n'
    )
    with pytest.raises(InputError, match=key):
        parse_profile(text, "p.toml")


def test_variables_as_a_string_is_an_error():
    from spectui.core.errors import InputError
    from spectui.store.profiles import parse_profile

    with pytest.raises(InputError, match="variables"):
        parse_profile('name = "p"\nvariables = "x"\n[[comparison]]\nid = "c"\n', "p.toml")
