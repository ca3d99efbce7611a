"""A lookup draft learned from the model's own outputs, on real llama-servers: SmolLM2 answers training
prompts, llama-lookup-create (built by spectui setup from the pinned source) hashes the answers into a
static n-gram cache, and on held-out prompts ngram-cache speculation with that cache accepts more drafted
tokens than without it — with output identical to a plain server's."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tomllib

import pytest

from spectui.labs.drafts import data as drafts_data
from spectui.labs.drafts.lookup import cache_stats
from spectui.labs.drafts.train_lookup import run_pipeline
from spectui.machine import assets
from spectui.store import notebook

pytestmark = pytest.mark.server

TASKS = [
    ("sum-list", "returns the sum of a list of numbers"),
    ("max-list", "returns the largest number in a list"),
    ("min-list", "returns the smallest number in a list"),
    ("reverse-string", "reverses a string"),
    ("count-vowels", "counts the vowels in a string"),
    ("is-palindrome", "checks whether a string is a palindrome"),
    ("factorial", "returns the factorial of a number"),
    ("fibonacci", "returns the n-th Fibonacci number"),
    ("even-numbers", "returns the even numbers of a list"),
    ("average", "returns the average of a list of numbers"),
    ("is-prime", "checks whether a number is prime"),
    ("word-count", "counts the words in a sentence"),
]
HELD_OUT = 2  # the two whose content hashes lowest (labs.drafts.data.plan): is-prime and is-palindrome


@pytest.fixture
def code_prompts(tmp_path):
    path = tmp_path / "code.jsonl"  # an OpenAI chat log, one of the sources drafts data reads
    path.write_text(
        "".join(
            json.dumps({"id": pid, "messages": [{"role": "user", "content": f"Write a Python function that {what}."}]})
            + "\n"
            for pid, what in TASKS
        )
    )
    return path


def test_lookup_draft_trained_served_and_proven(tmp_path, code_prompts):
    found = assets.find_all()
    if not (found.llama_server and found.model and found.lookup_create):
        pytest.fail("llama-server, SmolLM2 or llama-lookup-create missing: run `spectui setup`")
    out = tmp_path / "lookup"
    said: list[str] = []
    # 32 tokens: each held-out prompt alone has 7-9 drafts accepted with the cache and none drafted without it,
    # and the 10 answers hash 248 2-grams from 754 tokens (measured; 64 tokens on 12 + 4 prompts showed the same)
    outcome = asyncio.run(
        run_pipeline(
            out, str(code_prompts), max_tokens=32, holdout=HELD_OUT / len(TASKS), say=said.append, advance=None
        )
    )
    # the data: the other training prompts answered (exact ids, resumable rows), HELD_OUT held out as a prompt set
    recs = drafts_data.read_records(out / "data.jsonl")
    assert len(recs) == len(TASKS) - HELD_OUT and outcome.heldout == HELD_OUT
    held = {p["id"] for p in tomllib.loads((out / "data.heldout.toml").read_text())["prompt"]}
    assert held.isdisjoint({r["primary_id"] for r in recs})
    # the cache file llama-lookup-create wrote parses, and holds the corpus's 2-grams
    stats = cache_stats(out / "lookup.bin")
    assert stats == outcome.cache and stats.ngrams > 100 and stats.observations > 500
    p = outcome.proof
    # identical: every held-out prompt, both candidates, the one verdict, token ids and bytes
    assert p.all_identical, "\n".join(
        f"{r.prompt.id}: {r.verdict.line() if r.verdict else 'no verdict'} {r.verdict.reason if r.verdict else ''}"
        for r in p.results_with + p.results_without
    )
    assert all(r.compared == "text+ids" for r in p.results_with)
    # and the static cache makes drafts the target accepts: more accepted tokens than the context alone
    assert p.with_cache.drafted > p.without_cache.drafted
    assert p.with_cache.accepted > p.without_cache.accepted
    assert p.with_cache.accepted_share > p.without_cache.accepted_share
    assert p.with_cache.tokens == p.without_cache.tokens  # same outputs, same lengths
    # the notebook gets one row per held-out prompt and candidate, marked as this lab's
    rows = outcome.notebook_rows("cpu-demo")
    assert len(rows) == 2 * HELD_OUT and {r["lookup_cache_static"] for r in rows} == {str(out / "lookup.bin"), "none"}
    where, warning = notebook.append(tmp_path / "nb.toml", rows)
    assert warning is None and len(notebook.read(where)) == 2 * HELD_OUT


def test_drafts_cost_on_the_real_gguf():
    model = assets.find_model()
    assert model is not None, "run `spectui setup`"
    r = subprocess.run(
        [sys.executable, "-m", "spectui", "drafts", "cost", "--target", str(model), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    t = doc["target"]
    assert (t["hidden"], t["layers"], t["heads"], t["kv_heads"], t["vocab"]) == (576, 30, 9, 3, 49152)
    # the tensor table's exact count equals the config.json formula for SmolLM2-135M (tests/unit)
    assert t["params"] == 134_515_008 and t["tied_embeddings"]
