"""machine.gguf, the one model-header reader (tests/real/test_gguf_real.py reads the bundled model): a count that is not a positive whole number (or a damaged header) is one line naming
the file and the key, never a traceback or a silently negative size."""

from __future__ import annotations

import json
import struct

import pytest

from spectui.core.errors import InputError
from spectui.labs.memory.kv import hf_model_dims, model_dims
from spectui.machine.gguf import read_config_json


def _s(x: str) -> bytes:
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def _gguf(path, kv: dict):
    """A GGUF v3 header of key/values only: str, int (int32), float (float32) and bool values."""
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv))
    for k, v in kv.items():
        out += _s(k)
        if isinstance(v, str):
            out += struct.pack("<I", 8) + _s(v)
        elif isinstance(v, bool):
            out += struct.pack("<I?", 7, v)
        elif isinstance(v, float):
            out += struct.pack("<If", 6, v)
        else:
            out += struct.pack("<Ii", 5, v)
    path.write_bytes(out)
    return path


GOOD = {
    "general.architecture": "llama",
    "llama.block_count": 2,
    "llama.attention.head_count": 4,
    "llama.attention.head_count_kv": 2,
    "llama.embedding_length": 64,
    "llama.context_length": 2048,
}


def test_a_small_header_gives_its_dimensions(tmp_path):
    dims = model_dims(_gguf(tmp_path / "m.gguf", GOOD))
    assert dims == {"arch": "llama", "layers": 2, "kv_heads": 2, "head_k": 16, "head_v": 16, "context_trained": 2048}


@pytest.mark.parametrize(
    "key,value",
    [
        ("llama.block_count", -2),
        ("llama.block_count", 2.5),
        ("llama.block_count", "two"),
        ("llama.attention.head_count_kv", True),
    ],
)
def test_a_count_that_is_not_a_positive_whole_number_is_one_line_naming_file_and_key(tmp_path, key, value):
    path = _gguf(tmp_path / "bad.gguf", {**GOOD, key: value})
    with pytest.raises(InputError) as exc:
        model_dims(path)
    line = exc.value.one_line()
    assert str(path) in line and key in line and "\n" not in line


def test_a_cut_header_is_one_line(tmp_path):
    whole = _gguf(tmp_path / "m.gguf", GOOD).read_bytes()
    (tmp_path / "cut.gguf").write_bytes(whole[: len(whole) - 3])
    with pytest.raises(InputError, match="damaged or truncated"):
        model_dims(tmp_path / "cut.gguf")


def test_config_json_counts_are_checked_and_text_config_is_read(tmp_path):
    cfg = {"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 256}
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "wrapper", "text_config": cfg}))
    path, merged = read_config_json(tmp_path)
    assert path == tmp_path / "config.json" and merged["num_hidden_layers"] == 4
    assert hf_model_dims(tmp_path)["head_k"] == 32
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "num_key_value_heads": -1}))
    with pytest.raises(InputError, match="num_key_value_heads is -1"):
        hf_model_dims(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": "four"}))
    with pytest.raises(InputError, match="num_hidden_layers"):
        hf_model_dims(tmp_path)
