"""`spectui prove` measures the formula's terms on real llama-servers after its run: the
certificate carries the terms table (c, V(k), R(k), α per position, predicted against measured), verify
derives each check again, and an n-gram candidate has c = 0 and says so.

Small (2 prompts, 16 tokens, 2 runs, no sampled pass): the machine is 2 shared cores, and the servers' decoding
and timing is most of the suite's CPU (every prompt still drafts: each certificate below checks each prompt).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spectui.cli.main import main
from spectui.core import terms_table
from tests.conftest import COPYING, DRAFT_N_MAX

pytestmark = pytest.mark.server


def prove(capsys, baseline: str, candidate: str, out: Path, prompts: str) -> dict:
    code = main(
        ["prove", "--baseline", baseline, "--candidate", candidate, "--prompts", prompts]
        + ["--max-tokens", "16", "--runs", "2", "--sampled", "0", "-o", str(out), "--no-notebook"]
    )
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err  # 0 identical; 1 where a run did not finish (a loaded machine)
    assert "measuring the formula's terms" in captured.err
    return json.loads((out / "certificate.json").read_text(encoding="utf-8"))


def terms_row(md: str, pid: str) -> list[str]:
    section = md.split(terms_table.TITLE, 1)[1].splitlines()
    body = section[next(i for i, line in enumerate(section) if line.startswith("|---")) + 1 :]
    row = next(line for line in body if line.startswith(f"| {pid} |"))
    return [c.strip() for c in row.strip("|").split("|")]


def test_a_draft_simple_certificate_carries_measured_terms_that_verify_rederives(llama_servers, capsys, tmp_path):
    out = tmp_path / "draft"
    doc = prove(capsys, llama_servers["baseline"], llama_servers["draft"], out, "quick")
    entries = doc["terms"]["prompts"]
    assert [e["id"] for e in entries] == doc["inputs"]["share"]
    md = (out / "certificate.md").read_text(encoding="utf-8")
    for e in entries:
        chk, m = e["check"], e["measurement"]
        assert chk is not None and m["drafting"] == "draft model"
        # c: the draft model's decode step on its own llama-server over the baseline's, measured
        assert chk["draft_cost_c"] > 0 and chk["sources"]["c"].startswith("measured")
        # V(k) for k = 1 … n_max + 1: V(1) = 1 by construction
        v = chk["verification_cost"]
        assert v["1"] == 1.0 and list(v) == [str(k) for k in range(1, DRAFT_N_MAX + 2)]
        assert chk["draft_reevaluation_cost"] and chk["measured_low"] is not None
        # agreement, the term that misses, or an interval too wide to tell: never silence
        assert chk["agree"] or chk["miss"] or any(n.startswith("too few runs") for n in chk["notes"])
        cells = terms_row(md, e["id"])
        assert cells[1] == f"{chk['draft_cost_c']:.3f}" and cells[2].split()[0] == "1.00"
        assert cells[4] == f"{chk['alpha_per_position']:.3f}"
    assert main(["verify", str(out / "certificate.json")]) == 0
    said = capsys.readouterr().out
    assert f"terms: the check of {len(entries)} prompt(s) re-derived" in said


def test_an_ngram_certificate_has_c_zero_said_so(llama_servers, capsys, tmp_path):
    out = tmp_path / "ngram"
    doc = prove(capsys, llama_servers["baseline"], llama_servers["ngram"], out, str(COPYING))
    md = (out / "certificate.md").read_text(encoding="utf-8")
    drafted = [e for e in doc["terms"]["prompts"] if e["check"] is not None]
    assert drafted  # a copying prompt is what n-gram drafting drafts on
    for e in drafted:
        chk = e["check"]
        assert chk["draft_cost_c"] == 0.0 and "n-gram" in chk["sources"]["c"]
        assert chk["draft_reevaluation_cost"] is None and e["measurement"]["draft_step"] is None
        cells = terms_row(md, e["id"])
        assert cells[1] == "0 (n-gram: no draft model)" and cells[3] == "0 (n-gram: no model re-evaluates)"
        assert cells[2].split()[0] == "1.00"  # V(1): the verification cost is still measured
    assert main(["verify", str(out / "certificate.json")]) == 0
