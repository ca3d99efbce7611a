"""Long work shows progress: the build's own percentage reaches the bar; non-terminals get short lines."""

from __future__ import annotations

import io
import sys

from spectui.cli.progress import Advance
from spectui.machine.assets import BUILD_PERCENT, run_logged

SCRIPT = "import sys\nfor p in (3, 45, 100):\n    print(f'[{p:3d}%] Building CXX object x{p}.o', flush=True)\nprint('done')\n"


def test_run_logged_passes_the_tools_own_percentage(tmp_path):
    seen = []
    log = io.StringIO()
    code = run_logged(
        [sys.executable, "-c", SCRIPT], log, "building", lambda w, d, line: seen.append((w, d)), BUILD_PERCENT
    )
    assert code == 0
    assert seen == [("building", 0.03), ("building", 0.45), ("building", 1.0)]
    assert "done" in log.getvalue() and log.getvalue().count("Building") == 3  # everything still logged


def test_lines_without_a_percentage_are_news(tmp_path):
    seen = []
    run_logged(
        [sys.executable, "-c", "print('Collecting vllm')"], io.StringIO(), "installing", lambda *a: seen.append(a)
    )
    assert seen == [("installing", None, "Collecting vllm")]


def test_not_a_terminal_prints_a_line_per_tenth(capsys):
    bar = Advance("spectui setup")
    bar.tty = False
    for pct in range(0, 101, 5):
        bar("building llama-server", pct / 100, "x")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "spectui setup: building llama-server …"
    assert lines[1:] == [f"spectui setup: building llama-server {p}%" for p in range(0, 101, 10)]


def test_a_phase_line_closes_the_bar_and_names_the_command(capsys):
    class Bar:
        stopped = 0

        def stop(self):
            Bar.stopped += 1

    adv = Advance("spectui drafts lesson")
    adv._bar = Bar()  # a bar on the screen
    adv.sayer()("measure: kept from the last run")
    assert Bar.stopped == 1 and adv._bar is None
    assert capsys.readouterr().err == "spectui drafts lesson: measure: kept from the last run\n"
    adv.sayer(quiet=True)("said nothing")  # --json: stderr stays empty
    assert capsys.readouterr().err == ""
