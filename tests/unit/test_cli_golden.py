"""The command line's output, byte for byte, on the recorded sessions in tests/data: `replay --no-tui`
(text and JSON) and `report` (Markdown, JSON, HTML) print what they printed when the expected files in
tests/data/golden/ were captured (before the CLI was reorganised into one module per command group).
Also: every subcommand's --help works, and a shared option's help is the same text in every command.

To capture again after an intended change of output: SPECTUI_GOLDEN_CAPTURE=1 pytest this file, then
review `git diff tests/data/golden`."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from spectui.cli.main import main

DATA = Path(__file__).parent.parent / "data"
GOLDEN = DATA / "golden"
ROOT = DATA.parent.parent
SESSIONS = sorted(p.name for p in DATA.glob("session-*.jsonl"))
RUNS = {
    "replay.txt": ("replay", "--no-tui"),
    "replay.json": ("replay", "--no-tui", "--json"),
    "report.md": ("report", "--format", "md"),
    "report.json": ("report", "--format", "json"),
    "report.html": ("report", "--format", "html"),
}


def test_the_recorded_sessions_are_there():
    assert len(SESSIONS) >= 3


@pytest.mark.parametrize("session", SESSIONS)
@pytest.mark.parametrize("kind", sorted(RUNS))
def test_replay_and_report_print_the_captured_bytes(session, kind, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the session's path is printed as given: relative, the same on every machine
    code = main([*RUNS[kind], f"tests/data/{session}"])
    out = capsys.readouterr()
    got = f"exit {code}\n--- stdout\n{out.out}--- stderr\n{out.err}"
    expected = GOLDEN / f"{session.removesuffix('.jsonl')}.{kind}"
    if os.environ.get("SPECTUI_GOLDEN_CAPTURE"):
        expected.parent.mkdir(exist_ok=True)
        expected.write_text(got, encoding="utf-8")
    assert got == expected.read_text(encoding="utf-8")


def _subcommands() -> list[str]:
    import argparse

    from spectui.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


@pytest.mark.parametrize("command", _subcommands())
def test_every_subcommands_help_works(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: spectui {command}")


def _option_help(command: str, capsys) -> dict[str, str]:
    """Each option of `spectui COMMAND --help` → its help text, with argparse's wrapping undone."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    helps: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^  (-\S.*?)(?:  +(\S.*))?$", line)
        if m:
            current = m.group(1).split(",")[-1].split()[0]
            helps[current] = m.group(2) or ""
        elif current and line.startswith("    ") and line.strip():
            helps[current] = (helps[current] + " " + line.strip()).strip()
        else:
            current = None
    return helps


SHARED = ("--baseline", "--candidate", "--launch", "--profile", "--one-at-a-time")


def test_a_shared_options_help_is_the_same_in_every_command_that_offers_it(capsys):
    seen: dict[str, dict[str, str]] = {}
    for command in ("compare", "sweep"):
        for option, text in _option_help(command, capsys).items():
            if option in SHARED or option in ("--max-tokens", "--temperature", "--seed", "--json"):
                seen.setdefault(option, {})[command] = text
    for option in SHARED:
        texts = seen.get(option, {})
        assert len(texts) == 2, f"{option} offered by {sorted(texts)}"
        assert len(set(texts.values())) == 1, f"{option}: {texts}"


# an option a command offers but never reads is a promise it breaks: each lab offers what it uses
NOT_OFFERED = {
    "prefix": ("--cache-prompt", "--order", "--limit", "--sample", "--idle-timeout", "--deadline", "--launch"),
    "sampling": ("--cache-prompt", "--order", "--seed", "--launch"),
    "sweep": ("--order",),
    "tui": ("--limit", "--sample", "--sample-seed"),
}


@pytest.mark.parametrize("command", sorted(NOT_OFFERED))
def test_a_command_offers_only_the_options_it_reads(command, capsys):
    offered = _option_help(command, capsys)
    assert not set(NOT_OFFERED[command]) & set(offered), sorted(set(NOT_OFFERED[command]) & set(offered))


def test_plain_help_groups_the_commands_by_task_with_examples(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    tasks = [line[:-1] for line in out.splitlines() if line in ("watch:", "prove:", "labs:", "sessions:", "set-up:")]
    assert tasks == ["watch", "prove", "labs", "sessions", "set-up"]
    assert "opens the picker" in out
    assert out.count("\n  spectui ") == 3  # the examples
    for command in _subcommands():
        assert f"\n  {command} " in out, command


def test_spectui_help_imports_no_command_module():
    import subprocess
    import sys

    code = (
        "import sys\nfrom spectui.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('spectui.cli.') and m not in "
        "('spectui.cli.main', 'spectui.cli.commands', 'spectui.cli.common', 'spectui.cli.options')))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout[-500:] + r.stderr[-500:]
