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
            recs.append(
                {
                    "type": "event",
                    "n": 0,
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
            )
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
