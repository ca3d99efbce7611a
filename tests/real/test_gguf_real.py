"""machine.gguf on the bundled SmolLM2 GGUF: the KV calculator and the drafts lesson's model shape read the
same figures from it (a file read, no server; here because it needs the downloaded model)."""

from __future__ import annotations

import math

import pytest

from spectui.labs.memory.kv import kv_bytes, model_dims
from spectui.labs.memory.shape import read_shape
from spectui.machine.gguf import read_gguf_header

pytestmark = pytest.mark.server


def test_kv_and_shape_read_the_same_real_model(assets_found):
    """The bundled SmolLM2 GGUF, read once for the KV cache and once for the drafts lesson's shape."""
    dims = model_dims(assets_found.model)
    shape = read_shape(assets_found.model)
    header = read_gguf_header(assets_found.model)
    assert (dims["layers"], dims["kv_heads"], dims["head_k"]) == (shape.layers, shape.kv_heads, shape.head_dim)
    assert dims["layers"] == header.arch_value("block_count") and header.arch == dims["arch"] == shape.arch
    assert shape.params == sum(math.prod(d) for d in header.tensors.values()) > 0
    assert kv_bytes(dims, 1000) > 0
