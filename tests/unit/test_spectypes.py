"""llama.cpp's speculation types and chains (backends.spectypes): each named in the label as a request's final
event reports it, which keep state between requests, a draft model that nothing uses."""

from __future__ import annotations

import pytest

from spectui.backends import spectypes as st
from spectui.backends.labeller import LlamaCppLabeller
from spectui.backends.llamacpp import LlamaCppBackend
from spectui.core.types import ServerInfo

ALL = (
    "draft-simple",
    "draft-eagle3",
    "draft-mtp",
    "draft-dflash",
    "draft-dspark",
    "ngram-simple",
    "ngram-map-k",
    "ngram-map-k4v",
    "ngram-mod",
    "ngram-cache",
)


def test_every_type_llama_cpp_ships_is_in_the_table_with_how_its_state_was_decided():
    assert tuple(st.SPEC_TYPES) == ALL
    for t in st.SPEC_TYPES.values():
        assert t.state in ("none", "per slot", "across requests")
        assert ".cpp:" in t.how  # a source line, never a guess
        assert t.needs and t.servers


def test_stateful_types_are_the_ones_the_source_says():
    assert [t.name for t in st.SPEC_TYPES.values() if t.state == "across requests"] == ["ngram-mod"]
    assert {t.name for t in st.SPEC_TYPES.values() if t.stateful} == {
        "ngram-mod",
        "ngram-cache",
        "ngram-map-k",
        "ngram-map-k4v",
    }
    assert not st.keeps_state(("draft-simple", "ngram-simple"))
    assert st.keeps_state(("ngram-simple", "ngram-mod"))  # a chain keeps state when any of its types does


def test_chains_from_the_final_event_and_from_argv():
    assert st.chain_of("none,ngram-mod,ngram-map-k4v") == ("ngram-mod", "ngram-map-k4v")
    assert st.chain_of("none") == () and st.chain_of(None) == ()
    # repeated --spec-type flags append (common/arg.cpp); --spec-default is ngram-mod
    argv = ["llama-server", "--spec-type", "ngram-simple", "--spec-type=draft-mtp,ngram-cache", "--spec-default"]
    assert st.chain_from_argv(argv) == ("ngram-simple", "draft-mtp", "ngram-cache", "ngram-mod")
    assert st.chain_from_argv(["llama-server", "--spec-default"]) == ("ngram-mod",)


@pytest.mark.parametrize(
    "types", [*ALL, "ngram-mod,ngram-map-k4v", "draft-simple,ngram-mod", "ngram-simple,ngram-cache"]
)
def test_the_label_names_each_type_of_the_chain_the_final_event_reports(types):
    backend = LlamaCppBackend("http://127.0.0.1:1", client=None)  # type: ignore[arg-type]
    backend.info = ServerInfo("http://127.0.0.1:1", speculative={"type": "none"})
    lab = LlamaCppLabeller()
    final = {
        "content": "",
        "stop": True,
        "tokens_evaluated": 5,
        "generation_settings": {"speculative.types": f"none,{types}", "speculative.n_max": 16},
        "timings": {},
    }
    fin = lab.feed(final, 1)[-1]
    backend._learn_settings(fin.settings)
    label = backend.info.describe_speedup()
    for t in types.split(","):
        assert t in label
    stateful = st.state_note(st.chain_of(types))
    assert (stateful in label) if stateful else ("stateful" not in label)


def test_state_note_says_how_far_state_reaches():
    assert st.state_note(("ngram-mod",)) == "stateful: ngram-mod keeps state across requests"
    assert st.state_note(("ngram-cache",)) == "stateful: ngram-cache per slot"
    assert st.state_note(("draft-simple",)) is None


def test_a_draft_model_nothing_uses_is_said_in_one_line():
    line = st.draft_model_unused(["llama-server", "-m", "t.gguf", "-md", "/x/d.gguf"])
    assert line is not None and "d.gguf" in line and "drafts nothing" in line and "\n" not in line
    assert "--spec-type draft-simple" in line
    assert st.draft_model_unused(["llama-server", "-md", "d.gguf", "--spec-type", "ngram-mod"]) is not None
    assert st.draft_model_unused(["llama-server", "-md", "d.gguf", "--spec-type", "draft-simple"]) is None
    assert st.draft_model_unused(["llama-server", "-md", "d.gguf", "--spec-type", "draft-dflash"]) is None
    assert st.draft_model_unused(["llama-server", "--spec-type", "ngram-mod"]) is None
