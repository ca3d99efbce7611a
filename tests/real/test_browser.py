"""`spectui serve` in a real browser (Debian's Chromium driven by Playwright), and the HTML report.

The served app runs against real llama-servers; a prompt typed into the page runs, the app's own
session (its autosave) records the IDENTICAL verdict, and screenshots are kept in tests/artifacts/ for a
person to look at.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from spectui.cli.main import main
from spectui.machine.launcher import free_port

ARTIFACTS = Path(__file__).parent.parent / "artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("chromium missing: `make test` installs Debian's chromium package")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def results_in(folder: Path) -> list[dict]:
    out = []
    for f in folder.glob("**/*.jsonl"):
        for line in f.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line being written
            if rec.get("type") == "result":
                out.append(rec)
    return out


def test_served_app_runs_a_prompt_typed_into_the_page(llama_servers, browser, tmp_path):
    ARTIFACTS.mkdir(exist_ok=True)
    port = free_port()
    env = dict(os.environ, SPECTUI_DATA_DIR=str(tmp_path / "data"))
    argv = [sys.executable, "-m", "spectui", "serve", "--port", str(port), "--"]
    argv += ["--baseline", llama_servers["baseline"], "--candidate", llama_servers["draft"], "--max-tokens", "48"]
    serve = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    page = None
    try:
        line = serve.stderr.readline()
        assert f"http://127.0.0.1:{port}/" in line  # bound to 127.0.0.1, and says where
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        deadline = time.monotonic() + 30
        while True:
            try:
                page.goto(f"http://127.0.0.1:{port}/")
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        page.wait_for_selector("#terminal canvas", timeout=60_000)  # the app drew into the page's terminal
        app_procs = [p for p in psutil.Process(serve.pid).children(recursive=True)]
        assert any("spectui" in " ".join(p.cmdline()) for p in app_procs)
        time.sleep(3)  # the app connects to both servers
        page.click("#terminal")
        page.keyboard.type("Name three primary colours.")
        page.keyboard.press("Enter")
        deadline = time.monotonic() + 120
        while not results_in(tmp_path / "data") and time.monotonic() < deadline:
            time.sleep(0.5)
        found = results_in(tmp_path / "data")
        assert found, "the run typed into the page never finished"
        assert found[-1]["identical"] is True
        time.sleep(1)
        page.screenshot(path=str(ARTIFACTS / "serve-identical.png"))
    finally:
        if page is not None:
            page.close()  # the tab goes: its app process ends with its websocket
        children = psutil.Process(serve.pid).children(recursive=True) if serve.poll() is None else []
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(20)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait(5)
        for c in children:  # only what this test started, by PID
            if c.is_running():
                c.terminate()
    assert serve.returncode == 0, "spectui serve did not stop on SIGTERM"
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


@pytest.fixture
def report_page(llama_servers, tmp_path, capsys):
    """A real comparison saved and turned into HTML (before the browser starts: Playwright's sync API
    holds an event loop of its own)."""
    session = tmp_path / "s.jsonl"
    code = main(
        [
            "compare",
            "--baseline",
            llama_servers["baseline"],
            "--candidate",
            llama_servers["draft"],
            "--prompt",
            "Write a haiku about the sea.",
            "--max-tokens",
            "48",
            "--save",
            str(session),
            "--json",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    out = tmp_path / "r.html"
    assert main(["report", str(session), "--format", "html", "-o", str(out)]) == 0
    return out, doc


def test_html_report_renders_with_its_marks(report_page, browser):
    out, doc = report_page
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(out.as_uri())
    accepted = doc["prompts"][0]["candidate"]["label_counts"].get("accepted", 0)
    # marks inside the candidate's output: one underlined span per accepted draft, as the server counted
    spans = page.locator(".out .t-accepted")
    assert spans.count() == accepted == doc["prompts"][0]["candidate"]["accepted"]
    assert "underline" in spans.first.evaluate("e => getComputedStyle(e).textDecorationLine")
    assert page.locator(".out .rej").count() >= 1
    assert page.locator("svg circle").count() == 1  # the measured point on the S(α) plot
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
