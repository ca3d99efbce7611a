"""The EAGLE-3 trainer's conventions (labs/drafts/eagle3_head.py) against independent references.

torch lives only in the environment `spectui setup --vllm` makes (never in spectui's venv), so each check
runs there as a child process (tests/unit/eagle3_torch_checks.py); without that environment they skip and
say why. `make test` installs it.
"""

import os
import subprocess
from pathlib import Path

import pytest

from spectui.machine.assets import find_vllm_python

CHECKS = Path(__file__).with_name("eagle3_torch_checks.py")


@pytest.fixture(scope="module")
def checked() -> str:
    """Every check, in one child process: importing torch there costs more CPU than the checks (3.2 CPU-s for
    one check alone, 8.2 for all five together, against 28 for five processes)."""
    py = find_vllm_python()
    if py is None:
        pytest.skip("the torch environment is absent: `spectui setup --vllm` installs it (make test does)")
    r = subprocess.run(
        [str(py), str(CHECKS)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    return r.stdout + r.stderr


@pytest.mark.parametrize(
    "check",
    [
        "prehook",  # pre-hook at layer L == output_hidden_states[L] (llama.cpp t_layer_inp), != [L+1]
        "pairs",  # (token[P+1], g[P]) -> token[P+2] (common/speculative.cpp:480-512)
        "forward",  # concat [emb, g], raw-g residual, pre-norm output, vs a hand-written row with HF RoPE
        "ttt",  # step 1 = token[P+2], g = step 0's pre-norm, position P+1, step-0 keys <= P + its own
        "vocab",  # d2t offsets (+ arange = kept ids, unique), t2d, trimmed LM head rows = the target's
    ],
)
def test_eagle3_convention(checked, check):
    assert f"ok {check}\n" in checked, checked[-3000:]
