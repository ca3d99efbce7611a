"""The user journey's views of one recorded run agree (one run, one verdict): the whole set's speed-up
with the acceptance of the same runs beside it in the text, JSON and Markdown reports and in `spectui
sessions`; bad input gives one line. On a session recorded from real llama-servers (tests/data)."""

from __future__ import annotations

import asyncio
import json
import math
import socket
import statistics
from pathlib import Path

import httpx
import pytest

from spectui.cli.main import main

DATA = Path(__file__).resolve().parent.parent / "data"
SESSION = DATA / "session-draft-quick2-repeat2.jsonl"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def expected_whole_set() -> tuple[float, int, int]:
    """From the recorded result lines by hand: each prompt's runs' geometric mean, their geometric mean over
    prompts (what `spectui prove` reports for the same runs: one run, one speed-up); accepted and drafted
    summed over every run."""
    results = [r for line in SESSION.read_text().splitlines() if (r := json.loads(line)).get("type") == "result"]
    by_prompt: dict[int, list[float]] = {}
    prompts = {
        r["n"]: r["prompt"]["id"]
        for line in SESSION.read_text().splitlines()
        if (r := json.loads(line)).get("type") == "prompt"
    }
    for r in results:
        by_prompt.setdefault(prompts[r["n"]], []).append(r["speedup"])
    assert len(by_prompt) == 2 and all(len(v) == 2 for v in by_prompt.values())
    geo = [math.exp(sum(math.log(v) for v in vs) / len(vs)) for vs in by_prompt.values()]
    accepted = sum(r["candidate"]["accepted"] for r in results)
    drafted = sum(r["candidate"]["drafted"] for r in results)
    return math.exp(statistics.fmean(math.log(g) for g in geo)), accepted, drafted


def test_whole_set_speedup_has_its_acceptance_and_is_the_same_in_every_view(capsys, tmp_path):
    speedup, accepted, drafted = expected_whole_set()
    assert (accepted, drafted) == (82, 290)
    at = f"{speedup:.2f}×"
    acc = f"at {accepted / drafted:.0%} ({accepted}/{drafted}) accepted"

    code, text, _ = run(capsys, "replay", str(SESSION), "--no-tui")
    assert code == 0
    [line] = [ln for ln in text.splitlines() if ln.startswith("whole set")]
    assert at in line and acc in line, line

    code, out, _ = run(capsys, "replay", str(SESSION), "--no-tui", "--json")
    ws = json.loads(out)["whole_set"]
    assert ws["speedup"]["median"] == pytest.approx(speedup)
    assert (ws["accepted"], ws["drafted"], ws["prompts"], ws["runs"]) == (accepted, drafted, 2, 4)

    code, out, _ = run(capsys, "report", str(SESSION), "--format", "json")
    assert json.loads(out)["whole_set"] == ws

    code, md, _ = run(capsys, "report", str(SESSION), "--format", "md")
    [line] = [ln for ln in md.splitlines() if ln.startswith("Whole set")]
    assert at in line and acc in line, line

    listing = tmp_path / "sessions"
    listing.mkdir()
    (listing / SESSION.name).write_bytes(SESSION.read_bytes())
    code, out, _ = run(capsys, "sessions", str(listing))
    assert code == 0
    # the same speed-up, beside the acceptance of the same runs (it showed the last run's 18 %), the
    # prompts counted once (it said 4 prompts), the candidate's build
    assert f"{at} over the set at {accepted / drafted:.0%} accepted" in out, out
    assert "2 prompts, 4 runs" in out and "identical" in out and "build b11434-pypi" in out


def test_one_prompt_session_has_no_whole_set_line(capsys, tmp_path):
    lines = SESSION.read_text().splitlines()
    first_prompt = [ln for ln in lines if '"type":"prompt"' in ln][2]
    cut = tmp_path / "one.jsonl"
    cut.write_text("\n".join(lines[: lines.index(first_prompt)]) + "\n")
    code, text, _ = run(capsys, "replay", str(cut), "--no-tui")
    assert code == 0 and "whole set" not in text
    code, out, _ = run(capsys, "replay", str(cut), "--no-tui", "--json")
    assert json.loads(out)["whole_set"] is None


def test_sessions_shows_the_recorded_verdict(capsys, tmp_path):
    lines = SESSION.read_text().splitlines()
    for status, shown in (("differs", "DIFFERS"), ("failed", "FAILED")):
        out_lines = []
        done = False
        for ln in lines:
            rec = json.loads(ln)
            if rec.get("type") == "result" and not done:
                rec["verdict"]["status"] = status  # the carried verdict, whatever the old identical key says
                ln = json.dumps(rec)
                done = True
            out_lines.append(ln)
        folder = tmp_path / status
        folder.mkdir()
        (folder / "s.jsonl").write_text("\n".join(out_lines) + "\n")
        code, out, _ = run(capsys, "sessions", str(folder))
        assert f" {shown} " in out, out


def test_sessions_bad_files_one_line_each(capsys, tmp_path):
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "text.jsonl").write_text("hello\n")
    (tmp_path / "newer.jsonl").write_text(SESSION.read_text().replace('"version":1', '"version":99', 1))
    code, out, _ = run(capsys, "sessions", str(tmp_path))
    got = dict(ln.split(": ", 1) for ln in out.splitlines())
    assert got["empty.jsonl"] == "empty, not a spectui session"
    assert got["text.jsonl"].startswith("not a spectui session")  # not a JSON parser's message
    assert "version 99" in got["newer.jsonl"] and "upgrade spectui" in got["newer.jsonl"]


def test_replay_json_without_no_tui_is_one_line(capsys):
    code, out, err = run(capsys, "replay", str(SESSION), "--json")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--no-tui" in err and "Traceback" not in err


@pytest.mark.parametrize("client_kind", ["httpx", "stamped"])
def test_connect_refused_says_so_in_whole_words(client_kind):
    from spectui.backends.detect import detect
    from spectui.backends.transport import stamped_client
    from spectui.core.errors import ServerUnreachable

    async def go():
        client = httpx.AsyncClient() if client_kind == "httpx" else stamped_client()
        try:
            await detect(f"http://127.0.0.1:{port}", client)
        finally:
            await client.aclose()

    # a port nothing listens on, held bound (not listening) while it is asked: no other process's server
    # can take it in between, and the kernel does not pick it as the connection's own source port
    with socket.socket() as s, pytest.raises(ServerUnreachable) as caught:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        asyncio.run(go())
    msg = str(caught.value)
    # it read "(Cannot connect to host 127.0.0.1:P ssl:default [Connect call failed ('127.0.0.1'", cut
    assert msg == f"cannot connect to http://127.0.0.1:{port} (connection refused)", msg


def test_a_certificates_notebook_entry_names_the_candidate_as_compare_does():
    from spectui.store import notebook
    from spectui.store.session import info_from_json

    server = {"url": "http://c", "build": "b2", "speculative": {"enabled": True, "type": "draft-simple"}}
    doc = {
        "verdict": {"status": "identical", "line": "IDENTICAL"},
        "inputs": {"prompt_set": {"name": "quick", "sha256": "ab" * 32}},
        "derived": {"greedy": {"prompts": 2, "identical": 2}, "speedup": {"overall": None}},
        "measured_on": {"servers": {"candidate": server}},
    }
    entry = notebook.certificate_entry(doc)
    # it read "enabled=True, type=draft-simple" beside compare's "spec draft-simple" in `notebook show`
    assert entry["candidate_config"] == info_from_json(server).describe_speedup() == "spec draft-simple"


def test_html_report_has_the_same_whole_set_line(capsys):
    import html

    speedup, accepted, drafted = expected_whole_set()
    code, page, _ = run(capsys, "report", str(SESSION), "--format", "html")
    assert code == 0
    [line] = [ln for ln in html.unescape(page).split("<p>") if ln.startswith("Whole set")]
    assert f"{speedup:.2f}×" in line and f"at {accepted / drafted:.0%} ({accepted}/{drafted}) accepted" in line


def test_markdown_report_of_a_cut_session_says_what_was_not_compared(capsys, tmp_path):
    data = SESSION.read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[:20000])  # inside the second run of the first prompt
    code, text, _ = run(capsys, "replay", str(cut), "--no-tui")
    assert "1/1 outputs identical, 1 not compared" in text
    code, md, _ = run(capsys, "report", str(cut), "--format", "md")
    # it said "1/1 outputs identical." and nothing of the prompt the recording stops inside
    assert "1/1 outputs identical, 1 not compared." in md


def test_theory_no_measure_never_calls_its_terms_measured(capsys):
    code, out, _ = run(capsys, "theory", "--from", str(SESSION), "--no-measure")
    assert code == 0
    # it said "predicted from the measured terms" and "the measured terms account for the measured
    # speed-up" about the ideal formula's c = 0, V = 1, R = 0
    assert "the measured terms" not in out
    assert out.count("predicted from the ideal formula's terms (none measured)") == 2


def test_sessions_lists_a_session_cut_inside_a_run_as_replay_reads_it(capsys, tmp_path):
    (tmp_path / "cut.jsonl").write_bytes(SESSION.read_bytes()[:20000])  # inside code-fizzbuzz's run 2
    code, out, _ = run(capsys, "sessions", str(tmp_path))
    # one prompt, its second run cut: not "2 prompts", and its own speed-up, not one "over the set"
    assert "1 prompt, 2 runs" in out and "over the set" not in out, out
    assert " — " in out  # no verdict for the session: a prompt has none
