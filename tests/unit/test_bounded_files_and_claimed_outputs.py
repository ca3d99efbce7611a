"""Bounded files and claimed outputs (the drafts lesson, stored terms, the files a user keeps). Each test failed on the code
before its fix (a traceback, a runaway, a silent overwrite, a freeze) and names the cause it covers. Expected
values are written from the inputs, not read back from spectui's output."""

from __future__ import annotations

import asyncio
import errno
import importlib
import json
import os
import re
import shutil
import struct
import threading
import time
from pathlib import Path

import pytest

from spectui.cli.main import main
from spectui.core.errors import InputError
from spectui.run.prove.prove import prepare_dir
from tests.recordings import DATA

SESSION = DATA / "session-draft-quick2-repeat2.jsonl"
DEEP_JSON = "[" * 200_000 + "]" * 200_000
DEEP_TOML = "x = " + "[" * 200_000 + "]" * 200_000 + "\n"


def _one_error(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("spectui: error:")]
    assert len(lines) == 1, err
    return lines[0]


def _gguf(path: Path, hidden: int = 64, embd_rows: int = 64, vocab: int = 10) -> Path:
    """A GGUF v3 header: the shape keys and a tensor table whose token_embd row length is `embd_rows`."""

    def s(x: str) -> bytes:
        b = x.encode()
        return struct.pack("<Q", len(b)) + b

    kv = {"general.architecture": "llama", "llama.embedding_length": hidden, "llama.block_count": 2,
          "llama.attention.head_count": 4, "llama.feed_forward_length": 128, "llama.vocab_size": vocab}  # fmt: skip
    tensors = {"token_embd.weight": (embd_rows, vocab), "output_norm.weight": (embd_rows,)}
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for k, v in kv.items():
        out += s(k) + (struct.pack("<I", 8) + s(v) if isinstance(v, str) else struct.pack("<II", 4, v))
    for name, dims in tensors.items():
        out += s(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", 0, 0)
    path.write_bytes(out)
    return path


# -- cause 1: a tampered terms record is refused in one line, at once -----------------------------------------
def _terms(**over) -> dict:
    m = {"context_tokens": 8, "repeats": 2, "target_step": {"ms": [10.0, 11.0]},
         "target_batch": {"1": {"ms": [10.0, 10.5]}, "4": {"ms": [14.0, 14.5]}}, "draft_step": {"ms": [1.0, 1.0]}}  # fmt: skip
    m.update(over)
    return m


@pytest.mark.parametrize(
    ("case", "measurement", "said"),
    [
        ("huge batch key", _terms(target_batch={"1": {"ms": [10.0]}, "1000000000000": {"ms": [14.0]}}), "target_batch"),
        ("target step 0", _terms(target_step={"ms": [0.0, 0.0]}), "target_step"),
        ("negative time", _terms(draft_step={"ms": [-1.0, 1.0]}), "draft_step"),
        ("infinite time", _terms(target_step={"ms": [float("inf")]}), "target_step"),
        ("text for a time", _terms(target_step={"ms": ["fast"]}), "target_step"),
        ("huge repeats", _terms(repeats=10**12), "repeats"),
    ],  # fmt: skip
)
def test_cause01_a_tampered_terms_record_is_one_line_at_once(case, measurement, said):
    from spectui.labs.theory.curve import CostCurve

    t0 = time.monotonic()
    with pytest.raises(InputError) as exc:
        CostCurve.from_json(measurement).terms()
    assert time.monotonic() - t0 < 2.0
    assert said in str(exc.value), str(exc.value)


def test_cause01_theory_from_a_session_with_tampered_terms_ends_in_one_line(tmp_path, capsys):
    from spectui.labs.theory import record as terms_record

    s = tmp_path / "s.jsonl"
    shutil.copyfile(SESSION, s)
    ids = [json.loads(ln)["prompt"]["id"] for ln in s.read_text().splitlines() if '"prompt":{' in ln]
    entry = {"id": ids[0], "measurement": _terms(target_batch={"1": {"ms": [10.0]}, "99999999999": {"ms": [1.0]}})}
    terms_record.save_beside(s, terms_record.record([entry], 2, None))
    t0 = time.monotonic()
    code = main(["theory", "--from", str(s)])  # the session's servers are gone: the kept terms are read
    line = _one_error(capsys.readouterr().err)
    assert code == 2 and time.monotonic() - t0 < 20 and "target_batch" in line, line


# -- cause 2 and 9: damaged lesson.json / deeply nested files are one line, never RecursionError ---------------
def _lesson_doc(**over) -> dict:
    doc = {"draft": "lookup", "target": "/m/t.gguf", "served": "/m/t.gguf", "phases": [], "done": {}}
    doc.update(over)
    return doc


def test_cause02_the_drafts_screen_text_and_drafts_cost_survive_a_damaged_lesson(tmp_path, capsys):
    from spectui.labs.drafts.lesson import measured_text

    choice = {"n_max": float("inf"), "why": "x", "speedups": [1.0]}
    for name, text in {"deep": DEEP_JSON, "inf": json.dumps(_lesson_doc(choice=choice))}.items():
        d = tmp_path / name
        d.mkdir()
        (d / "lesson.json").write_text(text)
        shown = measured_text(d)  # what F3 shows: one line, no exception
        assert len(shown.splitlines()) == 1 and "lesson.json" in shown, shown
        code = main(["drafts", "cost", "--target", str(_gguf(tmp_path / "m.gguf")), "--lesson", str(d), "--json"])
        line = _one_error(capsys.readouterr().err)
        assert code == 2 and "lesson.json" in line, line


@pytest.mark.parametrize("what", ["prompt TOML", "profile", "notebook", "session first line", "theme", "settings"])
def test_cause09_deeply_nested_files_are_one_line_naming_the_file(what, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "cfg" / "profiles").mkdir(parents=True)
    (tmp_path / "cfg" / "themes").mkdir(parents=True)
    if what == "prompt TOML":
        f = tmp_path / "p.toml"
        f.write_text(DEEP_TOML)
        argv = ["drafts", "data", "--baseline", "http://127.0.0.1:9", "--prompts", str(f), "-o", str(tmp_path / "o")]
    elif what == "profile":
        f = tmp_path / "cfg" / "profiles" / "deep.toml"
        f.write_text(DEEP_TOML)
        argv = ["profiles", "list"]
    elif what == "theme":
        f = tmp_path / "cfg" / "themes" / "deep.toml"
        f.write_text(DEEP_TOML)
        from spectui.store.themes import load_themes

        loaded = load_themes([f.parent])
        assert len(loaded.problems) == 1 and str(f) in loaded.problems[0] and "nests" in loaded.problems[0]
        return
    elif what == "settings":
        f = tmp_path / "cfg" / "config.toml"
        f.write_text(DEEP_TOML)
        from spectui.store import config

        _, warnings = config.load()
        assert len(warnings) == 1 and str(f) in warnings[0]
        return
    elif what == "notebook":
        f = tmp_path / "nb.toml"
        f.write_text(DEEP_TOML)
        from spectui.store import notebook

        with pytest.raises(InputError) as exc:
            notebook.read(f)
        assert str(f) in str(exc.value)
        return
    else:
        f = tmp_path / "s.jsonl"
        f.write_text(DEEP_JSON + "\n")
        argv = ["report", str(f)]
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "RecursionError" not in err, err
    if what == "profile":
        assert code == 0 and str(f.name) in err  # the others list; the bad file is named in one line
    else:
        assert code == 2 and str(f) in _one_error(err)


def test_cause09_sessions_list_names_a_deep_first_line(tmp_path, capsys):
    d = tmp_path / "sessions"
    d.mkdir()
    shutil.copyfile(SESSION, d / "good.jsonl")
    (d / "deep.jsonl").write_text(DEEP_JSON + "\n")
    code = main(["sessions", str(d)])
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err and "good" in out and "deep.jsonl" in out + err


# -- cause 3: -o into a folder never replaces a file spectui did not write ------------------------------------
@pytest.mark.parametrize("command", ["train-eagle3", "train-lookup", "lesson"])
def test_cause03_an_output_folder_with_a_users_files_is_left_untouched(command, tmp_path, capsys):
    out = tmp_path / "d"
    out.mkdir()
    victim = out / {"train-eagle3": "head.gguf", "train-lookup": "corpus.txt", "lesson": "prove.log"}[command]
    victim.write_bytes(b"GGUF a model of the user's")
    model = _gguf(tmp_path / "t.gguf")
    argv = {
        "train-eagle3": ["drafts", "train-eagle3", "--target", str(model), "--data", str(tmp_path / "x.jsonl")],
        "train-lookup": ["drafts", "train-lookup", "--model", str(model), "--prompts", "default"],
        "lesson": ["drafts", "lesson", "--target", str(model), "--prompts", "default"],
    }[command]
    (tmp_path / "x.jsonl").write_text("")
    code = main([*argv, "-o", str(out)])
    line = _one_error(capsys.readouterr().err)
    assert code == 2 and victim.name in line, line
    assert victim.read_bytes() == b"GGUF a model of the user's" and sorted(p.name for p in out.iterdir()) == [
        victim.name
    ]


def test_cause03_a_link_in_the_output_folder_is_refused(tmp_path, capsys):
    out, outside = tmp_path / "d", tmp_path / "outside.txt"
    out.mkdir()
    outside.write_text("the user's\n")
    from spectui.store.claim import claim_folder

    claim_folder(out, "-o", "train-lookup")  # a folder spectui made, then a link put in it
    (out / "corpus.txt").symlink_to(outside)
    code = main(["drafts", "train-lookup", "--model", str(_gguf(tmp_path / "t.gguf")), "--prompts", "default",
                 "-o", str(out)])  # fmt: skip
    line = _one_error(capsys.readouterr().err)
    assert code == 2 and "corpus.txt" in line and outside.read_text() == "the user's\n"


# -- cause 4: a FIFO (or a device) given as a model is refused at once --------------------------------------
def _returns_within(argv: list[str], seconds: float, fifo: Path) -> tuple[bool, list[int]]:
    got: list[int] = []
    t = threading.Thread(target=lambda: got.append(main(argv)), daemon=True)
    t.start()
    t.join(seconds)
    done = not t.is_alive()
    if not done:  # unblock the reader so the thread ends
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        t.join(5)
    return done, got


@pytest.mark.parametrize(
    "argv",
    [["drafts", "cost", "--target"], ["kv", "--model"], ["drafts", "train-lookup", "--prompts", "default", "--model"]],
)
def test_cause04_a_fifo_as_the_model_is_refused_at_once(argv, tmp_path, capsys):
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    extra = ["-o", str(tmp_path / "o")] if "train-lookup" in argv else []
    done, got = _returns_within([*argv, str(fifo), *extra], 10, fifo)
    assert done, f"{argv} blocked on a FIFO"
    line = _one_error(capsys.readouterr().err)
    assert got == [2] and "FIFO" in line, line


def test_cause04_the_drafts_screens_target_check_refuses_a_fifo_without_opening_it(tmp_path):
    from spectui.store.bounded import check_regular

    fifo = tmp_path / "t.gguf"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="FIFO"):
        check_regular(fifo, "--target")


# -- cause 5 and 8 and 12: lesson.json paths, fields and kind ------------------------------------------------
def _write_lesson(folder: Path, doc) -> None:
    from spectui.store.claim import claim_folder

    claim_folder(folder, "-o", "lesson")
    (folder / "lesson.json").write_text(json.dumps(doc) if not isinstance(doc, str) else doc)


def test_cause05_paths_in_lesson_json_outside_its_folder_are_refused(tmp_path):
    from spectui.labs.drafts.lesson import read_lesson, write_lesson

    d = tmp_path / "d"
    foreign = tmp_path / "elsewhere" / "lookup.bin"
    foreign.parent.mkdir()
    foreign.write_bytes(b"x")
    _write_lesson(d, _lesson_doc(phases=[{"name": "train", "seconds": 1.0}], done={"train": {"cache": str(foreign)}}))
    with pytest.raises(InputError) as exc:
        read_lesson(d)
    assert "outside" in str(exc.value) and "cache" in str(exc.value)
    # written relative to the folder: a moved folder still reads its own files
    (d / "lookup.bin").write_bytes(b"y")
    _write_lesson(d, _lesson_doc(done={"train": {"cache": str(d / "lookup.bin")}}))
    les = read_lesson(d)
    write_lesson(d, les)
    assert json.loads((d / "lesson.json").read_text())["done"]["train"]["cache"] == "lookup.bin"
    moved = tmp_path / "moved"
    d.rename(moved)
    assert Path(read_lesson(moved).done["train"]["cache"]) == moved / "lookup.bin"
    _write_lesson(moved, _lesson_doc(certificate=str(foreign)))  # the certificate's path is checked the same way
    with pytest.raises(InputError, match="'certificate'"):
        read_lesson(moved)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("phases", "data"),
        ("phases", [{"name": "data", "seconds": "fast"}]),
        ("probe_n_max", "5"),
        ("per_position", [0.5, "x"]),
        ("choice", {"n_max": 0, "why": "", "speedups": []}),
        ("choice", {"n_max": 4096, "why": "", "speedups": [1.0]}),
        ("done", []),
        ("verdict", 7),
    ],
)
def test_cause08_wrong_typed_lesson_fields_are_one_line_naming_the_key(field, value, tmp_path):
    from spectui.labs.drafts.lesson import read_lesson

    d = tmp_path / "d"
    _write_lesson(d, _lesson_doc(**{"probe_n_max": 5, "per_position": [0.5, 0.4], field: value}))
    with pytest.raises(InputError) as exc:
        read_lesson(d)
    key = "n_max" if field == "choice" else field
    assert key in str(exc.value) and "lesson.json" in str(exc.value), str(exc.value)


@pytest.mark.parametrize("kind", ["folder", "dangling link", "fifo", "one GiB"])
def test_cause12_a_lesson_json_that_is_not_a_file_is_refused_before_any_server(kind, tmp_path, monkeypatch):
    from spectui.run import drafts_lesson
    from spectui.run.lesson_serving import LessonOptions

    d = tmp_path / "d"
    from spectui.store.claim import claim_folder

    claim_folder(d, "-o", "lesson")
    lj = d / "lesson.json"
    if kind == "folder":
        lj.mkdir()
    elif kind == "dangling link":
        lj.symlink_to(tmp_path / "nowhere.json")
    elif kind == "fifo":
        os.mkfifo(lj)
    else:
        with open(lj, "wb") as fh:
            fh.truncate(1 << 30)  # sparse: 1 GiB that must never be read whole

    def no_tools(*a, **k):
        raise AssertionError("tools resolved (a server would start) before lesson.json was checked")

    monkeypatch.setattr(drafts_lesson, "resolve_tools", no_tools)
    opts = LessonOptions(out=d, prompts="default", draft="lookup", target=_gguf(tmp_path / "t.gguf"))
    with pytest.raises(InputError) as exc:
        asyncio.run(drafts_lesson.run_lesson(opts, say=lambda s: None))
    assert "lesson.json" in str(exc.value)
    assert not (tmp_path / "nowhere.json").exists()


# -- cause 6: --api-key-env reaches llama.cpp servers (the real server: tests/real/test_faults.py) ------------
def test_cause06_the_llamacpp_backend_sends_the_bearer_token():
    import httpx

    from spectui.backends.llamacpp import LlamaCppBackend

    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json={"status": "ok"})

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            b = LlamaCppBackend("http://127.0.0.1:1", client, api_key="s3cret-key")
            await b.wait_ready(1)
            await b._post_json("/tokenize", {"content": "x"})

    asyncio.run(go())
    assert seen == ["Bearer s3cret-key", "Bearer s3cret-key"]


# -- cause 7: a full or read-only disk is one line; records stay whole ---------------------------------------
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_cause07_a_full_disk_while_writing_data_is_one_line(code, tmp_path, monkeypatch, capsys):
    from spectui.labs.drafts import data as drafts_data
    from tests.recorded_server import RecordedServer
    from tests.recordings import BASELINE, payloads

    out = tmp_path / "data.jsonl"
    calls = []

    class Disk:  # the os module as the data writer sees it, with a disk that fills after the first record
        def __getattr__(self, name):
            return getattr(os, name)

        @staticmethod
        def write(fd, data):
            calls.append(1)
            if len(calls) > 1:
                raise OSError(code, os.strerror(code))
            return os.write(fd, data)

    monkeypatch.setattr(drafts_data, "os", Disk())
    with RecordedServer(payloads(BASELINE)) as b:
        rc = main(["drafts", "data", "--baseline", b.url, "--prompts", "default", "--limit", "4",
                   "--max-tokens", "8", "-o", str(out)])  # fmt: skip
    line = _one_error(capsys.readouterr().err)
    assert rc != 0 and os.strerror(code) in line and str(out.name) in line, line
    lines = out.read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(json.loads(ln) for ln in lines[:-1])  # whole records only


def test_cause07_the_cli_turns_a_write_boundary_oserror_into_one_line(tmp_path, monkeypatch, capsys):
    from spectui.store import locations

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "r.md"))

    monkeypatch.setattr(locations.os, "fsync", full)
    code = main(["report", str(SESSION), "--format", "md", "-o", str(tmp_path / "r.md")])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err and "No space left on device" in err, err


# -- cause 10: two writers of one data file or folder: the second refuses --------------------------------------
def test_cause10_a_second_drafts_data_on_the_same_file_refuses(tmp_path, capsys):
    from spectui.store.claim import locked

    out = tmp_path / "data.jsonl"
    with locked(out, "-o"):  # another spectui writing it (flock is per open file: this holds it)
        code = main(["drafts", "data", "--baseline", "http://127.0.0.1:9", "--prompts", "default", "-o", str(out)])
    line = _one_error(capsys.readouterr().err)
    assert code == 2 and "another spectui" in line and not out.exists(), line


def test_cause10_a_second_lesson_on_the_same_folder_refuses(tmp_path):
    from spectui.run import drafts_lesson
    from spectui.run.lesson_serving import LessonOptions
    from spectui.store.claim import claim_folder, locked

    d = claim_folder(tmp_path / "d", "-o", "lesson")
    opts = LessonOptions(out=d, prompts="default", draft="lookup", target=_gguf(tmp_path / "t.gguf"))
    with locked(d, "-o"), pytest.raises(InputError, match="another spectui"):
        asyncio.run(drafts_lesson.run_lesson(opts, say=lambda s: None))


# -- cause 11: a server that dies before it is ready: its own error lines, not a backtrace --------------------
def test_cause11_an_early_exit_shows_the_servers_own_lines_not_the_backtrace(tmp_path):
    from spectui.machine.launcher import EarlyExit, ServerProcess

    lines = [
        "main: loading model",
        "llama_model_load: error loading model: tensor token_embd.weight has wrong shape",
        "GGML_ASSERT(ok) failed",
        "[New LWP 12345]",
        "[Thread debugging using libthread_db enabled]",
        "0x00007f00 in __GI___wait4 () at ../sysdeps/unix/sysv/linux/wait4.c:30",
        "#0  0x00007f00 in __GI___wait4 (pid=1) at wait4.c:30",
        "#1  0x00007f01 in ggml_print_backtrace () from libggml-base.so",
        "[Inferior 1 (process 12345) detached]",
    ]

    class Died:  # the process as the launcher sees it once it has exited (unit tests start no process)
        pid = 12345

        def poll(self):
            return 134

    s = ServerProcess("candidate", ["llama-server"], port=1)
    s.proc = Died()  # type: ignore[assignment]
    s.log.extend(lines)
    with pytest.raises(EarlyExit) as exc:
        s.wait_healthy(10)
    msg = exc.value.one_line()
    assert "wrong shape" in msg and "GGML_ASSERT" in msg, msg
    assert "#0" not in msg and "#1" not in msg and "LWP" not in msg and "Inferior" not in msg, msg
    assert "above" not in msg  # the lines are in the message itself


def test_cause11_drafts_lesson_checks_the_target_is_a_gguf_first(tmp_path, capsys):
    notes = tmp_path / "notes.gguf"
    notes.write_text("not a model\n")
    code = main(["drafts", "lesson", "--target", str(notes), "--prompts", "default", "-o", str(tmp_path / "o")])
    assert code == 2 and "is not a GGUF model file" in _one_error(capsys.readouterr().err)
    assert not (tmp_path / "o").exists()


# -- cause 13: unbounded numbers refused --------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["drafts", "lesson", "--probe-n-max", "1000000"],
        ["drafts", "lesson", "--max-tokens", "100000000000000000000"],
        [
            "drafts",
            "data",
            "--baseline",
            "http://127.0.0.1:9",
            "--prompts",
            "default",
            "-o",
            "x.jsonl",
            "--max-tokens",
            "100000000000000000000",
        ],
        ["drafts", "train-lookup", "--prompts", "default", "-o", "o", "--max-tokens", "100000000000000000000"],
    ],  # fmt: skip
)
def test_cause13_unbounded_options_are_refused_by_the_parser(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and "at most" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_cause13_an_embedding_length_the_tensor_table_contradicts_is_refused(tmp_path, capsys):
    model = _gguf(tmp_path / "m.gguf", hidden=4_294_966_720, embd_rows=576)
    code = main(["drafts", "cost", "--target", str(model)])
    line = _one_error(capsys.readouterr().err)
    assert code == 2 and "embedding_length" in line and "576" in line, line


# -- cause 14: messages that mislead --------------------------------------------------------------------------
def test_cause14_prompt_ids_with_control_characters_are_escaped_on_the_terminal(tmp_path, capsys):
    from spectui.store.prompts import load_set

    f = tmp_path / "p.toml"
    f.write_text('[[prompt]]\nid = "evil\\u001b]0;owned\\u0007\\r"\ntext = "hi"\n')
    _, items = load_set(str(f))
    assert items[0].id == "evil\\x1b]0;owned\\x07\\r"  # shown escaped, one printable name
    bad = tmp_path / "evil\x1b[2J\r.toml"  # a file name that would clear the screen: in an error line
    bad.write_text("[[prompt\n")
    code = main(
        ["drafts", "data", "--baseline", "http://127.0.0.1:9", "--prompts", str(bad), "-o", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert code == 2 and "\x1b" not in err and "\r" not in err and "\\x1b[2J" in _one_error(err), err


def test_cause14_a_hung_server_in_drafts_cost_is_never_told_an_option_drafts_cost_lacks():
    import socket

    import httpx

    from spectui.backends.llamacpp import LlamaCppBackend
    from spectui.core.errors import SpectuiError
    from spectui.labs.drafts.cost import measure_prompt_throughput

    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(4)  # accepts (the kernel does), never answers
    url = f"http://127.0.0.1:{hung.getsockname()[1]}"

    async def go():
        async with httpx.AsyncClient() as client:
            return await measure_prompt_throughput(LlamaCppBackend(url, client), words=10, repeats=1, idle_timeout=1)

    try:
        with pytest.raises(SpectuiError) as exc:
            asyncio.run(go())
    finally:
        hung.close()
    line = exc.value.one_line()
    assert "--idle-timeout" not in line and "idle timeout" in line and url in line, line


def test_cause14_a_corrupt_checkpoint_is_named(tmp_path):
    from spectui.labs.drafts.train_eagle3 import trainer_failure

    log = tmp_path / "train.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        f"  File \"x.py\", line 1, in <module>\n_pickle.UnpicklingError: invalid load key, 'x'.\n"
        f"spectui-trainer: loading checkpoint {tmp_path / 'checkpoint.pt'}\n"
    )
    msg = trainer_failure(log, tmp_path)
    assert "checkpoint.pt" in msg and "corrupt" in msg, msg


def test_cause14_train_lookup_checks_notebook_before_the_run(tmp_path, capsys):
    folder_nb = tmp_path / "nb"
    folder_nb.mkdir()
    code = main(["drafts", "train-lookup", "--model", str(_gguf(tmp_path / "t.gguf")), "--prompts", "default",
                 "-o", str(tmp_path / "o"), "--notebook", str(folder_nb)])  # fmt: skip
    assert code == 2 and "--notebook" in _one_error(capsys.readouterr().err)
    assert not (tmp_path / "o").exists()


def test_cause14_no_code_cites_a_file_the_repository_lacks():
    root = Path(__file__).resolve().parents[2]
    hits = [str(p) for p in (root / "spectui").rglob("*.py") if re.search(r"\bFACTS\b", p.read_text(encoding="utf-8"))]
    assert hits == []


# -- cause 15: terms measured by theory --from are kept with the session, without --save -------------------------
def test_cause15_measured_terms_are_kept_with_the_session(tmp_path, monkeypatch, capsys):
    from spectui.cli import theory as cli_theory
    from spectui.labs.theory import record as terms_record
    from spectui.labs.theory.curve import CostCurve

    s = tmp_path / "s.jsonl"
    shutil.copyfile(SESSION, s)
    curve = CostCurve.from_json(_terms())

    async def live(client, args, session, say):
        return {"baseline": object(), "candidate": object()}, None

    async def measured(client, b, c, runs, *a, **k):
        from spectui.labs.theory.terms import check_runs

        return check_runs(runs, curve.terms(), curve.terms_each()), curve

    monkeypatch.setattr(cli_theory, "_pair_or_kept", live)
    monkeypatch.setattr(cli_theory, "check_prompt", measured)
    monkeypatch.setattr("spectui.labs.sampling.exact.launch_argv", lambda url: None)
    assert main(["theory", "--from", str(s)]) == 0
    rec, _ = terms_record.stored(s)
    assert rec is not None and rec["prompts"][0]["measurement"]["target_step"]["ms"] == [10.0, 11.0]
    capsys.readouterr()


def test_cause02_and_04_the_drafts_screens_texts_refuse_a_fifo_and_a_damaged_lesson(tmp_path):
    """F3's two reports are made below the TUI: a FIFO target is one line at once, a damaged lesson one line."""
    from spectui.tui.screens.drafts_screen import cost_text, lesson_text

    fifo = tmp_path / "t.gguf"
    os.mkfifo(fifo)
    got: list[BaseException] = []

    def run():
        try:
            cost_text(str(fifo), None, 2048, 5000)
        except BaseException as exc:  # the report shows a SpectuiError's one line
            got.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert not t.is_alive() and isinstance(got[0], InputError) and "FIFO" in str(got[0])
    d = tmp_path / "lesson"
    d.mkdir()
    (d / "lesson.json").write_text(DEEP_JSON)
    shown = lesson_text(str(d))
    assert len(shown.splitlines()) == 1 and "nests" in shown, shown


def test_the_depth_scan_skips_strings_and_comments_so_real_files_are_never_refused():
    from spectui.store.bounded import MAX_DEPTH, check_depth, nesting_depth

    brackets_in_text = '{"text": "' + "[" * 500 + '", "ids": [[1, 2]]}'
    assert nesting_depth(brackets_in_text) == 3
    check_depth(brackets_in_text, "a record")  # 500 brackets inside a string are text, not nesting
    toml = 'a = "[[["  # [[[[\nb = [[1], {x = \'[[\'}]\nc = """[[[\n]]"""\n' + "# [" * 500
    assert nesting_depth(toml, toml=True) == 2
    check_depth(toml, "a prompt file", toml=True)
    with pytest.raises(InputError, match="nests 65 levels"):
        check_depth("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "x")


def test_ctrl_c_while_the_command_loads_is_exit_130_without_a_traceback(monkeypatch, capsys):
    """SIGINT honoured from the first moment: on a busy machine the modules of a command load for a second
    or more, and a Ctrl+C then ended in a KeyboardInterrupt traceback."""
    cli_main = importlib.import_module("spectui.cli.main")

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "build_parser", interrupted)
    try:
        code = cli_main.main(["drafts", "cost", "--target", "x.gguf"])
    except KeyboardInterrupt:
        pytest.fail("Ctrl+C while the parser was built escaped main as a traceback")
    assert code == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip() == "spectui: interrupted"


def test_cause09_a_deep_or_huge_tool_result_file_is_one_line(tmp_path):
    from spectui.store import imports

    deep = tmp_path / "deep.json"
    deep.write_text(DEEP_JSON)
    with pytest.raises(InputError, match="nests"):
        imports.read("aiperf", deep)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="FIFO"):
        imports.read("aiperf", fifo)  # opened without blocking: a FIFO with no writer never hangs the import


@pytest.mark.parametrize(
    "argv",
    [
        ["formats", "--show", "{f}"],
        ["theory", "--profile", "{f}", "--cost", "0.1"],
        ["prove", "--baseline", "http://127.0.0.1:9", "--candidate", "http://127.0.0.1:9", "--formats-table", "{f}"],
        ["verify", "{f}"],
    ],
    ids=["formats-table", "speculation-profile", "prove-formats-table", "certificate"],
)
@pytest.mark.parametrize("kind", ["fifo", "deep"])
def test_tables_profiles_and_certificates_go_through_the_bounded_loader(tmp_path, capsys, argv, kind):
    """The formats table, a speculation profile and a certificate are files users keep and pass around: a
    FIFO is refused without blocking, a deeply nested file in one line (no RecursionError traceback)."""
    f = tmp_path / "x.json"
    if kind == "fifo":
        os.mkfifo(f)
    else:
        f.write_text("[" * 100_000 + "]" * 100_000)
    code = main([a.replace("{f}", str(f)) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0], err


@pytest.mark.parametrize("name", ["greedy.jsonl", "certificate.json", "speculation_profile.json", "n-way.json"])
def test_prove_never_replaces_a_file_it_would_write_in_its_folder(tmp_path, name):
    """prove -o DIR refuses before any server starts where DIR already holds a file of a name it writes,
    the n-way table's (prove --formats-table) included."""
    (tmp_path / name).write_text("the user's own file\n")
    with pytest.raises(InputError, match="exists"):
        prepare_dir(tmp_path)
    assert (tmp_path / name).read_text() == "the user's own file\n"
