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
