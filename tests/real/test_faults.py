"""The fault suite: a misbehaving candidate against a real llama-server baseline. Each case: exit code,
one line saying what went wrong, the baseline's result still printed, nothing written that leaks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.faults import FaultServer

ROOT = Path(__file__).resolve().parents[2]


def compare(baseline: str, candidate: str, *extra, env=None, timeout=120):
    backend = (
        [] if any(a.startswith("--backend") or a.endswith("-backend") for a in extra) else ["--backend", "llama.cpp"]
    )
    argv = [
        sys.executable,
        "-m",
        "spectui",
        "compare",
        "--baseline",
        baseline,
        "--candidate",
        candidate,
        "--prompt",
        "Say hi.",
        "--max-tokens",
        "8",
        *backend,
        "--json",
        *extra,
    ]
    t0 = time.monotonic()
    r = subprocess.run(
        argv, capture_output=True, text=True, cwd=ROOT, timeout=timeout, env={**os.environ, **(env or {})}
    )
    return r, time.monotonic() - t0


def errors(r) -> list[str]:
    return [ln for ln in r.stderr.splitlines() if ln.startswith("spectui: error")]


def test_endless_keepalives_end_at_the_idle_timeout_and_the_baseline_is_kept(llama_servers):
    with FaultServer("keepalive") as bad:
        r, took = compare(llama_servers["baseline"], bad.url, "--idle-timeout", "2")
    assert r.returncode == 1 and took < 60
    doc = json.loads(r.stdout)
    p = doc["prompts"][0]
    assert p["baseline"]["failed"] is None and p["baseline"]["tokens"] == 8  # the baseline's result is kept
    assert "idle timeout" in p["candidate"]["failed"] and "no event for 2 s" in p["candidate"]["failed"]
    assert len(errors(r)) == 1 and "Traceback" not in r.stderr


def test_a_server_that_accepts_and_never_answers_is_named_quickly():
    with FaultServer("silent") as bad:
        r, took = compare("http://127.0.0.1:9", bad.url, "--backend", "auto")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    with FaultServer("silent") as bad:
        r, took = compare(bad.url, bad.url, "--backend", "auto")
    # quickly: after its first path went unanswered it asked nothing more (each path would wait 5 s
    # again), which the server's own log shows whatever the machine's load; the time is an upper bound
    assert bad.requests and {path for _, path in bad.requests} == {"/props"}, bad.requests
    assert r.returncode == 1 and took < 60, took
    assert "did not answer" in r.stderr and r.stderr.strip().count("\n") == 0


def test_html_on_every_path_is_not_a_known_server():
    with FaultServer("html") as bad:
        r, _ = compare(bad.url, bad.url, "--backend", "auto")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "is not a llama.cpp, vLLM, SGLang or OpenAI-compatible server" in r.stderr


def test_a_wrong_typed_event_fails_that_side_only(llama_servers, tmp_path):
    session = tmp_path / "s.jsonl"
    with FaultServer("bad-event") as bad:
        r, _ = compare(llama_servers["baseline"], bad.url, "--save", str(session))
    assert r.returncode == 1
    p = json.loads(r.stdout)["prompts"][0]
    assert p["baseline"]["failed"] is None and p["baseline"]["tokens"] == 8
    assert "the server sent an event spectui cannot read: content is int" in p["candidate"]["failed"]
    assert p["identical"] is None
    replay = subprocess.run(
        [sys.executable, "-m", "spectui", "replay", str(session), "--no-tui"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert replay.returncode == 1 and "not compared" in replay.stdout  # the session kept both sides


def test_an_error_body_echoing_the_key_never_reaches_a_file(llama_servers, tmp_path):
    session, nb = tmp_path / "s.jsonl", tmp_path / "nb.toml"
    with FaultServer("echo-auth") as bad:
        r, _ = compare(
            llama_servers["baseline"],
            bad.url.replace("http://", "http://alice:pw@"),
            "--save",
            str(session),
            "--notebook",
            str(nb),
            "--api-key-env",
            "FAULT_KEY",
            "--baseline-backend",
            "llama.cpp",
            "--candidate-backend",
            "openai",
            env={"FAULT_KEY": "sk-fault-31337"},
        )
    assert r.returncode == 1 and "bad request, headers were" in r.stdout  # the echo did come back…
    written = r.stdout + r.stderr + session.read_text() + nb.read_text()
    assert "sk-fault-31337" not in written and "alice" not in written and ":pw@" not in written


def test_a_404_on_the_ready_path_is_an_answer_not_loading():
    with FaultServer("keepalive") as bad:  # answers 404 on /v1/models
        # waiting as for a loading server would take the whole ready timeout (600 s, past compare's own
        # 120 s limit); an answer takes one request, however slow the loaded machine starts Python
        r, took = compare(bad.url, bad.url, "--backend", "vllm", "--ready-timeout", "600")
    assert r.returncode == 1 and took < 90, took
    assert "has no /v1/models: not a vllm server" in r.stderr


# -- odd /props and slot replies, normalised at the backend ------------------------------------
class OddServer(FaultServer):
    """Answers like llama-server b11434 but with the /props and slot replies given; /completion streams
    two tokens and a final event, as a real one does."""

    def __init__(self, props: dict, slot_reply=None) -> None:
        super().__init__("odd")
        self.props, self.slot_reply = props, slot_reply

    async def _answer(self, method, path, headers, writer) -> bool:
        def send(status, body):
            data = json.dumps(body).encode()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
                + data
            )

        if path == "/props":
            send("200 OK", self.props)
        elif path.startswith("/slots/") and method == "POST":
            send("200 OK", self.slot_reply)
        elif path == "/completion":
            events = [
                {"content": "Hi", "tokens": [1], "tokens_predicted": 1, "tokens_evaluated": 5},
                {"content": "!", "tokens": [2], "tokens_predicted": 2, "tokens_evaluated": 5},
                {
                    "content": "",
                    "tokens": [],
                    "stop": True,
                    "stop_type": "limit",
                    "tokens_predicted": 2,
                    "tokens_evaluated": 5,
                    "timings": {"prompt_n": 5, "predicted_n": 2, "predicted_ms": 10.0, "prompt_ms": 5.0},
                },
            ]
            body = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
        else:
            return await super()._answer(method, path, headers, writer)
        await writer.drain()
        return True


ODD = {
    "default_generation_settings": {"n_ctx": "big", "params": {"speculative": ["x"]}},
    "build_info": 11434,
    "model_path": 5,
    "total_slots": "four",
    "chat_template": "x",
}


def test_odd_props_types_are_recorded_and_replayed_not_a_traceback(llama_servers, tmp_path):
    session = tmp_path / "s.jsonl"
    with OddServer(ODD) as odd:
        r, _ = compare(llama_servers["baseline"], odd.url, "--save", str(session))
        assert "Traceback" not in r.stderr and r.returncode in (0, 3), r.stderr
        sweep = subprocess.run(
            [sys.executable, "-m", "spectui", "sweep", "--baseline", llama_servers["baseline"], "--candidate", odd.url]
            + ["--backend", "llama.cpp", "--concurrency", "1", "--prompts", "default", "--limit", "1"]
            + ["--max-tokens", "4", "--json"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert "Traceback" not in sweep.stderr and sweep.returncode in (0, 1, 3), sweep.stderr
        assert json.loads(sweep.stdout)["candidate"]["build"] == "11434"
    replay = subprocess.run(
        [sys.executable, "-m", "spectui", "replay", str(session), "--no-tui", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    doc = json.loads(replay.stdout)
    assert "unreadable record" not in replay.stderr  # both servers' identities kept
    assert doc["candidate"]["build"] == "11434" and doc["candidate"]["slots"] is None
    assert doc["baseline"]["build"].startswith("b11434")


def cache(*args):
    return subprocess.run(
        [sys.executable, "-m", "spectui", "cache", *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_a_slot_the_server_does_not_have_is_refused(llama_servers):
    r = cache("save", llama_servers["baseline"], "--slot", "99", "--file", "x.bin")  # these servers run -np 1
    assert r.returncode == 2 and "has 1 slot (0–0); there is no slot 99" in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "saved" not in r.stdout


def test_a_slot_reply_that_is_not_an_object_is_one_line():
    with OddServer({**ODD, "total_slots": 2}, slot_reply=[1, 2]) as odd:
        r = cache("save", odd.url, "--slot", "0", "--file", "x.bin")
    assert r.returncode == 1 and "answered the slot save with list, not an object" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


# -- a file that cannot be written during or after the run never costs the run ----------
def _file_size_limit(limit: int):
    """A full disk, portably: the child may write no file past `limit` bytes (RLIMIT_FSIZE; Python ignores
    SIGXFSZ, so a write past it fails with EFBIG 'File too large', as one on a full disk fails with ENOSPC)."""
    import resource

    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def _spectui(*args, limit: int, timeout=180):
    return subprocess.run(
        [sys.executable, "-m", "spectui", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        preexec_fn=_file_size_limit(limit),
    )


def test_a_full_disk_during_the_run_keeps_the_report_and_says_what_the_session_kept(llama_servers, tmp_path):
    session = tmp_path / "s.jsonl"
    r = _spectui(
        "compare",
        "--baseline",
        llama_servers["baseline"],
        "--candidate",
        llama_servers["ngram"],
        "--prompt",
        "Count from one to twenty.",
        "--max-tokens",
        "32",
        "--json",
        "--save",
        str(session),
        limit=3000,
    )
    assert "Traceback" not in r.stderr
    doc = json.loads(r.stdout)  # the whole report, printed
    assert doc["prompts"][0]["baseline"]["tokens"] == 32 and doc["prompts"][0]["candidate"]["tokens"] == 32
    [line] = errors(r)
    assert f"the session {session} stopped being written (File too large" in line and "up to that point" in line
    assert r.returncode == 1
    replay = subprocess.run(
        [sys.executable, "-m", "spectui", "replay", str(session), "--no-tui"], cwd=ROOT, capture_output=True, text=True
    )
    assert "Traceback" not in replay.stderr  # what the file kept still reads


def test_files_that_cannot_be_written_after_a_sweep_are_one_line_each(llama_servers, tmp_path):
    out, svg, nb = tmp_path / "sweep.json", tmp_path / "plot.svg", tmp_path / "nb.toml"
    r = _spectui(
        "sweep",
        "--baseline",
        llama_servers["baseline"],
        "--candidate",
        llama_servers["ngram"],
        "--concurrency",
        "1",
        "--limit",
        "1",
        "--max-tokens",
        "8",
        "--save",
        str(out),
        "--svg",
        str(svg),
        "--notebook",
        str(nb),
        limit=200,  # every file the sweep writes is larger
    )
    assert "Traceback" not in r.stderr
    assert "1/1 identical" in r.stdout  # the table was printed before any file was tried
    lines = errors(r)
    assert len(lines) == 3, r.stderr
    assert any(f"--save {out} not written" in ln for ln in lines) and any(
        f"--svg {svg} not written" in ln for ln in lines
    )
    assert any(f"cannot write notebook {nb}" in ln for ln in lines)
    assert r.returncode == 1
    # no half-written file or temporary left (the notebook's lock file stays, as it always does)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".nb.toml.lock"]


def test_a_notebook_that_cannot_be_written_after_compare_keeps_the_report(llama_servers, tmp_path):
    nb = tmp_path / "nb.toml"
    r = _spectui(
        "compare",
        "--baseline",
        llama_servers["baseline"],
        "--candidate",
        llama_servers["ngram"],
        "--prompt",
        "Say hi.",
        "--max-tokens",
        "8",
        "--notebook",
        str(nb),
        limit=100,
    )
    assert "Traceback" not in r.stderr and "baseline" in r.stdout  # the text report
    [line] = errors(r)
    assert f"cannot write notebook {nb}" in line and "the report above is complete" in line
    assert r.returncode == 1 and not nb.exists()


def test_api_key_env_reaches_a_llama_server_started_with_api_key(tmp_path):
    """llama-server --api-key answers 401 to every request without the bearer token: --api-key-env sends it
    to llama.cpp servers too, and the key is in no file written (the session, the notebook)."""
    from spectui.machine import assets
    from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv

    found = assets.find_all()
    key = "k-" + os.urandom(8).hex()
    with Launcher() as launcher:
        s = launcher.add(ServerProcess("keyed", llama_server_argv(found.llama_server, found.model, 0,
                                                                  extra=["--api-key", key])))  # fmt: skip
        s.argv[s.argv.index("--port") + 1] = str(s.port)
        launcher.start_all(timeout=120)
        session = tmp_path / "s.jsonl"
        env = {"SPECTUI_TEST_KEY": key}
        r, _ = compare(s.url, s.url, "--api-key-env", "SPECTUI_TEST_KEY", "--save", str(session), env=env)
        without, _ = compare(s.url, s.url, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["prompts"][0]["candidate"]["tokens"] == 8
    assert without.returncode != 0 and "401" in without.stderr  # the control: the server does want the key
    assert key not in session.read_text() and key not in r.stdout + r.stderr
