"""`spectui formats` on real llama-servers, kept small: SmolLM2 in Q4_1 (the bundled file itself) and Q4_0
(made with llama-quantize from the F32 copy), one prompt, 16 tokens, 2 runs, V(k) to k = 3; a format
llama-quantize cannot make without an importance matrix is refused in one line. Figures are read, never
asserted: the test checks what was measured and kept, and that no server is left running."""

from __future__ import annotations

import json

import psutil
import pytest

from spectui.cli.main import main
from spectui.machine import assets

pytestmark = pytest.mark.server


def test_formats_makes_measures_keeps_and_refuses(tmp_path, capsys):
    found = assets.find_all()
    if not (found.llama_server and found.llama_quantize and found.model):
        pytest.fail("llama-server, llama-quantize or SmolLM2 missing: run `make test` (it runs `spectui setup`)")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    out = tmp_path / "formats.json"
    code = main(
        ["formats", "--formats", "Q4_1,Q4_0,IQ2_XXS", "--prompts", "quick", "--limit", "1", "--max-tokens", "16"]
        + ["--runs", "2", "--k-max", "3", "--repeats", "1", "-o", str(out)]
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    doc = json.loads(out.read_text(encoding="utf-8"))
    rows = {r["format"]: r for r in doc["rows"]}
    assert list(rows) == ["Q4_1", "Q4_0", "IQ2_XXS"]
    assert rows["Q4_1"]["file"] == str(found.model)  # the bundled file is its own Q4_1 copy
    q40 = rows["Q4_0"]["file"]
    assert q40 == str(assets.format_path(found.model, "Q4_0")) and rows["Q4_0"]["size_bytes"] > 0
    assert rows["Q4_0"]["size_bytes"] != rows["Q4_1"]["size_bytes"]
    for fmt in ("Q4_1", "Q4_0"):
        r = rows[fmt]
        assert r["refused"] is None and r["failed"] is None, r
        assert r["plain_tps"] > 0 and len(r["verify"]) == 3 and r["verify"][0] == 1.0
        assert "every position's logits" in r["verify_source"] or "not corrected" in r["verify_source"]
        assert sum(o["compared"] for o in r["spec"]) == 2 and r["spec"][0]["runs"] == 2
    assert rows["Q4_1"]["kernels"] == [] and rows["Q4_0"]["kernels"] == ["sgemm", "repack"]
    refused = rows["IQ2_XXS"]["refused"]
    assert refused and "\n" not in refused and "IQ2_XXS" in refused
    rec = doc["recommendation"]
    assert rec["format"] in ("Q4_1", "Q4_0") and rec["why"]
    assert f"recommendation: {rec['format']}" in printed.out and "V(2)" in printed.out
    assert main(["formats", "--show", str(out)]) == 0 and "Q4_0" in capsys.readouterr().out
    after = {p.pid for p in psutil.Process().children(recursive=True) if p.is_running()}
    assert not (after - before), "formats left a server running"
