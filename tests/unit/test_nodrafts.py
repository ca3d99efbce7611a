"""Why a speculating candidate drafted nothing, from its flags (run.nodrafts), with the flag that fixes it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from spectui.run.nodrafts import explain, local_argv, why_nothing_drafted

SERVER = ["llama-server", "-m", "m.gguf", "--port", "8081"]


def test_llama_cpps_default_ngram_sizes_are_named_with_the_fix():
    line = why_nothing_drafted([*SERVER, "--spec-type", "ngram-simple"], 64)
    assert "N 12 / M 48 (llama.cpp's defaults)" in line and "context of 64 tokens" in line
    assert "--spec-ngram-simple-size-n 3 --spec-ngram-simple-size-m 8" in line


def test_small_ngram_sizes_say_what_n_gram_drafting_needs():
    argv = [
        *SERVER,
        "--spec-type",
        "ngram-simple",
        "--spec-ngram-simple-size-n",
        "3",
        "--spec-ngram-simple-size-m",
        "8",
    ]
    line = why_nothing_drafted(argv, None)
    assert "(N 3)" in line and "copy the prompt" in line and "size-n 3" not in line


def test_a_missing_draft_file_and_a_p_min_are_named(tmp_path):
    missing = tmp_path / "draft.gguf"
    assert str(missing) in why_nothing_drafted([*SERVER, "-md", str(missing)], None)
    missing.write_bytes(b"GGUF")
    argv = [*SERVER, "-md", str(missing), "--spec-draft-p-min", "0.99"]
    assert "--spec-draft-p-min 0.99" in why_nothing_drafted(argv, None)


def test_a_candidate_without_speculation_gets_no_line():
    assert explain([*SERVER, "-ctk", "q4_0"], "http://127.0.0.1:1", 10) is None
    assert explain(None, "http://example.invalid:8080", 10) is None  # not local: its flags are unknown


def test_the_flags_of_a_local_server_not_launched_by_spectui_are_read_by_its_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    code = f"import socket,time; s=socket.socket(); s.bind(('127.0.0.1',{port})); s.listen(); time.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", code, "--spec-type", "ngram-simple"])
    try:
        deadline = time.monotonic() + 10
        while local_argv(f"http://127.0.0.1:{port}") is None and time.monotonic() < deadline:
            time.sleep(0.05)
        argv = local_argv(f"http://127.0.0.1:{port}")
        assert argv is not None and argv[-2:] == ["--spec-type", "ngram-simple"]
        assert "N 12 / M 48" in (explain(None, f"http://127.0.0.1:{port}", None) or "")
    finally:
        proc.kill()
        proc.wait()
