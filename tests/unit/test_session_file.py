"""store/session, value by value, on session files written here line by line: the header check
(`is_session`), the autosave name, probe records, the "terms" reader, and the verdict replay shows where
the recorded one is missing, unreadable or compared by text only. Expected values are worked by hand from
the lines each test writes."""

from __future__ import annotations

import datetime as dt
import json
import os
from types import SimpleNamespace

from spectui.machine.probes import GPUSample, HostSample
from spectui.store import session as ss

HEADER = {"format": "spectui-session", "version": 1, "created": "2026-12-01T08:00:00+00:00", "spectui": "0.1.0"}


def write(path, records, raw_tail=b""):
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records) + raw_tail)
    return path


def test_is_session_reads_only_the_first_line_as_bytes(tmp_path):
    assert ss.is_session(write(tmp_path / "s.jsonl", [HEADER, {"type": "run"}]))
    # a carriage return inside the first line is JSON whitespace, not the end of a line
    cr = tmp_path / "cr.jsonl"
    cr.write_bytes(b'{"format": "spectui-session",\r "version": 1}\n')
    assert ss.is_session(cr)
    assert not ss.is_session(write(tmp_path / "other.jsonl", [{"format": "something-else"}]))
    assert not ss.is_session(write(tmp_path / "list.jsonl", [["spectui-session"]]))
    assert not ss.is_session(write(tmp_path / "second.jsonl", [{"type": "run"}, HEADER]))
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert not ss.is_session(empty)
    assert not ss.is_session(tmp_path / "missing.jsonl")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\xff\xfe{not json\n")
    assert not ss.is_session(junk)


def test_autosave_names_the_time_and_the_process(tmp_path, monkeypatch):
    class Clock:
        @staticmethod
        def now():
            return dt.datetime(2026, 12, 1, 8, 9, 10)

    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(ss, "dt", SimpleNamespace(datetime=Clock))
    assert ss.autosave_path() == tmp_path / "sessions" / f"session-20261201-080910-{os.getpid()}.jsonl"
    assert ss.default_session_dir() == tmp_path / "sessions"


def test_a_probe_record_with_every_field_and_with_the_fewest():
    rec = {
        "t": 123,
        "gpus": [{"index": "1", "name": 7, "memory_used": 100, "memory_total": 200, "utilisation": 50}],
        "host": {
            "cpu_count": "4",
            "cpu_percent": "12.5",
            "memory_used": "1000",
            "memory_total": 2000,
            "machine": "x86_64",
            "system": "Linux",
        },
    }
    t, gpus, host = ss.probe_from_json(rec)
    assert t == 123
    assert gpus == [GPUSample(1, "7", 100, 200, 50)]
    assert host == HostSample(4, 12.5, 1000, 2000, "x86_64", "Linux")
    assert type(host.cpu_count) is int and type(host.cpu_percent) is float and type(host.memory_used) is int
    few = {
        "t": 5,
        "gpus": [{"index": 0, "name": "g"}],
        "host": {"cpu_count": 2, "cpu_percent": 1, "memory_used": 3, "memory_total": 4},
    }
    t, gpus, host = ss.probe_from_json(few)
    assert gpus == [GPUSample(0, "g", None, None, None)]
    assert (host.machine, host.system) == ("", "")
    assert ss.probe_from_json({"t": "9"}) == (9, [], None)
    assert ss.probe_from_json({"t": 9, "gpus": None, "host": None}) == (9, [], None)


def test_read_terms_takes_the_last_whole_terms_record(tmp_path):
    p = tmp_path / "s.jsonl"
    lines = [
        json.dumps(HEADER).encode(),
        b'{"type":"terms","terms":{"alpha":0.5}}',
        b'{"type":"terms","terms":{"alpha":',  # a damaged line: skipped, the reading goes on
        b'{"type":"terms","terms":{"alpha":0.75}}',
        b'{"type":"terms","terms":[1]}',  # not an object: not terms
        b'{"type":"result","terms":{"alpha":0.0}}',  # another record's field of that name
    ]
    p.write_bytes(b"\n".join(lines) + b"\n" + b'{"type":"terms","terms":{"alpha":1.0}}')  # the last, cut
    assert ss.read_terms(p) == {"alpha": 0.75}
    q = write(tmp_path / "none.jsonl", [HEADER])
    assert ss.read_terms(q) is None


# ------------------------------------------------------------------ the verdict replay shows


def session_file(tmp_path, result, c_ids=(1, 2), damaged=False):
    """One prompt: both sides stream "a" then "b" (the baseline as ids 1, 2; the candidate as `c_ids`) and
    finish; then `result` as its result record."""
    recs = [
        HEADER,
        {
            "type": "servers",
            "baseline": {"url": "http://a", "model": "m"},
            "candidate": {"url": "http://b", "model": "m"},
        },
        {"type": "prompt", "n": 0, "prompt": {"id": "p1", "raw": "hi"}, "params": {}, "order": "sequential"},
    ]
    for side, ids in (("baseline", (1, 2)), ("candidate", c_ids)):
        recs.append({"type": "event", "n": 0, "side": side, "t": 0, "ev": "start"})
        for i, (tid, d) in enumerate(zip(ids, ("a", "b"), strict=True)):
            recs.append(_tok(side, i, tid, d))
        recs.append(
            {
                "type": "event",
                "n": 0,
                "side": side,
                "t": 20,
                "ev": "finish",
                "stop_type": "limit",
                "timings": {},
                "settings": {},
                "tail": "",
            }
        )
    if damaged:
        recs.append({"type": "event", "n": 0, "side": "elsewhere", "t": 21, "ev": "start"})
    if result is not None:
        recs.append({"type": "result", "n": 0, **result})
    s = ss.load_session(write(tmp_path / "s.jsonl", recs))
    [sp] = s.prompts
    b, c = ss.recorders_for(sp)
    return s, sp, b, c


def test_the_recorded_comparison_decides_whether_ids_count(tmp_path):
    # the same text "ab"; the candidate's second token has id 3, not 2
    s, sp, b, c = session_file(tmp_path, {"compared": "text"}, c_ids=(1, 3))
    v, warning = ss.verdict_check(s, sp, b, c)
    assert v.status == "identical" and v.compared == "text"
    assert (
        warning
        == f"p1: no verdict was recorded (the run stopped before it); judged from the recorded events: {v.line()}"
    )
    s, sp, b, c = session_file(tmp_path, {"compared": "text+ids"}, c_ids=(1, 3))
    v, warning = ss.verdict_check(s, sp, b, c)
    assert v.status == "differs" and warning.startswith("p1: no verdict was recorded")
    # no "compared" key: the servers' own tokenizer answer (both model "m": the same) decides
    s, sp, b, c = session_file(tmp_path, {"identical": None}, c_ids=(1, 3))
    assert ss.verdict_check(s, sp, b, c)[0].status == "differs"


def test_an_unreadable_recorded_verdict_is_named_with_what_it_holds(tmp_path):
    s, sp, b, c = session_file(tmp_path, {"verdict": "IDENTICAL!", "compared": "text+ids"})
    v, warning = ss.verdict_check(s, sp, b, c)
    assert v.status == "identical"
    assert warning == (
        f"p1: the recorded verdict is unreadable (str: 'IDENTICAL!'); judged from the recorded events: {v.line()}"
    )


def test_a_damaged_prompt_is_judged_incomplete_without_a_warning(tmp_path):
    s, sp, b, c = session_file(tmp_path, {"compared": "text+ids", "identical": True}, damaged=True)
    assert sp.damaged
    v, warning = ss.verdict_check(s, sp, b, c)
    assert (v.status, warning) == ("incomplete", None)


def test_no_result_record_at_all_is_judged_from_the_events(tmp_path):
    s, sp, b, c = session_file(tmp_path, None, c_ids=(1, 3))
    v, warning = ss.verdict_check(s, sp, b, c)
    assert v.status == "differs"  # same model on both sides: ids compared
    assert (
        warning
        == f"p1: no verdict was recorded (the run stopped before it); judged from the recorded events: {v.line()}"
    )


# ------------------------------------------------------------------ events to and from their records


def test_each_event_kind_written_and_read_back():
    from spectui.core.events import SpecReport, StepEvent, StreamFailed, StreamFinished, StreamStarted, TokenEvent

    tok = TokenEvent(5, 1604, b"def", 1_000_250, "accepted", 2, 1)
    assert ss.event_to_json(tok, 1_000_000) == {
        "ev": "token",
        "t": 250,
        "i": 5,
        "id": 1604,
        "label": "accepted",
        "step": 2,
        "rej": 1,
        "d": "def",
    }
    raw = TokenEvent(6, None, b"\xe2\x82", 1_000_300, "target", None, 0)
    assert ss.event_to_json(raw, 1_000_000) == {
        "ev": "token",
        "t": 300,
        "i": 6,
        "id": None,
        "label": "target",
        "step": None,
        "rej": 0,
        "x": "e282",
    }
    assert ss.event_from_json(ss.event_to_json(raw, 1_000_000), 1_000_000) == raw
    assert ss.event_from_json(ss.event_to_json(tok, 1_000_000), 1_000_000) == tok
    step = StepEvent(3, 8, 6, 1_000_400)
    assert ss.event_to_json(step, 1_000_000) == {"ev": "step", "t": 400, "step": 3, "drafted": 8, "accepted": 6}
    assert ss.event_from_json({"ev": "step", "t": 400, "step": 3, "drafted": 8, "accepted": 6}, 7) == StepEvent(
        3, 8, 6, 407
    )
    assert ss.event_to_json(StreamStarted(1_000_000, "hi"), 1_000_000) == {"ev": "start", "t": 0}
    assert ss.event_from_json({"ev": "start", "t": 3}, 2) == StreamStarted(5, "")
    fin = StreamFinished(
        1_000_900, "eos", {"predicted_n": 4}, 57, b"\xff", {"n_max": 8}, SpecReport("vllm", steps=2), 4
    )
    d = ss.event_to_json(fin, 1_000_000)
    assert d == {
        "ev": "finish",
        "t": 900,
        "stop_type": "eos",
        "timings": {"predicted_n": 4},
        "settings": {"n_max": 8},
        "tokens_evaluated": 57,
        "tokens_predicted": 4,
        "tail_x": "ff",
        "spec": d["spec"],  # below: its two set fields, and the record read back whole
    }
    assert (d["spec"]["source"], d["spec"]["steps"], d["spec"]["accepted"]) == ("vllm", 2, None)
    assert ss.event_from_json(d, 1_000_000) == fin
    plain = StreamFinished(1_000_900, "limit", {}, None, b"ok")
    assert ss.event_to_json(plain, 1_000_000)["tail"] == "ok" and "spec" not in ss.event_to_json(plain, 1_000_000)
    assert ss.event_to_json(StreamFailed(1_000_010, "boom"), 1_000_000) == {"ev": "failed", "t": 10, "message": "boom"}
    assert ss.event_from_json({"ev": "failed", "t": 10}) == StreamFailed(10, "")
    assert ss.event_from_json({"ev": "failed", "t": 10, "message": 5}) == StreamFailed(10, "5")


def test_a_finish_record_with_the_fewest_fields_reads_with_its_defaults():
    from spectui.core.events import StreamFinished

    assert ss.event_from_json({"ev": "finish", "t": 1}) == StreamFinished(1, "none", {}, None, b"", {}, None, None)
    assert ss.event_from_json({"ev": "finish", "t": 1, "tail": None, "spec": "x", "stop_type": 3}) == StreamFinished(
        1, "3", {}, None, b"", {}, None, None
    )
    assert ss.event_from_json({"ev": "token", "t": 1, "i": 0, "label": "first"}).data == b""


def test_a_damaged_event_names_what_is_wrong():
    import pytest

    with pytest.raises(KeyError):
        ss.event_from_json({"ev": "start"})
    with pytest.raises(KeyError):
        ss.event_from_json({"ev": "start", "t": None})
    with pytest.raises(TypeError, match="^t is str$"):
        ss.event_from_json({"ev": "start", "t": "5"})
    with pytest.raises(ValueError, match="^label 'guessed'$"):
        ss.event_from_json({"ev": "token", "t": 1, "i": 0, "d": "a", "label": "guessed"})
    with pytest.raises(ValueError, match="^unknown event kind 'pause'$"):
        ss.event_from_json({"ev": "pause", "t": 1})
    with pytest.raises(TypeError, match="^d is int$"):
        ss.event_from_json({"ev": "token", "t": 1, "i": 0, "d": 5, "label": "first"})


# ------------------------------------------------------------------ servers, prompts, headers


def test_a_server_record_with_defaults_and_with_every_field():
    from spectui.core.types import ServerInfo

    assert ss.info_from_json({}) == ServerInfo(url="?", backend="llama.cpp")
    full = {
        "url": "http://a",
        "backend": "vllm",
        "build": "0.32.0",
        "model": "m",
        "n_ctx": 4096,
        "slots": 2,
        "speculative": {"type": "ngram"},
        "kv_cache": {"type_k": "f16"},
        "cache_prompt": False,
    }
    assert ss.info_from_json(full) == ServerInfo(
        url="http://a",
        backend="vllm",
        build="0.32.0",
        model="m",
        n_ctx=4096,
        slots=2,
        speculative={"type": "ngram"},
        kv_cache={"type_k": "f16"},
        cache_prompt=False,
    )
    import pytest

    with pytest.raises(TypeError, match="^server is list, not an object$"):
        ss.info_from_json([])
    with pytest.raises(TypeError, match="^n_ctx is str$"):
        ss.info_from_json({"n_ctx": "4096"})


def test_a_prompt_record_with_defaults_and_with_every_field():
    from spectui.core.types import GenerationParams, Prompt

    sp = ss._prompt({"prompt": {"id": 7}})
    assert (sp.prompt, sp.params, sp.order) == (
        Prompt("7", "", [], None),
        GenerationParams(128, 0.0, 42, None),
        "sequential",
    )
    assert sp.events["baseline"] is not sp.events["candidate"] and not sp.damaged and sp.result is None
    rec = {
        "prompt": {"id": "p", "category": "code", "messages": [{"role": "user", "content": "hi"}], "raw": "hi"},
        "params": {"max_tokens": 64, "temperature": 1, "seed": 7, "cache_prompt": True},
        "order": "concurrent",
    }
    sp = ss._prompt(rec)
    assert sp.prompt == Prompt("p", "code", [{"role": "user", "content": "hi"}], "hi")
    assert sp.params == GenerationParams(64, 1.0, 7, True) and type(sp.params.temperature) is float
    assert sp.order == "concurrent"
    assert ss._prompt({**rec, "order": "one-at-a-time"}).order == "one-at-a-time"
    assert ss._prompt({**rec, "order": "sideways"}).order == "sequential"
    import pytest

    with pytest.raises(TypeError, match="^prompt is not an object$"):
        ss._prompt({"prompt": "p"})
    with pytest.raises(TypeError, match=r"^messages are not \{role, content\} objects$"):
        ss._prompt({"prompt": {"id": "p", "messages": [{"role": "user", "content": 5}]}})
    with pytest.raises(TypeError, match=r"^messages are not \{role, content\} objects$"):
        ss._prompt({"prompt": {"id": "p", "messages": ["hi"]}})


def test_the_header_errors_say_what_the_file_is(tmp_path):
    import pytest

    from spectui.core.errors import InputError

    cases = [
        (b"", "{p} is empty, not a spectui session"),
        (b"  \n", "{p} is empty, not a spectui session"),
        (b"not json\n", "{p} is not a spectui session (its first line is not a spectui header)"),
        (b'{"format": "other"}\n', "{p} is not a spectui session (its first line is not a spectui header)"),
        (b"[1]\n", "{p} is not a spectui session (its first line is not a spectui header)"),
        (
            b'{"format": "spectui-session", "version": "1"}\n',
            "{p}: the session header's version is '1', not a whole number — the file is damaged or not written by spectui",
        ),
        (
            b'{"format": "spectui-session", "version": true}\n',
            "{p}: the session header's version is True, not a whole number — the file is damaged or not written by spectui",
        ),
        (
            b'{"format": "spectui-session"}\n',
            "{p}: the session header's version is None, not a whole number — the file is damaged or not written by spectui",
        ),
        (
            b'{"format": "spectui-session", "version": 2}\n',
            "{p} is session format version 2; this spectui reads up to 1 — upgrade spectui to replay it",
        ),
    ]
    p = tmp_path / "s.jsonl"
    for data, said in cases:
        p.write_bytes(data)
        with pytest.raises(InputError) as exc:
            ss.load_session(p)
        assert exc.value.one_line() == said.format(p=p), data
    with pytest.raises(InputError) as exc:
        ss.load_session(tmp_path / "missing.jsonl")
    assert exc.value.one_line() == f"session file {tmp_path / 'missing.jsonl'} does not exist"
    p.write_bytes(b'{"format": "spectui-session", "version": 0, "created": "then"}\n')
    s = ss.load_session(p)
    assert (s.created, s.prompts, s.warnings, s.terms) == ("then", [], [], None)
    p.write_bytes(b'{"format": "spectui-session", "version": 1}\n')
    assert ss.load_session(p).created == "?"


# ------------------------------------------------------------------ reading a whole file: what it warns


def _tok(side, i, tid=None, d="a", n=0):
    return {
        "type": "event",
        "n": n,
        "side": side,
        "t": 10 + i,
        "ev": "token",
        "i": i,
        "id": tid,
        "d": d,
        "label": "target",
        "step": None,
        "rej": 0,
    }


PROMPT = {"type": "prompt", "n": 0, "prompt": {"id": "p1", "raw": "hi"}, "params": {}}


def test_unreadable_records_are_named_three_times_then_counted(tmp_path):
    recs = [HEADER, PROMPT, [1], [2], [3], [4], [5], _tok("baseline", 0)]
    p = write(tmp_path / "s.jsonl", recs)
    s = ss.load_session(p)
    assert s.warnings == [
        f"{p}:3: unreadable record (TypeError: not an object); skipped it",
        f"{p}:4: unreadable record (TypeError: not an object); skipped it",
        f"{p}:5: unreadable record (TypeError: not an object); skipped it",
        f"{p}: 5 unreadable records in all; the prompts they belong to are reported as incomplete",
    ]
    assert s.prompts[0].damaged and len(s.prompts[0].events["baseline"]) == 1  # read on past them
    p = write(tmp_path / "three.jsonl", [HEADER, PROMPT, [1], {"type": "event", "side": "baseline"}, [3]])
    assert [w.split(": ", 1)[1] for w in ss.load_session(p).warnings] == [
        "unreadable record (TypeError: not an object); skipped it",
        "unreadable record (KeyError: 'ev'); skipped it",
        "unreadable record (TypeError: not an object); skipped it",
    ]
    # a damaged record before any prompt marks none; the blank line is no record
    p = tmp_path / "early.jsonl"
    p.write_bytes(json.dumps(HEADER).encode() + b"\n[1]\n\n" + json.dumps(PROMPT).encode() + b"\n")
    s = ss.load_session(p)
    assert len(s.warnings) == 1 and not s.prompts[0].damaged


def test_a_long_message_is_cut_in_the_warning(tmp_path):
    p = write(tmp_path / "s.jsonl", [HEADER, PROMPT, {"type": "event", "side": "b" * 100, "ev": "start", "t": 0}])
    [w] = ss.load_session(p).warnings
    said = "side '" + "b" * 100 + "'"
    assert w == f"{p}:3: unreadable record (ValueError: {said[:60]}); skipped it"


def test_two_runs_interleaved_and_runs_appended_are_said(tmp_path):
    start = {"type": "event", "n": 0, "side": "baseline", "t": 0, "ev": "start"}
    p = write(tmp_path / "s.jsonl", [HEADER, PROMPT, start, _tok("baseline", 0), start, _tok("baseline", 1)])
    s = ss.load_session(p)
    assert s.warnings == [
        f"{p}: holds the lines of two runs written at the same time, interleaved; the prompts they mix are reported "
        "as incomplete (no verdict)"
    ]
    assert s.prompts[0].damaged
    p = write(tmp_path / "runs.jsonl", [HEADER, {"type": "run"}, PROMPT, {"type": "run"}, PROMPT])
    s = ss.load_session(p)
    assert s.warnings == [f"{p}: holds 2 runs appended one after another; each prompt is reported as recorded"]
    assert not any(sp.damaged for sp in s.prompts)
    p = write(tmp_path / "one.jsonl", [HEADER, {"type": "run"}, PROMPT])
    assert ss.load_session(p).warnings == []


def test_a_token_out_of_turn_is_two_runs_mixed(tmp_path):
    for events in (
        [_tok("baseline", 1)],  # the first token is 0
        [_tok("baseline", 0), _tok("baseline", 0)],
        [_tok("baseline", 0), {**_tok("baseline", 2), "d": 5}],  # read by the slow path: 2 is not next either
    ):
        p = write(tmp_path / "s.jsonl", [HEADER, PROMPT, *events])
        assert ss.load_session(p).prompts[0].damaged, events
    # each side, and each prompt, counts its own tokens from 0; a slow-path token that follows on is fine
    ok = [HEADER, PROMPT, _tok("baseline", 0), _tok("candidate", 0), _tok("baseline", 1), PROMPT, _tok("baseline", 0)]
    s = ss.load_session(write(tmp_path / "ok.jsonl", ok))
    assert not any(sp.damaged for sp in s.prompts) and s.warnings == []
    assert [len(sp.events["baseline"]) for sp in s.prompts] == [2, 1]
    slow = {**_tok("baseline", 1), "step": True}  # not exactly an int: event_from_json reads it
    s = ss.load_session(
        write(tmp_path / "slow.jsonl", [HEADER, PROMPT, _tok("baseline", 0), slow, _tok("baseline", 2)])
    )
    assert not s.prompts[0].damaged and len(s.prompts[0].events["baseline"]) == 3
    p = write(tmp_path / "before.jsonl", [HEADER, _tok("baseline", 0)])
    assert ss.load_session(p).warnings == [
        f"{p}:2: unreadable record (ValueError: an event before any prompt); skipped it"
    ]


def test_a_cut_last_line_is_warned_about_and_left_out(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_bytes(json.dumps(HEADER).encode() + b"\n" + json.dumps(PROMPT).encode() + b'\n{"type": "prompt", "n"')
    s = ss.load_session(p)
    assert s.warnings == [
        f"{p}: the last line is incomplete (the run was cut off); replaying up to the last whole event"
    ]
    assert len(s.prompts) == 1


def test_records_after_the_prompts_attach_by_number(tmp_path):
    from spectui.core.findings import ProbeResult, Triage

    triage = {"cause": "cache", "summary": "hit"}
    drafts = {"window": 3}
    probe = {"type": "probe", "t": 5, "gpus": [], "host": None}
    recs = [
        HEADER,
        {"type": "servers", "baseline": {"url": "http://a"}, "candidate": {"url": "http://b", "model": "m"}},
        PROMPT,
        probe,
        {"type": "result", "n": 0, "identical": True},
        {"type": "prompt", "n": 1, "prompt": {"id": "p2"}},
        {"type": "result", "n": 1, "identical": False},
        {"type": "triage", "n": 0, "triage": triage},
        {"type": "drafts", "n": 1, "drafts": drafts},
        {"type": "triage", "n": 9, "triage": triage},  # no such prompt
        {"type": "terms", "terms": {"alpha": 0.5}},
        {"type": "future-kind"},
    ]
    s = ss.load_session(write(tmp_path / "s.jsonl", recs))
    assert s.warnings == []
    assert (s.infos["baseline"].url, s.infos["candidate"].model) == ("http://a", "m")
    a, b = s.prompts
    assert a.result == {"type": "result", "n": 0, "identical": True} and b.result["identical"] is False
    assert a.triage == Triage.from_json(triage) and b.triage is None
    assert b.drafts == ProbeResult.from_json(drafts) and a.drafts is None
    assert a.probes == [(5, [], None)] and b.probes == []
    assert s.terms == {"alpha": 0.5}
    # a new run numbers its prompts from 0 again: a triage record after it names that run's prompt
    recs = [
        HEADER,
        {"type": "run"},
        PROMPT,
        {"type": "result", "n": 0},
        {"type": "run"},
        PROMPT,
        {"type": "result", "n": 0},
        {"type": "triage", "n": 0, "triage": triage},
    ]
    s = ss.load_session(write(tmp_path / "r.jsonl", recs))
    assert s.prompts[0].triage is None and s.prompts[1].triage.cause == "cache"
    p = write(tmp_path / "t.jsonl", [HEADER, {"type": "terms", "terms": [1]}])
    s = ss.load_session(p)
    assert s.terms is None and s.warnings == [
        f"{p}:2: unreadable record (TypeError: terms is not an object); skipped it"
    ]
    s = ss.load_session(write(tmp_path / "np.jsonl", [HEADER, probe, {"type": "result", "n": 0}]))
    assert s.prompts == [] and s.warnings == []  # nothing to attach them to


def test_the_servers_default_to_unknown_urls(tmp_path):
    from spectui.core.types import ServerInfo

    s = ss.load_session(write(tmp_path / "s.jsonl", [HEADER]))
    assert s.infos == {"baseline": ServerInfo(url="?"), "candidate": ServerInfo(url="?")}


# ------------------------------------------------------------------ appending terms


def test_terms_are_appended_as_one_line_except_after_a_cut_line(tmp_path):
    p = write(tmp_path / "s.jsonl", [HEADER])
    before = p.read_bytes()
    assert ss.append_terms(p, {"alpha": 0.5}) is True
    assert p.read_bytes() == before + b'{"type":"terms","terms":{"alpha":0.5}}\n'
    assert ss.read_terms(p) == {"alpha": 0.5}
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(before + b'{"type": "pro')
    assert ss.append_terms(cut, {"alpha": 0.5}) is False
    assert cut.read_bytes() == before + b'{"type": "pro'
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert ss.append_terms(empty, {"a": 1}) is True and empty.read_bytes() == b'{"type":"terms","terms":{"a":1}}\n'


# ------------------------------------------------------------------ figures, verdicts and results rebuilt


def test_saved_figures_are_taken_only_with_the_type_the_run_gave_them(tmp_path):
    good = {
        "metrics_drafted": 12,
        "metrics_accepted": 7.0,
        "metrics_steps": 4,
        "metrics_check": "ok",
        "accepted_per_position": [3, 2.5],
    }
    s, sp, b, c = session_file(tmp_path, {"compared": "text+ids", "baseline": good, "candidate": {}})
    assert (b.name, c.name) == ("baseline", "candidate")
    f = b.figures
    assert (f.metrics_drafted, f.metrics_accepted, f.metrics_steps, f.metrics_check, f.accepted_per_position) == (
        12,
        7.0,
        4,
        "ok",
        [3, 2.5],
    )
    bad = {
        "metrics_drafted": True,
        "metrics_accepted": "7",
        "metrics_steps": None,
        "metrics_check": 5,
        "accepted_per_position": [3, True],
    }
    s, sp, b, c = session_file(
        tmp_path, {"compared": "text+ids", "baseline": bad, "candidate": {"accepted_per_position": "3"}}
    )
    for rec in (b, c):
        f = rec.figures
        assert (f.metrics_drafted, f.metrics_accepted, f.metrics_steps, f.metrics_check, f.accepted_per_position) == (
            None,
            None,
            None,
            None,
            None,
        )
    s, sp, b, c = session_file(
        tmp_path, {"compared": "text+ids", "baseline": {"metrics_check": ["ok"], "accepted_per_position": ["3"]}}
    )
    assert (b.figures.metrics_check, b.figures.accepted_per_position) == (None, None)


def test_a_recorded_verdict_that_is_not_a_record_is_none():
    from spectui.core.types import GenerationParams, Prompt

    sp = ss.SessionPrompt(Prompt("p", "", [], "hi"), GenerationParams(8), "sequential", result=[1])
    assert ss.recorded_verdict(sp) is None
    sp.result = None
    assert ss.recorded_verdict(sp) is None
    sp.result = {"identical": True, "compared": "text"}  # an older session's keys
    v = ss.recorded_verdict(sp)
    assert (v.status, v.compared) == ("identical", "text")


def test_an_unreadable_verdict_is_cut_to_forty_characters(tmp_path):
    long = "x" * 50
    s, sp, b, c = session_file(tmp_path, {"verdict": long, "compared": "text+ids"})
    v, warning = ss.verdict_check(s, sp, b, c)
    assert (
        warning
        == f"p1: the recorded verdict is unreadable (str: {'x' * 40!r}); judged from the recorded events: {v.line()}"
    )
    s, sp, b, c = session_file(tmp_path, {"verdict": [1, 2], "compared": "text+ids"})
    assert ss.verdict_check(s, sp, b, c)[1].startswith("p1: the recorded verdict is unreadable (list: '[1, 2]')")


def test_a_prompt_that_never_finished_gives_no_warning_without_a_verdict(tmp_path):
    recs = [
        HEADER,
        PROMPT,
        {"type": "event", "n": 0, "side": "baseline", "t": 0, "ev": "start"},
        {"type": "result", "n": 0},
    ]
    s = ss.load_session(write(tmp_path / "s.jsonl", recs))
    [sp] = s.prompts
    b, c = ss.recorders_for(sp)
    v, warning = ss.verdict_check(s, sp, b, c)
    assert v.status == "incomplete" and warning is None


def test_a_verdict_judged_again_that_disagrees_is_said_and_the_recorded_one_shown(tmp_path):
    recorded = {"status": "identical", "identical": True, "compared": "text+ids", "reason": "", "divergence": None}
    s, sp, b, c = session_file(tmp_path, {"verdict": recorded}, c_ids=(1, 3))
    v, warning = ss.verdict_check(s, sp, b, c)
    assert v.status == "identical"  # the run's, shown
    again = warning.split("judged again from the recorded events: ")[1]
    assert warning.startswith("p1: the run recorded IDENTICAL (compared text+ids); judged again") and again.startswith(
        "DIFFERS"
    )
    assert warning.endswith(". Showing the run's verdict")
    s, sp, b, c = session_file(tmp_path, {"verdict": recorded})
    assert ss.verdict_check(s, sp, b, c) == (ss.recorded_verdict(sp), None)


def test_results_carry_each_prompts_record(tmp_path):
    triage = {"cause": "cache", "summary": "hit"}
    recs = [
        HEADER,
        PROMPT,
        {"type": "result", "n": 0, "identical": True, "compared": "text", "run": 1, "runs": 2},
        {"type": "drafts", "n": 0, "drafts": {"window": 3}},
        {"type": "triage", "n": 0, "triage": triage},
        {
            "type": "prompt",
            "n": 1,
            "prompt": {"id": "p1", "raw": "hi"},
            "params": {"max_tokens": 9},
            "order": "concurrent",
        },
        {"type": "result", "n": 1, "identical": True, "compared": "text", "run": 2, "runs": 2},
        {"type": "prompt", "n": 2, "prompt": {"id": "p1", "raw": "hi"}},
        {"type": "result", "n": 2, "identical": True, "run": 3, "runs": 2},  # out of range: taken as one run
        {"type": "prompt", "n": 3, "prompt": {"id": "p1"}},
        [1],
        {"type": "prompt", "n": 4, "prompt": {"id": "p1"}},
        {"type": "result", "n": 4, "run": 1, "runs": 2},
    ]
    s = ss.load_session(write(tmp_path / "s.jsonl", recs))
    r1, r2, r3, r4, r5 = ss.results_for(s)
    assert (r1.run, r1.runs, r2.run, r2.runs, r3.run, r3.runs, r5.run, r5.runs) == (1, 2, 2, 2, 1, 1, 1, 2)
    assert r2.prompt is r1.prompt and r3.prompt is not r1.prompt and r5.prompt is not r4.prompt
    assert r1.triage.cause == "cache" and r1.drafts is not None and r2.triage is None and r2.drafts is None
    assert (r2.params.max_tokens, r2.order, r1.order) == (9, "concurrent", "sequential")
    assert (r4.damaged, r1.damaged) == (True, False)
    assert r4.verdict.status == "incomplete"
    rs = ss.results_for(
        ss.load_session(
            write(tmp_path / "t.jsonl", [HEADER, PROMPT, {"type": "result", "n": 0, "run": "2", "runs": 2}])
        )
    )
    assert (rs[0].run, rs[0].runs) == (1, 1)
    rs = ss.results_for(
        ss.load_session(
            write(tmp_path / "u.jsonl", [HEADER, PROMPT, {"type": "result", "n": 0, "run": 1, "runs": "2"}])
        )
    )
    assert (rs[0].run, rs[0].runs) == (1, 1)


def test_an_unknown_event_cannot_be_written():
    import pytest

    with pytest.raises(TypeError, match="^<class 'types.SimpleNamespace'>$"):
        ss.event_to_json(SimpleNamespace(t_ns=5), 0)


# ------------------------------------------------------------------ a token record read fast or slow, the same


def _one_token(tmp_path, **fields):
    rec = {**_tok("baseline", 0), **fields}
    rec = {k: v for k, v in rec.items() if v is not ...}
    return ss.load_session(write(tmp_path / "s.jsonl", [HEADER, PROMPT, rec]))


def test_a_token_field_of_the_wrong_type_is_an_unreadable_record_not_two_runs(tmp_path):
    for key, value, said in (
        ("i", "0", "TypeError: i is str"),
        ("t", "5", "TypeError: t is str"),
        ("rej", "0", "TypeError: rej is str"),
        ("id", "5", "TypeError: id is str"),
        ("step", "1", "TypeError: step is str"),
        ("label", "guessed", "ValueError: label 'guessed'"),
        ("t", ..., "KeyError: 't'"),
    ):
        s = _one_token(tmp_path, **{key: value})
        p = tmp_path / "s.jsonl"
        assert s.warnings == [f"{p}:3: unreadable record ({said}); skipped it"], (key, value)
        assert s.prompts[0].damaged and len(s.prompts[0].events["baseline"]) == 0


def test_a_token_without_a_rejection_count_rejected_none(tmp_path):
    from spectui.core.events import TokenEvent

    s = _one_token(tmp_path, rej=...)
    assert list(s.prompts[0].events["baseline"]) == [TokenEvent(0, None, b"a", 10, "target", None, 0)]
    s = _one_token(tmp_path, id=5, step=2, rej=1, d="é")
    assert list(s.prompts[0].events["baseline"]) == [TokenEvent(0, 5, "é".encode(), 10, "target", 2, 1)]


def test_a_step_record_holding_a_tokens_fields_is_a_step(tmp_path):
    from spectui.core.events import StepEvent

    s = _one_token(tmp_path, ev="step", drafted=3, accepted=2, step=1)
    assert list(s.prompts[0].events["baseline"]) == [StepEvent(1, 3, 2, 10)]


def test_a_first_token_read_the_slow_way_follows_on(tmp_path):
    slow = {**_tok("baseline", 0), "id": True}  # not exactly an int: event_from_json reads it
    s = ss.load_session(write(tmp_path / "s.jsonl", [HEADER, PROMPT, slow, _tok("baseline", 1)]))
    assert not s.prompts[0].damaged and s.warnings == [] and len(s.prompts[0].events["baseline"]) == 2


def test_four_unreadable_records_are_counted_too(tmp_path):
    p = write(tmp_path / "s.jsonl", [HEADER, PROMPT, [1], [2], [3], [4]])
    w = ss.load_session(p).warnings
    assert (
        len(w) == 4
        and w[3] == f"{p}: 4 unreadable records in all; the prompts they belong to are reported as incomplete"
    )


def test_a_slow_token_without_a_rejection_count_rejected_none(tmp_path):
    from spectui.core.events import TokenEvent

    s = _one_token(tmp_path, rej=..., step=True)  # step not exactly an int: event_from_json reads it
    assert list(s.prompts[0].events["baseline"]) == [TokenEvent(0, None, b"a", 10, "target", True, 0)]


def test_token_text_keeps_bytes_that_are_not_utf8_as_escaped():
    # "\udc80" is how Python's surrogateescape carries the raw byte 0x80 in a str
    rec = {"ev": "token", "t": 1, "i": 0, "id": 3, "d": "a\udc80", "label": "first", "step": None, "rej": 0}
    assert ss.event_from_json(rec).data == b"a\x80"
    assert ss._token_fields(rec)[2] == b"a\x80"


def test_a_record_numbered_like_a_prompt_is_not_taken_for_drafts(tmp_path):
    recs = [
        HEADER,
        PROMPT,
        {"type": "result", "n": 0},
        {"type": "drafts", "n": 0, "drafts": {"window": 3}},
        {"type": "probe", "n": 0, "t": 5, "gpus": [], "host": None},
    ]
    [sp] = ss.load_session(write(tmp_path / "s.jsonl", recs)).prompts
    assert sp.drafts is not None and sp.probes == [(5, [], None)]


def test_the_fast_path_packs_exactly_what_the_writer_gives():
    rec = {"ev": "token", "t": 4, "i": 2, "id": 3, "d": "ab", "label": "accepted", "step": 2}  # no "rej": 0
    assert ss._token_fields(rec) == (2, 3, b"ab", 4, "accepted", 2, 0)
    assert ss._token_fields({**rec, "rej": 1, "step": None, "id": None}) == (2, None, b"ab", 4, "accepted", None, 1)
    assert ss._token_fields({**rec, "step": True}) is None  # not exactly an int: left to event_from_json
    assert ss._token_fields({**rec, "ev": "step"}) is None
