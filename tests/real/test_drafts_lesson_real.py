"""`spectui drafts lesson` end to end on real parts, with a tiny budget (a few minutes): the lookup draft (no
torch needed) on the F32 copy — data from a real llama-server, llama-lookup-create, acceptance measured per
position, n_max chosen from it and the target's measured V(k), `spectui prove` on the held-out prompts, the
three-way table — then the same command again resumes: every phase kept, no server started."""

from __future__ import annotations

import asyncio
import json

import pytest

from spectui.labs.drafts.lesson import read_lesson
from spectui.machine import assets
from spectui.run.drafts_lesson import LessonOptions, run_lesson

# 2 min 33 s in one run, 18 min 26 s in a slower one, both at load 17–19 on 2 cores
pytestmark = [pytest.mark.server, pytest.mark.timeout(1800)]


def test_lookup_lesson_on_the_f32_copy_measures_chooses_proves_and_resumes(tmp_path):
    found = assets.find_all()
    if not (found.llama_server and found.model and found.llama_quantize):
        pytest.fail("llama-server, llama-quantize or SmolLM2 missing: run `spectui setup`")
    out = tmp_path / "lesson"
    opts = LessonOptions(
        out, "default", draft="lookup", f32=True, max_tokens=32, holdout=0.3, limit=6, probe_n_max=3, runs=2
    )
    said: list[str] = []
    les = asyncio.run(run_lesson(opts, say=said.append))

    assert [p.name for p in les.phases] == ["data", "train", "measure", "prove"]
    data = les.phase("data")
    assert data is not None and data.tokens and data.peak_mib and data.memory_of == "llama-server"
    assert all(p.seconds > 0 for p in les.phases)
    assert les.served.endswith(".F32.gguf") and les.target == str(found.model)
    # acceptance per position at the probe n_max, the cost terms measured, the choice made from them
    assert les.probe_n_max == 3 and les.per_position is not None and len(les.per_position) <= 3
    assert les.cost is not None and les.cost["verify"][0] == 1.0 and len(les.cost["verify"]) == 4
    assert les.choice is not None and 1 <= les.choice.n_max <= len(les.per_position)
    best = max(les.choice.speedups)  # the fastest length where one pays, else 1 (labs.theory.draft_length)
    assert les.choice.pays is (best > 1)
    assert les.choice.speedups[les.choice.n_max - 1] == best if les.choice.pays else les.choice.n_max == 1
    # the proof ran at that n_max, on the held-out prompts, and its verdict line is kept
    cert = json.loads((out / f"certificate-nmax{les.choice.n_max}" / "certificate.json").read_text())
    assert les.verdict == cert["derived"]["verdict"]["line"] and les.verdict.startswith("IDENTICAL on 2/2")
    spec = cert["measured_on"]["servers"]["candidate"]["speculative"] or {}
    assert spec.get("n_max") in (None, les.choice.n_max), spec  # the server says the n_max it ran with
    # the three-way table: the quantised plain rate beside the F32 rates
    tw = les.three_way
    assert tw is not None and tw.plain_quantised_tps and tw.plain_served_tps and tw.spec_served_tps
    assert "plain quantised" in les.text() and tw.quantised == found.model.name
    assert read_lesson(out) == les

    # the same command again: every phase kept from the record, nothing rerun
    said.clear()
    again = asyncio.run(run_lesson(opts, say=said.append))
    kept = [m for m in said if "kept from the last run" in m]
    assert len(kept) == 4, said
    assert again.to_json() == les.to_json()
