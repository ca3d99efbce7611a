"""The draft the candidate runs (machine.drafter.candidate_draft): named, launched, or named by /props; never a
default of another vocabulary, and one line saying how to name it where none can be had."""

from __future__ import annotations

import struct

import pytest

from spectui.backends.launchspec import LaunchSpec
from spectui.core.errors import InputError
from spectui.core.types import ServerInfo
from spectui.machine.drafter import VOCAB_SIZE_SLACK, candidate_draft, check_same_vocabulary


def _s(x: str) -> bytes:
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def _model(path, n_tokens: int, tokenizer: str = "gpt2", pre: str = "smollm"):
    """A GGUF v3 header with a tokenizer: its model, pre-tokenizer and a token list of n_tokens strings."""
    kv = [
        _s("general.architecture") + struct.pack("<I", 8) + _s("llama"),
        _s("tokenizer.ggml.model") + struct.pack("<I", 8) + _s(tokenizer),
        _s("tokenizer.ggml.pre") + struct.pack("<I", 8) + _s(pre),
        _s("tokenizer.ggml.tokens")
        + struct.pack("<IIQ", 9, 8, n_tokens)
        + b"".join(_s(f"t{i}") for i in range(n_tokens)),
    ]
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)) + b"".join(kv))
    return path


FREE_URL = "http://127.0.0.1:9"  # nothing listens on the discard port here


def test_the_named_draft_is_used_and_checked_against_the_launched_target(tmp_path):
    target = _model(tmp_path / "t.gguf", 300)
    draft = _model(tmp_path / "d.gguf", 300)
    spec = LaunchSpec.from_argv(["llama-server", "-m", str(target)])
    got = candidate_draft(str(draft), spec, FREE_URL)
    assert (got.path, got.which, got.target) == (draft, "named with --draft-model", target)


def test_the_launched_command_line_gives_the_draft(tmp_path):
    target = _model(tmp_path / "t.gguf", 300)
    draft = _model(tmp_path / "d.gguf", 300)
    spec = LaunchSpec.from_argv(["llama-server", "-m", str(target), "-md", str(draft)])
    got = candidate_draft(None, spec, FREE_URL)
    assert got.path == draft and "spectui launched it" in got.which


def test_props_names_a_draft_found_beside_its_target(tmp_path):
    target = _model(tmp_path / "t.gguf", 300)
    draft = _model(tmp_path / "d.gguf", 300)
    info = ServerInfo(FREE_URL, model_path=str(target), speculative={"draft_model": "d.gguf"})
    got = candidate_draft(None, None, FREE_URL, info)
    assert got.path == draft and "/props" in got.which


@pytest.mark.parametrize("props", [{}, {"draft_model": "elsewhere.gguf"}])
def test_no_draft_to_be_had_is_one_line_saying_how_to_name_it(tmp_path, props):
    info = ServerInfo(FREE_URL, speculative=props)
    with pytest.raises(InputError) as err:
        candidate_draft(None, None, FREE_URL, info)
    assert "\n" not in str(err.value) and "--draft-model" in (err.value.hint or "")
    assert ("elsewhere.gguf" in str(err.value)) == bool(props)


def test_a_draft_of_another_vocabulary_is_refused_in_one_line(tmp_path):
    target = _model(tmp_path / "gemma.gguf", 2000, "llama", "default")
    draft = _model(tmp_path / "smol.gguf", 300)
    spec = LaunchSpec.from_argv(["llama-server", "-m", str(target)])
    with pytest.raises(InputError) as err:
        candidate_draft(str(draft), spec, FREE_URL)
    text = str(err.value)
    assert "300-token" in text and "2000" in text and "\n" not in text


def test_sizes_within_llama_cpps_slack_pass_and_beyond_it_fail(tmp_path):
    target = _model(tmp_path / "t.gguf", 300)
    near = _model(tmp_path / "near.gguf", 300 + VOCAB_SIZE_SLACK)
    far = _model(tmp_path / "far.gguf", 300 + VOCAB_SIZE_SLACK + 1)
    check_same_vocabulary(near, target)
    with pytest.raises(InputError):
        check_same_vocabulary(far, target)


def test_a_draft_that_is_not_a_file_is_one_line(tmp_path):
    spec = LaunchSpec.from_argv(["llama-server", "-md", str(tmp_path / "gone.gguf")])
    with pytest.raises(InputError) as err:
        candidate_draft(None, spec, FREE_URL)
    assert "gone.gguf" in str(err.value)
