"""The verification-batch probe built against the pinned libllama and run on the bundled model:
its "all" decode of k tokens gives k output rows, as a verification batch does, its "last" decode one, as a
prompt batch does. No times are asserted (bench/verify_outputs.py prints them)."""

from __future__ import annotations

import asyncio

import pytest

from spectui.machine import assets, verify_probe
from tests.conftest import _need_assets

pytestmark = pytest.mark.server


def test_the_probe_outputs_every_position_in_all_mode_and_one_in_last_mode():
    _need_assets()
    binary, why = verify_probe.find_or_build()
    if binary is None:
        pytest.skip(why)
    model = assets.find_model()
    assert model is not None
    prefix = list(range(100, 140))
    got = asyncio.run(verify_probe.measure(binary, model, prefix, [1, 3, 5], repeats=2))
    for k in (1, 3, 5):
        assert got.outputs[(k, verify_probe.ALL)] == k
        assert got.outputs[(k, verify_probe.LAST)] == 1
        assert len(got.all[k]) == len(got.last[k]) == 2
        assert all(ms > 0 for ms in got.all[k] + got.last[k])
    assert sorted(got.extra()) == [1, 3, 5]


def test_the_probe_says_what_is_wrong_with_no_prefix():
    _need_assets()
    binary, why = verify_probe.find_or_build()
    if binary is None:
        pytest.skip(why)
    model = assets.find_model()
    assert model is not None
    with pytest.raises(RuntimeError, match="need a prefix of token ids"):
        asyncio.run(verify_probe.measure(binary, model, [], [1, 3], repeats=1))
