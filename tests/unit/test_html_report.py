"""`spectui report --format html`: one self-contained page with the TUI's marks, from a real recorded stream."""

from __future__ import annotations

import asyncio
import re
from html.parser import HTMLParser
from pathlib import Path

from spectui.backends.recorded import ReplayBackend, load_payloads
from spectui.cli.main import main
from spectui.core.runner import run_prompts
from spectui.core.types import GenerationParams, ServerInfo
from spectui.store import prompts
from spectui.store.session_writer import SessionWriter

DATA = Path(__file__).parent.parent / "data"


def recorded_session(tmp_path) -> Path:
    base = load_payloads(DATA / "llamacpp-b11434-baseline-fizzbuzz.sse")
    cand = load_payloads(DATA / "llamacpp-b11434-draft-simple-fizzbuzz.sse")
    cand[12] = dict(cand[12], content=" fizz")  # one token changed, as a lossy KV cache would
    info = ServerInfo("http://127.0.0.1:8081", build="b11434-pypi", model="SmolLM2-135M-Instruct.Q4_1.gguf")
    b = ReplayBackend("replay://b", base, info, virtual_ms_per_event=12.5)
    c = ReplayBackend("replay://c", cand, info, virtual_ms_per_event=12.5)
    path = tmp_path / "s.jsonl"
    w = SessionWriter(path)
    w.servers({"baseline": info, "candidate": info})
    asyncio.run(run_prompts(b, c, [prompts.single("fizzbuzz")], GenerationParams(max_tokens=64), observer=w))
    w.close()
    return path


class Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.classes: dict[str, int] = {}
        self.refs: list[str] = []
        self.texts: dict[str, str] = {}
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for c in (a.get("class") or "").split() if self._in else ():  # marks inside the outputs only
            self.classes[c] = self.classes.get(c, 0) + 1
        for k in ("src", "href"):
            if a.get(k):
                self.refs.append(a[k])
        if tag == "div" and (a.get("id") or "").startswith("out-"):
            self._in = a["id"]
            self.texts[self._in] = ""

    def handle_endtag(self, tag):
        if tag == "div" and self._in:
            self._in = None

    def handle_data(self, data):
        if self._in:
            self.texts[self._in] += data


def test_html_report_is_self_contained_and_marked(tmp_path, capsys):
    session = recorded_session(tmp_path)
    out = tmp_path / "r.html"
    assert main(["report", str(session), "--format", "html", "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    p = Collect()
    p.feed(page)
    assert p.refs == []  # nothing fetched: no src/href at all
    assert not re.search(r"https?://(?!127\.0\.0\.1|www\.w3\.org/2000/svg)", page)
    # the marks: as many accepted-draft spans as the stream's accepted tokens (45 by its own counters,
    # tests/data/README), rejection marks, one first-difference mark on each side
    assert p.classes["t-accepted"] == 45
    assert p.classes["rej"] >= 1 and p.classes["div"] == 2
    assert "DIFFERS at byte" in page and "accepted" in page.split("speed-up", 1)[1][:200]
    assert "b11434-pypi" in page and "<svg" in page
    # the candidate's shown text, with the ✗n marks removed, is its output byte for byte
    text = re.sub(r"✗\d+", "", p.texts["out-prompt-1-candidate"])
    base = "".join(e.get("content", "") for e in load_payloads(DATA / "llamacpp-b11434-draft-simple-fizzbuzz.sse"))
    assert text != base and len(text) == len(base) + len(" fizz") - len(
        load_payloads(DATA / "llamacpp-b11434-draft-simple-fizzbuzz.sse")[12]["content"]
    )
