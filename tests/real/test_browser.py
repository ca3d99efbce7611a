"""`spectui serve` in a real browser (Debian's Chromium driven by Playwright), and the HTML report.

The served app runs against real llama-servers; a prompt typed into the page runs, and the app's own
session (its autosave) records the IDENTICAL verdict. The web server is its owner's only: a page of
another origin, a request under another host name (DNS rebinding) and a page without the token are
refused, and past --max-apps (2 here; 4 by default) the next tab gets a message instead of an app.

Screenshots go to the test's temporary folder, or to $SPECTUI_TEST_ARTIFACTS when set (never into the
checkout).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from spectui.cli.main import main

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
REBIND_NAME = "rebind.spectui.test"  # resolves to 127.0.0.1 inside this browser only, as a rebinding name would
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    f"--host-resolver-rules=MAP {REBIND_NAME} 127.0.0.1",
]


def artifacts(tmp_path: Path) -> Path:
    d = Path(os.environ.get("SPECTUI_TEST_ARTIFACTS") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d


def wait_for(predicate, timeout: float, what: str, step: float = 0.1, page=None):
    """Poll a condition; with a page, wait through Playwright (its sync API delivers events only then)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        if page is not None:
            page.wait_for_timeout(step * 1000)
        else:
            time.sleep(step)


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("chromium missing: `make test` installs Debian's chromium package")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


class Served:
    """A running `spectui serve --port 0`: the URL it printed (port read back, token included), its
    stderr lines, and the app processes under it."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        line = wait_for(lambda: next((ln for ln in self.lines if "serving the app at" in ln), None), 120, "the URL")
        self.url = re.search(r"(http://\S+)", line).group(1)
        m = re.match(r"http://([^/]+)/\?token=(\S+)$", self.url)
        self.host, self.token = m.group(1), m.group(2)
        self.port = int(self.host.rsplit(":", 1)[1])
        self.base = f"http://{self.host}"

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)

    def apps(self) -> list[psutil.Process]:
        """The app processes (one per open tab): direct children of spectui serve."""
        try:
            return [c for c in psutil.Process(self.proc.pid).children() if c.status() != psutil.STATUS_ZOMBIE]
        except psutil.NoSuchProcess:
            return []


@contextlib.contextmanager
def serve(tmp_path: Path, *options: str, app_args=()):
    env = dict(os.environ, SPECTUI_DATA_DIR=str(tmp_path / "data"), SPECTUI_CONFIG_DIR=str(tmp_path / "config"))
    argv = [sys.executable, "-m", "spectui", "serve", "--port", "0", *options]
    if app_args:
        argv += ["--", *app_args]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    descendants: list[psutil.Process] = []
    try:
        served = Served(proc)
        yield served
        descendants = psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        for c in descendants:  # only what this test started, by PID
            with contextlib.suppress(psutil.NoSuchProcess):
                if c.is_running() and c.status() != psutil.STATUS_ZOMBIE:
                    c.terminate()
    assert proc.returncode == 0, "spectui serve did not stop on SIGTERM"
    left = [c for c in descendants if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert not left, f"spectui serve left {left} running"


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


class Frames:
    """What the app sent to the page over its websocket, decoded: the terminal's text, with escapes."""

    def __init__(self, page) -> None:
        self.chunks: list[str] = []
        page.on("websocket", lambda ws: ws.on("framereceived", self._add))

    def _add(self, payload) -> None:
        self.chunks.append(payload.decode("utf-8", "replace") if isinstance(payload, bytes) else payload)

    def text(self) -> str:
        return "".join(self.chunks)


def test_served_app_runs_a_prompt_typed_into_the_page(llama_servers, browser, tmp_path):
    app_args = ["--baseline", llama_servers["baseline"], "--candidate", llama_servers["draft"], "--max-tokens", "48"]
    with serve(tmp_path, app_args=app_args) as served:
        assert served.host.startswith("127.0.0.1:")  # bound to 127.0.0.1, and says where
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        frames = Frames(page)
        try:
            assert page.goto(served.url).status == 200
            page.wait_for_selector("#terminal canvas", timeout=60_000)  # the app drew into the page's terminal
            [app] = wait_for(served.apps, 120, "the page's app process")
            assert "spectui" in " ".join(app.cmdline())
            # both panes say they are ready (each connected to its server) before the prompt is typed
            wait_for(lambda: frames.text().count("ready") >= 2, 60, "both panes to be ready", 0.2, page)
            page.click("#terminal")
            page.keyboard.type("Name three primary colours.")
            page.keyboard.press("Enter")
            found = wait_for(lambda: results_in(tmp_path / "data"), 120, "the run typed into the page", 0.5)
            assert found[-1]["identical"] is True
            page.screenshot(path=str(artifacts(tmp_path) / "serve-identical.png"))
        finally:
            page.close()  # the tab goes: its app process ends with its websocket
        wait_for(lambda: not served.apps(), 120, "the closed tab's app process to end")


ATTACKER_PAGE = """<!doctype html><html><body><script>
window.tryAll = async (urls) => {
  const one = (url) => new Promise((resolve) => {
    const ws = new WebSocket(url);
    ws.onopen = () => { resolve("open"); ws.close(); };
    ws.onerror = () => resolve("refused");
    setTimeout(() => resolve("timeout"), 10000);
  });
  const out = [];
  for (const u of urls) out.push(await one(u));
  return out;
};
</script>another site</body></html>"""


@contextlib.contextmanager
def attacker_site():
    """A page on http://localhost:OTHERPORT/: another origin than the served app's."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = ATTACKER_PAGE.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://localhost:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_page_of_another_origin_cannot_open_the_app(browser, tmp_path):
    with attacker_site() as evil:
        with serve(tmp_path) as served:
            page = browser.new_page()
            page.goto(evil + "/")
            ws = f"ws://{served.host}/ws"
            # even a page that somehow had the token is refused: its Origin is not the server's
            outcome = page.evaluate("urls => window.tryAll(urls)", [f"{ws}/{served.token}?width=80&height=24", ws])
            assert outcome == ["refused", "refused"]
            assert served.apps() == []  # no app process was started for it
            page.close()
        # the control: the same page, allowed by --allow-origin, does open the app (so the check is what refused)
        with serve(tmp_path, "--allow-origin", evil) as served:
            page = browser.new_page()
            page.goto(evil + "/")
            outcome = page.evaluate("urls => window.tryAll(urls)", [f"ws://{served.host}/ws/{served.token}"])
            assert outcome == ["open"]
            page.close()
            wait_for(lambda: not served.apps(), 120, "the app to end with its websocket")


def test_a_rebinding_host_name_and_a_missing_token_are_refused(browser, tmp_path):
    with serve(tmp_path) as served:
        page = browser.new_page()
        # DNS rebinding: a name of the attacker's that resolves to 127.0.0.1; even with the token, refused
        r = page.goto(f"http://{REBIND_NAME}:{served.port}/?token={served.token}")
        assert r.status == 403 and "is not this server's address" in page.content()
        r = page.goto(served.base + "/")  # the right host, no token
        assert r.status == 403 and "needs the token" in page.content()
        r = page.goto(f"{served.base}/?token={'x' * len(served.token)}")
        assert r.status == 403
        assert served.apps() == []
        r = page.goto(served.url)  # the printed URL works
        assert r.status == 200
        page.wait_for_selector("#terminal canvas", timeout=60_000)
        wait_for(lambda: len(served.apps()) == 1, 120, "the app process")
        page.close()


def test_the_tab_past_the_cap_is_refused_with_a_message(browser, tmp_path):
    # a cap of 2 (the default, 4, is the parser's: unit/test_serve_options.py): each app is a Python process
    # drawing in a Chromium tab, and what is tested is the refusal past the cap and the slot coming free
    with serve(tmp_path, "--max-apps", "2") as served:  # the app is the profile picker: no servers needed
        pages = []
        for i in range(2):
            page = browser.new_page()
            frames = Frames(page)
            assert page.goto(served.url).status == 200
            wait_for(lambda f=frames: len(f.text()) > 100, 60, f"app {i + 1} to draw", page=page)
            pages.append(page)
        assert len(served.apps()) == 2
        third = browser.new_page()
        r = third.goto(served.url)
        assert r.status == 503
        assert "2 apps are already running" in third.content() and "--max-apps" in third.content()
        assert len(served.apps()) == 2  # no third process
        third.screenshot(path=str(artifacts(tmp_path) / "serve-cap.png"))
        pages.pop().close()  # a tab closes: its slot comes free
        wait_for(lambda: len(served.apps()) == 1, 120, "the closed tab's app to end")
        wait_for(lambda: third.goto(served.url).status == 200, 120, "the third tab to be let in", 0.5)
        for p in [*pages, third]:
            p.close()


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


def test_html_report_renders_with_its_marks(report_page, browser, tmp_path):
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
    page.screenshot(path=str(artifacts(tmp_path) / "report.png"), full_page=True)
