"""What the committed snapshots show, checked against the recorded streams' raw bytes.

`--snapshot-update` rewrites the SVGs with whatever the app draws, so a snapshot alone proves only that
the screen did not change. These tests read the text out of each committed SVG and compare it with
figures computed here from the raw SSE files (json per `data:` line, no spectui code): the byte and
token where the outputs part, the server's counters and timings, the output text itself.
"""

from __future__ import annotations

import html
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SNAPS = HERE / "__snapshots__" / "test_snapshots"
DATA = HERE.parent / "data"


def raw(name: str) -> list[dict]:
    return [json.loads(line[6:]) for line in (DATA / name).read_text("utf-8").splitlines() if line.startswith("data: ")]


BASE = raw("llamacpp-b11434-baseline-fizzbuzz.sse")
DRAFT = raw("llamacpp-b11434-draft-simple-fizzbuzz.sse")


def text_of(events: list[dict]) -> bytes:
    return "".join(e.get("content", "") for e in events).encode()


def tokens_before(events: list[dict], byte: int) -> int:
    """The index of the token holding `byte` (every event of these streams carries one token)."""
    seen = 0
    for i, e in enumerate(events):
        seen += len(e.get("content", "").encode())
        if seen > byte:
            return i
    return len(events)


def steps(events: list[dict]) -> int:
    """Verification steps: how often the server's running draft_n moved."""
    last, n = 0, 0
    for e in events:
        d = (e.get("timings") or {}).get("draft_n", last)
        n += d != last
        last = d
    return n


def screen(name: str, marks: bool = True) -> list[str]:
    """The snapshot's rows of text, spans joined left to right, runs of spaces collapsed; without the
    candidate's ✗n marks (each drawn as a span of its own) when `marks` is False."""
    svg = (SNAPS / f"{name}.svg").read_text("utf-8")
    rows: dict[float, list[tuple[float, str]]] = defaultdict(list)
    for m in re.finditer(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        rows[float(m.group(2))].append((float(m.group(1)), html.unescape(m.group(3)).replace("\xa0", " ")))
    keep = (lambda t: True) if marks else (lambda t: not re.fullmatch(r"✗\d+", t))
    return [re.sub(r" +", " ", "".join(t for _, t in sorted(rows[y]) if keep(t))) for y in sorted(rows)]


def squash(b: bytes) -> str:
    return re.sub(r"\s+", "", b.decode())


def pane_text(lines: list[str], side: int) -> str:
    """One pane's text (0 baseline, 1 candidate), borders removed, whitespace dropped."""
    body = [ln.split("││") for ln in lines if ln.startswith("│") and "││" in ln]
    parts = [p[side] if len(p) > side else "" for p in body]
    return re.sub(r"\s+|│", "", "".join(parts))


def counters(events: list[dict]) -> tuple[int, int]:
    t = events[-1].get("timings") or {}
    return t.get("draft_n", 0), t.get("draft_n_accepted", 0)


@pytest.mark.parametrize("name", ["test_identical[wide]", "test_identical[narrow]"])
def test_the_identical_snapshot_shows_the_recorded_output_and_counters(name):
    lines = screen(name)
    joined = "\n".join(lines)
    out = text_of(BASE)
    assert out == text_of(DRAFT)  # the two recordings do agree byte for byte
    assert f"IDENTICAL — {len(out)} bytes" in joined
    drafted, accepted = counters(DRAFT)
    pct = round(100 * accepted / drafted)
    assert f"accept {pct}% ({accepted}/{drafted})" in joined
    assert f"steps {steps(DRAFT)}" in joined
    assert f"tokens {BASE[-1]['tokens_predicted']}" in joined
    b_tps, c_tps = BASE[-1]["timings"]["predicted_per_second"], DRAFT[-1]["timings"]["predicted_per_second"]
    assert f"tok/s {b_tps:.1f} server-timed" in joined and f"tok/s {c_tps:.1f} server-timed" in joined
    assert f"speed-up {c_tps / b_tps:.2f}× at {pct}% ({accepted}/{drafted}) accepted" in joined.replace("\n", " ")
    if name.endswith("[wide]"):  # side by side: each pane holds its side's whole output
        unmarked = screen(name, marks=False)
        assert squash(out) in pane_text(unmarked, 0) and squash(out) in pane_text(unmarked, 1)


def test_the_diverged_snapshot_names_the_byte_and_tokens_where_the_bytes_part():
    cand = [dict(e) for e in DRAFT]
    cand[12]["content"] = " fizz"  # what test_snapshots.diverging does
    a, b = text_of(BASE), text_of(cand)
    byte = next(i for i in range(min(len(a), len(b))) if a[i] != b[i])
    tb, tc = tokens_before(BASE, byte), tokens_before(cand, byte)
    joined = "\n".join(screen("test_diverged"))
    assert f"DIVERGED at byte {byte} (token {tb} baseline / {tc} candidate)" in joined
    diff = "\n".join(screen("test_diff_view"))
    assert f"first difference at byte {byte} (token {tb} / {tc})" in diff


def test_the_failed_snapshot_says_where_the_candidate_stopped():
    head = DRAFT[:20]  # test_snapshots.test_failed: the candidate fails after 20 tokens
    joined = "\n".join(screen("test_failed"))
    assert "failed: connection to replay://candidate lost after 20 tokens" in joined
    assert f"the outputs agreed for the first {len(text_of(head))} bytes" in joined
    drafted, accepted = counters(head)
    # a failed side measured no rate and no acceptance: the pane shows none, only the tokens it got
    assert f"({accepted}/{drafted})" not in joined and "not measured (the side failed)" in joined
    assert "accept —" in joined and "tokens 20" in joined
    assert "IDENTICAL" not in joined and "DIVERGED" not in joined  # no verdict on a failed side


def test_the_streaming_snapshot_shows_the_first_30_tokens_and_their_counters():
    head = DRAFT[:30]  # test_snapshots.test_streaming: the candidate stalls after 30 tokens
    joined = "\n".join(screen("test_streaming"))
    drafted, accepted = counters(head)
    assert f"accept {round(100 * accepted / drafted)}% ({accepted}/{drafted})" in joined
    assert f"steps {steps(head)}" in joined and "tokens 30" in joined and "streaming" in joined
    assert pane_text(screen("test_streaming", marks=False), 1).endswith(squash(text_of(head)))
    assert "IDENTICAL" not in joined and "DIVERGED" not in joined
