"""One server at a time (issue: two servers, one GPU): `compare --launch … --one-at-a-time` starts and
stops the servers in turn — never both up — and gives the verdicts, labels and acceptance of the same
comparison run side by side."""

from __future__ import annotations

import contextlib
import io
import json
import threading

import psutil
import pytest

from spectui.cli.main import main

pytestmark = pytest.mark.server

ARGS = ["--launch", "draft", "--prompts", "quick", "--limit", "2", "--max-tokens", "24", "--json"]


def _llama_children() -> set[int]:
    """llama-server processes this test process started (other tests' shared servers are not ours)."""
    out = set()
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "llama-server" in p.name():
                out.add(p.pid)
    return out


def _compare(extra: list[str], tmp_path, name: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["compare", *ARGS, *extra, "--save", str(tmp_path / f"{name}.jsonl")])
    assert code == 0, out.getvalue()[-2000:]
    return json.loads(out.getvalue())


def test_one_at_a_time_never_has_both_up_and_agrees_with_side_by_side(tmp_path):
    seen: list[set[int]] = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            seen.append(_llama_children())
            stop.wait(0.02)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        alone = _compare(["--one-at-a-time", "--repeat", "2"], tmp_path, "alone")
    finally:
        stop.set()
        t.join(5)
    assert max(len(s) for s in seen) == 1  # a server was up, and never two at once
    launched = set().union(*seen)
    assert len(launched) == 3  # B | C C | B: three launches for two runs
    assert not _llama_children()  # and none is left

    together = _compare([], tmp_path, "together")
    assert alone["params"]["order"] == "one-at-a-time"
    runs = [p for p in alone["prompts"] if p["run"] == 1]
    assert [p["id"] for p in runs] == [p["id"] for p in together["prompts"]]
    for a, b in zip(runs, together["prompts"]):
        assert a["verdict"]["status"] == b["verdict"]["status"] == "identical"
        for key in ("label_counts", "drafted", "accepted", "tokens", "output"):
            assert a["candidate"][key] == b["candidate"][key], key
        assert a["baseline"]["output"] == b["baseline"]["output"]


def test_one_at_a_time_needs_servers_spectui_can_start(capsys):
    code = main(["compare", "--baseline", "http://127.0.0.1:1", "--candidate", "http://127.0.0.1:2",
                 "--prompt", "x", "--one-at-a-time"])  # fmt: skip
    assert code == 2 and "give it with --launch" in capsys.readouterr().err
