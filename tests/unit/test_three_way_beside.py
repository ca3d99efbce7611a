"""The three-way table is measured after `spectui prove` has written its certificate (run.three_way): where
that extra measurement fails (the quantised server does not come up, a request fails), prove says so in one
line and still prints the certificate and exits by its verdict."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from spectui.cli import prove as cli_prove
from spectui.core.errors import SetupError
from spectui.run import three_way


def test_a_failed_three_way_measurement_is_one_line_and_no_table(monkeypatch, capsys, tmp_path):
    async def fails(*args, **kwargs):
        raise SetupError("llama-server exited before /health answered", hint="see its log")

    monkeypatch.setattr(three_way, "beside", fails)
    prover = SimpleNamespace(baseline=object())
    args = SimpleNamespace(json=False, runs=1)
    got = asyncio.run(cli_prove._three_way({}, prover, [], None, args, Path(tmp_path), True))
    assert got is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "three-way table was not measured" in err[0]
    assert "llama-server exited before /health answered" in err[0] and "certificate stands" in err[0]
