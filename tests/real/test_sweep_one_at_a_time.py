"""`spectui sweep --launch … --one-at-a-time` on real llama-servers: the baseline alone at
every concurrency level, then the candidate alone, whole phases alternating — never both up, watched in
the process list — every output compared with the other side's of the same run and request, each level's
speed-up paired run by run, and no server left."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from spectui.cli.main import main
from tests.conftest import COPYING
from tests.procwatch import llama_children, watched

pytestmark = pytest.mark.server

# 8 tokens: the servers' decoding is most of the CPU; the phases, the pairing and the drafting do not need more.
# The n-gram pair on prompts it copies from (a draft model's candidate costs about 3.7 times its CPU a token
# here; one at a time does not depend on how the candidate drafts)
ARGS = ["sweep", "--launch", "ngram", "--concurrency", "1,2", "--prompts", str(COPYING), "--max-tokens", "8"]
ARGS += ["--repeat", "2", "--json", "--ready-timeout", "300"]


def test_sweep_one_at_a_time_never_has_both_up_and_pairs_every_level(tmp_path):
    out = io.StringIO()
    with watched() as (seen, shared):
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = main([*ARGS, "--one-at-a-time"])
    assert code == 0, out.getvalue()[-2000:]
    assert max(len(s) for s in seen) == 1  # a server was up, and never two at once
    assert len(set().union(*seen)) == 3  # B | C C | B: three launches for two runs
    assert not llama_children(shared)
    doc = json.loads(out.getvalue())
    assert doc["params"]["order"] == "one-at-a-time"
    for lv in doc["levels"]:
        n = lv["concurrency"]
        assert lv["identical"] is True and lv["outputs_compared"] == 2 * n  # every request of both runs
        assert len(lv["per_run_tps"]) == 2 and all(b and c for b, c in lv["per_run_tps"])  # paired per run
        assert lv["speedup_low"] <= lv["speedup"] <= lv["speedup_high"]
        assert lv["candidate"]["drafted"] > 0 and lv["candidate"]["metrics_check"].startswith("ok")
        assert lv["predicted_speedup"] is None and "both servers up" in lv["predicted_note"]
