"""`spectui prove --launch … --one-at-a-time` on real llama-servers (two servers, one GPU): the
servers are started and stopped in turn — never both up, watched in the process list — and the
certificate's verdicts and acceptance are those of the side-by-side prove of the same pair; it says the
two sides were measured one after the other, verifies, and leaves no server behind."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from spectui.cli.main import main
from tests.conftest import COPYING
from tests.procwatch import llama_children, watched

pytestmark = pytest.mark.server

# 2 prompts, 16 tokens, 2 interleaved runs, 1 sampled prompt × 2 seeds: seconds per server on 2 cores (the
# servers' decoding is most of the CPU; the phases, launches and equal acceptance do not depend on the length).
# The n-gram pair on prompts it copies from: a draft model's candidate costs about 3.7 times the baseline's CPU
# a token here (8 drafts a step, each a decode of the draft), an n-gram's 1.2, and one at a time does not
# depend on how the candidate drafts (a draft model one at a time: test_one_at_a_time.py)
ARGS = ["--launch", "ngram", "--prompts", str(COPYING), "--max-tokens", "16", "--runs", "2"]
ARGS += ["--sampled", "1", "--samples", "2", "--sample-max-tokens", "8", "--no-notebook", "--ready-timeout", "300"]


def _prove(extra: list[str], out) -> tuple[int, str, dict]:
    text, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(err):
        code = main(["prove", *ARGS, *extra, "-o", str(out)])
    doc = json.loads((out / "certificate.json").read_text(encoding="utf-8"))
    return code, text.getvalue() + err.getvalue(), doc


def test_prove_one_at_a_time_never_has_both_up_and_certifies_what_side_by_side_does(tmp_path, capsys):
    with watched() as (seen, shared):
        code, said, alone = _prove(["--one-at-a-time"], tmp_path / "alone")
    assert code == 0, said[-3000:]
    assert max(len(s) for s in seen) == 1  # a server was up, and never two at once
    # greedy runs 1 and 2, then the sampled pass: B | C C | B B | C — four launches
    assert len(set().union(*seen)) == 4
    assert not llama_children(shared)  # and none is left
    assert "one server at a time (asked for (--one-at-a-time))" in said

    code, said, together = _prove(["--no-terms"], tmp_path / "together")  # its terms: test_prove_terms.py
    assert code == 0, said[-3000:]
    assert not llama_children(shared)

    a, b = alone["derived"], together["derived"]
    assert alone["verdict"]["status"] == together["verdict"]["status"] == "identical"
    assert alone["verdict"]["line"].split(" · ")[0] == together["verdict"]["line"].split(" · ")[0]
    for x, y in zip(a["greedy"]["per_prompt"], b["greedy"]["per_prompt"], strict=True):
        assert x["id"] == y["id"] and x["verdicts"] == y["verdicts"] == ["identical", "identical"]
        for key in ("drafted", "accepted", "steps", "accepted_per_position"):
            assert x["acceptance"][key] == y["acceptance"][key], (x["id"], key)
    assert a["acceptance"]["drafted"] > 0
    assert a["acceptance"]["mean_accepted_length"]["value"] == b["acceptance"]["mean_accepted_length"]["value"]
    assert a["sampled"]["counts"] == b["sampled"]["counts"]
    # the certificate says how it was measured; the side-by-side one does not
    assert alone["inputs"]["params"]["order"] == "one-at-a-time" and "one_at_a_time" not in b
    assert "measured one after the other" in a["one_at_a_time"]["line"]
    md = (tmp_path / "alone" / "certificate.md").read_text(encoding="utf-8")
    assert "one server at a time (asked for (--one-at-a-time))" in md and "triage skipped" in md
    assert main(["verify", str(tmp_path / "alone")]) == 0
    assert capsys.readouterr().out.startswith("VERIFIED")


def test_a_difference_found_one_at_a_time_says_triage_was_skipped(tmp_path):
    """A q4_0 KV cache candidate, one at a time: DIFFERENT with its byte offset, and the cause says why no
    triage ran (it needs both servers up)."""
    out = tmp_path / "kvq4"
    text, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(err):
        code = main(
            ["prove", "--launch", "kvq4", "--one-at-a-time", "--prompts", "quick", "--limit", "1"]
            + ["--max-tokens", "48", "--runs", "1", "--sampled", "0", "--no-notebook", "--ready-timeout", "300"]
            + ["-o", str(out)]
        )
    doc = json.loads((out / "certificate.json").read_text(encoding="utf-8"))
    assert code == 3, err.getvalue()[-2000:]
    assert doc["verdict"]["line"].startswith("DIFFERENT on 1/1 (greedy; cause: not triaged, one server at a time)")
    (diff,) = doc["derived"]["differences"]
    assert diff["byte"] is not None and diff["cause"] is None
    assert diff["cause_summary"].startswith("triage skipped: triage reruns a differing prompt on both servers")
    assert main(["verify", str(out)]) == 0
