"""prove on a full disk and a folder it cannot write: `-o` is checked by writing to it before
any server is asked; a session that stopped being written (RLIMIT_FSIZE in a child process: a write past
the limit fails with EFBIG as one on a full disk fails with ENOSPC) ends prove with SessionNotWritten naming
the file, every finished prompt kept for the report, and no certificate over the cut session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from spectui.cli.main import main

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import asyncio, resource, sys
from pathlib import Path
from tests.unit.test_certificate import prompts
from spectui.backends.recorded import ReplayBackend
from spectui.core.types import GenerationParams
from spectui.run.prove.prove import ProveOptions, Prover, SessionNotWritten
from tests.recordings import BASELINE, DRAFT, INFO, payloads

out = Path(sys.argv[1])
b = ReplayBackend("replay://b", payloads(BASELINE), INFO, virtual_ms_per_event=12.5)
c = ReplayBackend("replay://c", payloads(DRAFT), INFO, virtual_ms_per_event=12.5)
prover = Prover(b, c, GenerationParams(max_tokens=64), prompts(3), "default", out, ProveOptions(triage=False, hash_files=False))
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
try:
    asyncio.run(prover.run())
    print("WROTE A CERTIFICATE")
except SessionNotWritten as exc:
    print(f"NOT WRITTEN|{len(exc.results)}|{exc.one_line()}")
"""


def test_a_session_cut_by_a_full_disk_gives_no_certificate(tmp_path):
    out = tmp_path / "c"
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(out), "30000"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    said, n, line = r.stdout.strip().split("|", 2)
    assert said == "NOT WRITTEN" and int(n) == 6  # 3 prompts × 2 runs, every one finished and kept
    assert f"the session {out / 'greedy.jsonl'} stopped being written (File too large" in line
    assert "no certificate was made" in line and "\\n" not in line
    assert not (out / "certificate.json").exists() and (out / "greedy.jsonl").stat().st_size <= 30000


def test_an_output_folder_that_cannot_be_written_is_refused_before_any_server(capsys):
    # nothing listens on port 9: a refusal that names -o came before any server was asked
    code = main(
        ["prove", "--baseline", "http://127.0.0.1:9", "--candidate", "http://127.0.0.1:9"]
        + ["-o", "/proc/self/fdinfo", "--no-notebook"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "-o /proc/self/fdinfo: cannot write in it" in err, err
    assert len(err.strip().splitlines()) == 1
