"""draft-mtp, draft-dflash and draft-dspark on recorded streams: no model for them exists here, so a real
llama-server b11434 stream (draft-simple, tests/data) carries each type's name in its final event's
`speculative.types`, the one field by which llama-server tells them apart (tools/server/server-task.cpp:140).
The label, the theory's cost terms and the speculation profile name each."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from spectui.backends.labeller import LlamaCppLabeller
from spectui.backends.llamacpp import LlamaCppBackend
from spectui.backends.recorded import load_payloads
from spectui.core.events import StepEvent, StreamFinished
from spectui.core.types import ServerInfo
from spectui.labs.theory.curve import OTHER, drafting_kind, other_words
from spectui.store import spec_profile

DATA = Path(__file__).parent.parent / "data"


def recorded(types: str) -> list[dict]:
    events = load_payloads(DATA / "llamacpp-b11434-draft-simple-fizzbuzz.sse")
    final = events[-1]
    assert final["generation_settings"]["speculative.types"] == "none,draft-simple"  # as recorded
    events[-1] = dict(final, generation_settings=dict(final["generation_settings"], **{"speculative.types": types}))
    return events


@pytest.mark.parametrize("kind", ["draft-mtp", "draft-dflash", "draft-dspark"])
def test_each_head_drafter_is_named_in_the_label_the_theory_and_the_profile(kind):
    lab = LlamaCppLabeller()
    out = [ev for i, obj in enumerate(recorded(f"none,{kind}")) for ev in lab.feed(obj, i)]
    steps = [e for e in out if isinstance(e, StepEvent)]
    fin = out[-1]
    assert isinstance(fin, StreamFinished) and lab.drafted == 119 and lab.accepted == 45  # the recording's own
    backend = LlamaCppBackend("http://127.0.0.1:1", client=None)  # type: ignore[arg-type]
    backend.info = ServerInfo("http://127.0.0.1:1", speculative={"type": "none"})
    backend._learn_settings(fin.settings)
    assert f"spec {kind}" in backend.info.describe_speedup()
    # the theory: a drafter inside the target, not a model spectui can time; what it needs is named
    assert drafting_kind(fin.settings["speculative.types"]) == OTHER
    words = other_words(fin.settings["speculative.types"])
    assert words is not None and words.startswith(f"{kind} drafts with") and "needs" in words
    # the profile carries the method as llama.cpp named it
    result = SimpleNamespace(candidate=SimpleNamespace(finished=fin, steps=steps))
    prof = spec_profile.from_results([result])
    assert prof is not None and prof["method"] == kind
    assert sum(int(v) for v in prof["acceptance_length_histogram"].values()) == len(steps)
    assert prof["mean_accept_length"] == pytest.approx(1 + 45 / len(steps), abs=1e-6)


def test_a_draft_simple_chain_keeps_its_cost_terms_and_names_no_head():
    assert other_words("none,draft-simple") is None and other_words("none,ngram-mod") is None


def _headline_of(types: str):
    import asyncio

    from spectui.backends.recorded import ReplayBackend
    from spectui.core.headline import headline_for
    from spectui.core.runner import run_prompts
    from spectui.core.types import GenerationParams
    from spectui.store import prompts

    base = load_payloads(DATA / "llamacpp-b11434-baseline-fizzbuzz.sse")
    cand = load_payloads(DATA / "llamacpp-b11434-baseline-fizzbuzz.sse")
    final = cand[-1]
    cand[-1] = dict(final, generation_settings=dict(final["generation_settings"], **{"speculative.types": types}))
    info = ServerInfo("http://127.0.0.1:8081", build="b11434", model="m.gguf")
    b = ReplayBackend("replay://b", base, info, virtual_ms_per_event=12.5)
    c = ReplayBackend("replay://c", cand, info, virtual_ms_per_event=10.0)
    results = asyncio.run(run_prompts(b, c, [prompts.single("fizzbuzz")], GenerationParams(max_tokens=64)))
    return headline_for(results)


def test_a_speed_up_from_a_speculating_run_that_drafted_nothing_is_marked():
    # ngram-map-k4v alone drafted nothing on these prompts here: its figure is no speed-up of speculation
    h = _headline_of("none,ngram-map-k4v")
    assert "the candidate drafted nothing: not a speed-up of speculation" in h.faster_text
    plain = _headline_of("none")  # a candidate that does not speculate: nothing to mark
    assert "drafted nothing" not in plain.faster_text
