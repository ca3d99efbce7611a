"""`spectui … | head` ends without a traceback (found by the vLLM audit: `spectui verify C | head -2`
printed BrokenPipeError's traceback from the redacting stream's write)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SESSION = Path(__file__).parent.parent / "data" / "session-draft-quick2-repeat2.jsonl"


def test_a_reader_that_leaves_early_gets_no_traceback():
    p = subprocess.Popen(
        [sys.executable, "-m", "spectui", "replay", str(SESSION), "--no-tui"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # the reader is gone before anything is written: every write meets a closed pipe
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
