"""`spectui demo --triage/--no-triage` reaches what the demo runs: the headless compare (whose own default is
off, the demo's on) and the TUI's configuration. No server is started: the pair and the run are recorded."""

from __future__ import annotations

import contextlib

import pytest

from spectui.cli import demo
from spectui.cli.main import main
from spectui.machine import assets


class _Server:
    def __init__(self, side: str, port: int) -> None:
        self.url, self.port, self.pid = f"http://127.0.0.1:{port}", port, None
        self.side = side

    def stop(self) -> None:
        pass


class _Comparison:
    title = "recorded"


@pytest.fixture
def ran(monkeypatch):
    """What the demo ran: the argv of the command it handed over to, or the TUI configuration."""
    seen: dict = {}
    monkeypatch.setattr(assets, "ensure_all", lambda progress=None: None)
    monkeypatch.setattr(
        demo, "demo_servers", lambda kind, values=None: (_Comparison(), _Server("b", 1), _Server("c", 2))
    )
    monkeypatch.setattr(demo, "_both_up", lambda base, cand: contextlib.nullcontext())
    monkeypatch.setattr(demo, "cli_main", lambda argv: seen.setdefault("argv", argv) and 0)
    monkeypatch.setattr(demo, "_run_app", lambda config: seen.setdefault("config", config) and 0)
    return seen


@pytest.mark.parametrize("words, flag", [([], "--triage"), (["--no-triage"], "--no-triage")])
@pytest.mark.parametrize("alone", [[], ["--one-at-a-time"]])
def test_headless_hands_its_triage_to_compare(ran, words, flag, alone):
    assert main(["demo", "--headless", *alone, *words]) == 0
    assert ran["argv"][0] == "compare" and flag in ran["argv"]


@pytest.mark.parametrize("words, triage", [([], True), (["--no-triage"], False)])
@pytest.mark.parametrize("alone", [[], ["--one-at-a-time"]])
def test_the_tui_is_configured_with_it(ran, words, triage, alone):
    assert main(["demo", *alone, *words]) == 0
    assert ran["config"].triage is triage
