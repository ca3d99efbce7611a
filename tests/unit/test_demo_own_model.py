"""spectui demo --model PATH [--draft PATH]: a user's own GGUF; bad input is one line before any server starts."""

from __future__ import annotations

import struct

import pytest

from spectui.cli.main import main


def _s(x: str) -> bytes:
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def _model(path, n_tokens: int, tokenizer: str):
    kv = [
        _s("general.architecture") + struct.pack("<I", 8) + _s("llama"),
        _s("tokenizer.ggml.model") + struct.pack("<I", 8) + _s(tokenizer),
        _s("tokenizer.ggml.tokens")
        + struct.pack("<IIQ", 9, 8, n_tokens)
        + b"".join(_s(f"t{i}") for i in range(n_tokens)),
    ]
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)) + b"".join(kv))
    return path


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--model", "/nonexistent/m.gguf"], "--model /nonexistent/m.gguf does not exist"),
        (["--draft", "d.gguf"], "--draft goes with --model"),
    ],
)
def test_bad_paths_are_one_line(capsys, argv, said):
    assert main(["demo", "--headless", *argv]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2


def test_a_file_that_is_not_gguf_is_one_line(tmp_path, capsys):
    bad = tmp_path / "notes.gguf"
    bad.write_text("hello")
    assert main(["demo", "--headless", "--model", str(bad)]) == 2
    assert "is not a GGUF model file" in capsys.readouterr().err


def test_a_draft_of_another_vocabulary_is_refused_before_any_server(tmp_path, capsys, monkeypatch):
    from spectui.machine import assets

    started = []
    monkeypatch.setattr(assets, "ensure_llama_server", lambda **kw: started.append(1) or (None, None))
    model = _model(tmp_path / "m.gguf", 400, "llama")
    draft = _model(tmp_path / "d.gguf", 100, "gpt2")
    assert main(["demo", "--headless", "--model", str(model), "--draft", str(draft)]) == 2
    err = capsys.readouterr().err
    assert "must share its target's vocabulary" in err and "100-token" in err and "Traceback" not in err
    assert started == []  # refused before llama-server was looked for or built
