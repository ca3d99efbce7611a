"""`spectui compare` against real llama-server processes."""

from __future__ import annotations

import json

import pytest

from spectui.cli.main import main

pytestmark = pytest.mark.server


def run_compare(capsys, *args):
    code = main(["compare", *args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


@pytest.mark.parametrize("candidate", ["draft", "ngram"])
def test_speculation_is_identical_and_counts_match_metrics(llama_servers, capsys, candidate):
    from tests.conftest import wait_idle

    wait_idle(llama_servers["baseline"], llama_servers[candidate])  # the cross-check reads shared counters
    code, doc = run_compare(
        capsys,
        "--baseline",
        llama_servers["baseline"],
        "--candidate",
        llama_servers[candidate],
        "--prompts",
        "quick",
        "--max-tokens",
        "32",  # every prompt still compared byte by byte; both candidates still draft
    )
    assert code == 0, doc
    assert doc["all_identical"] is True
    assert doc["candidate"]["build"] and doc["baseline"]["build"]
    total_drafted = 0
    for p in doc["prompts"]:
        assert p["identical"] is True and p["first_divergence"] is None
        b, c = p["baseline"], p["candidate"]
        assert b["output"] == c["output"] and b["tokens"] == c["tokens"]
        # every token labelled, and the labels add up to the token count
        assert sum(c["label_counts"].values()) == c["tokens"]
        assert c["label_counts"].get("accepted", 0) == c["accepted"]
        assert b["drafted"] == 0 and set(b["label_counts"]) <= {"first", "target"}
        # spectui's counts equal the server's own /metrics deltas
        assert c["metrics_check"].startswith("ok"), c["metrics_check"]
        assert c["drafted"] == c["metrics_drafted"] and c["accepted"] == c["metrics_accepted"]
        total_drafted += c["drafted"]
        if c["drafted"]:
            assert p["acceptance_rate"] == pytest.approx(c["accepted"] / c["drafted"])
            assert c["mean_accepted_length"] >= 1
        assert p["speedup"] is not None and p["speedup"] > 0
    assert total_drafted > 0


def test_quantised_kv_cache_is_flagged_at_the_right_byte(llama_servers, capsys):
    code, doc = run_compare(
        capsys,
        "--baseline",
        llama_servers["baseline"],
        "--candidate",
        llama_servers["kvq4"],
        "--prompt",
        "Write a Python function fizzbuzz(n) that returns a list of strings for 1..n. Keep it short.",
        "--max-tokens",
        "64",
    )
    assert code == 3
    p = doc["prompts"][0]
    assert p["identical"] is False
    d = p["first_divergence"]
    a, b = p["baseline"]["output"].encode(), p["candidate"]["output"].encode()
    assert a[: d["byte"]] == b[: d["byte"]]
    assert d["byte"] == min(len(a), len(b)) or a[d["byte"]] != b[d["byte"]]
    assert d["baseline_token"] is not None or d["candidate_token"] is not None


def test_text_report_puts_acceptance_beside_speedup(llama_servers, capsys):
    code = main(
        [
            "compare",
            "--baseline",
            llama_servers["baseline"],
            "--candidate",
            llama_servers["draft"],
            "--prompt",
            "What is 2+2?",
            "--max-tokens",
            "16",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    line = [ln for ln in out.splitlines() if "speed-up" in ln and "×" in ln][0]
    assert "accepted" in line and "%" in line
    assert "b11434" in out  # the build tag beside the figures


def test_unreachable_url_is_one_line(capsys):
    code = main(["compare", "--baseline", "http://127.0.0.1:9", "--candidate", "http://127.0.0.1:9", "--prompt", "hi"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and "cannot connect" in err and "baseline" in err


def test_not_a_llama_server(capsys, tmp_path):
    import http.server
    import threading

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        code = main(["compare", "--baseline", url, "--candidate", url, "--prompt", "hi"])
        err = capsys.readouterr().err
        assert code == 1 and "not a llama.cpp, vLLM, SGLang or OpenAI-compatible server" in err and err.count("\n") == 1
    finally:
        srv.shutdown()


def test_usage_errors_exit_2(capsys, tmp_path):
    assert main(["compare", "--baseline", "x", "--candidate", "y", "--prompts", str(tmp_path / "none.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    assert main(["compare", "--baseline", "x", "--candidate", "y", "--prompts", str(empty)]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--baseline", "x"])
    assert exc.value.code == 2


def test_server_dying_mid_stream_reports_the_other_side(llama_servers, assets_found, capsys, monkeypatch):
    """A candidate killed while it streams: the baseline's result stands, the candidate says where it stopped."""
    from spectui.core.events import TokenEvent
    from spectui.core.figures import SideRecorder
    from spectui.machine.launcher import Launcher
    from tests.conftest import server_spec

    with Launcher() as launcher:
        victim = launcher.add(server_spec("baseline", assets_found))
        victim.argv[victim.argv.index("--port") + 1] = str(victim.port)
        launcher.start_all()

        feed = SideRecorder.feed
        streamed = {"baseline": 0}
        at_kill = []

        def kill_at_the_first_token(self, ev):  # the event itself, not a delay, says it is streaming
            if isinstance(ev, TokenEvent) and self.name == "baseline":
                streamed["baseline"] += 1
            if self.name == "candidate" and isinstance(ev, TokenEvent) and victim.exited() is None:
                victim.proc.kill()
                victim.proc.wait()
                at_kill.append(streamed["baseline"])
            return feed(self, ev)

        monkeypatch.setattr(SideRecorder, "feed", kill_at_the_first_token)
        code, doc = run_compare(
            capsys,
            "--baseline",
            llama_servers["baseline"],
            "--candidate",
            victim.url,
            "--prompt",
            "Count from 1 to 300, one number per line.",
            # the kill is set off by the candidate's first token, not a delay: 64 tokens leave the baseline
            # streaming long after it (bench/cpu_per_test.py: 5.6 CPU-s at 1,500, 3.4 at 64)
            "--max-tokens",
            "64",
            "--order",
            "concurrent",
        )
    assert code == 1
    p = doc["prompts"][0]
    # the baseline was still streaming when the candidate died, and then ran to its end
    assert at_kill and at_kill[0] < 64 and p["baseline"]["failed"] is None and p["baseline"]["tokens"] == 64
    assert p["candidate"]["failed"] and "after" in p["candidate"]["failed"]
    assert p["candidate"]["tokens"] < 64
    assert p["identical"] is None


def test_ttft_is_never_below_the_servers_own_prompt_time(llama_servers, capsys):
    """README: TTFT runs from sending the request to the first token's bytes, so it is never below the
    server's own prompt_ms."""
    code, doc = run_compare(
        capsys,
        "--baseline",
        llama_servers["baseline"],
        "--candidate",
        llama_servers["draft"],
        "--prompts",
        "quick",
        "--max-tokens",
        "8",
    )
    assert code == 0
    for p in doc["prompts"]:
        for side in ("baseline", "candidate"):
            f = p[side]
            assert f["server_prompt_ms"] > 0 and f["ttft_ms"] >= f["server_prompt_ms"], (side, f)
