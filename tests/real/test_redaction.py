"""A URL's user:password never leaves spectui: not on the console (progress lines, the
report, errors), not in the TUI's Markdown/JSON export (Ctrl+E) or its SVG screenshot (F12)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pilot import ready, until

pytestmark = pytest.mark.server
ROOT = Path(__file__).resolve().parents[2]
SECRET_BITS = ("alice", "s3cr3t-pw")


def with_credentials(url: str) -> str:
    return url.replace("http://", "http://alice:s3cr3t-pw@")


def leaks(text: str) -> list[str]:
    return [s for s in SECRET_BITS if s in text]


def test_the_console_never_prints_a_urls_password(llama_servers, tmp_path):
    for extra in ([], ["--json"]):
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "spectui",
                "compare",
                "--baseline",
                with_credentials(llama_servers["baseline"]),
                "--candidate",
                with_credentials(llama_servers["ngram"]),
                "--prompt",
                "Say hi.",
                "--max-tokens",
                "8",
                *extra,
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
            env=os.environ,
        )
        assert r.returncode in (0, 3), r.stderr
        if not extra:
            assert "is llama.cpp" in r.stderr  # the progress line naming the URL was printed…
        assert "***@127.0.0.1" in r.stdout + r.stderr  # …and the report's server lines, redacted
        assert leaks(r.stdout + r.stderr) == []


async def test_the_tuis_export_and_screenshot_never_hold_a_urls_password(llama_servers, tmp_path):
    from spectui.core.types import GenerationParams
    from spectui.machine.probes import GPUProbe
    from spectui.tui.app import AppConfig, make_app
    from tests.fakes import FakeNVML

    sessions = tmp_path / "sessions"
    cfg = AppConfig(
        with_credentials(llama_servers["baseline"]),
        with_credentials(llama_servers["ngram"]),
        params=GenerationParams(max_tokens=12, cache_prompt=False),
        gpu_probe=GPUProbe(FakeNVML()),
        session_dir=str(sessions),
        notebook=str(tmp_path / "lab.toml"),
        initial_prompt="Name three colours.",
    )
    app = make_app(cfg)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot, app)
        assert app.pane("baseline").state == "ready"  # the credentials did not stop it connecting
        app.action_run()
        await until(pilot, lambda: app.results and app.run_done.is_set(), timeout=180, what="the run")
        await pilot.press("ctrl+e")
        await until(pilot, lambda: list(sessions.glob("*.md")) and list(sessions.glob("*.json")), 10, "the report")
        await pilot.press("f12")
        await until(pilot, lambda: list(sessions.glob("*.svg")), 10, "the screenshot")
    written = {p.name: p.read_text(encoding="utf-8") for p in sessions.iterdir() if p.is_file()}
    assert {p.rsplit(".", 1)[-1] for p in written} >= {"md", "json", "svg", "jsonl"}
    md = next(t for n, t in written.items() if n.endswith(".md"))
    assert "http://\\*\\*\\*@127.0.0.1" in md  # the URL is there, without its password
    for name, text in written.items():
        assert leaks(text) == [], name
