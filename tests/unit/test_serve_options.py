"""`spectui serve`'s options as parsed: the cap on app processes (the cap itself, refused past it, on a real
server and in a real browser: real/test_serve.py, real/test_browser.py)."""

from __future__ import annotations

import pytest

from spectui.cli.main import build_parser, main


def test_the_default_cap_is_four_apps():
    args = build_parser("serve").parse_args(["serve"])
    assert args.max_apps == 4
    assert build_parser("serve").parse_args(["serve", "--max-apps", "2"]).max_apps == 2


@pytest.mark.parametrize("n", ["0", "-1"])
def test_a_cap_under_one_is_one_line_and_exit_2(n, capsys):
    assert main(["serve", "--max-apps", n, "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert f"--max-apps must be at least 1, not {n}" in err and len(err.strip().splitlines()) == 1
