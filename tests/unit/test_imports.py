"""`spectui import`: real result files of vllm bench serve, AIPerf and guidellm (tests/data/tools/README.md
says how each was made) into the notebook, each value checked against the file itself."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from spectui.cli.main import main
from spectui.core.errors import InputError
from spectui.store import imports

TOOLS = Path(__file__).parent.parent / "data" / "tools"
VLLM = TOOLS / "vllm-bench-0.32.0-llamacpp.json"
VLLM_SPEC = TOOLS / "vllm-bench-0.32.0-vllm-ngram.json"
AIPERF = TOOLS / "aiperf-0.13.0-llamacpp.json"
GUIDELLM = TOOLS / "guidellm-0.8.1-llamacpp.json"


def load(p):
    return json.loads(p.read_text())


def test_vllm_bench():
    doc = load(VLLM)
    [m] = imports.read("vllm-bench", VLLM, "0.32.0")
    assert m["source_tool"] == "vllm bench serve" and m["source_version"] == "0.32.0"
    assert m["output_tokens_per_s"] == pytest.approx(doc["output_throughput"])
    assert m["ttft_ms_median"] == pytest.approx(doc["median_ttft_ms"])
    assert m["itl_ms_p99"] == pytest.approx(doc["p99_itl_ms"])
    assert m["requests_completed"] == doc["completed"] and m["requests_failed"] == doc["failed"]
    # unmapped scalars under the tool's own key; per-request arrays stay in the file
    assert m["vllm_bench"]["total_input_tokens"] == doc["total_input_tokens"]
    assert "latencies" not in m["vllm_bench"]
    assert imports.read("vllm-bench", VLLM)[0]["source_version"] == "not in the file"


def test_vllm_bench_against_a_speculating_vllm_carries_acceptance():
    doc = load(VLLM_SPEC)
    [m] = imports.read("vllm-bench", VLLM_SPEC)
    assert doc["spec_decode_draft_tokens"] > 0
    assert m["acceptance_rate"] == pytest.approx(doc["spec_decode_accepted_tokens"] / doc["spec_decode_draft_tokens"])
    assert m["drafted"] == doc["spec_decode_draft_tokens"] and m["accepted"] == doc["spec_decode_accepted_tokens"]
    assert m["mean_accepted_length"] == pytest.approx(
        1 + doc["spec_decode_accepted_tokens"] / doc["spec_decode_num_drafts"]
    )


def test_aiperf():
    doc = load(AIPERF)
    [m] = imports.read("aiperf", AIPERF)
    assert m["source_tool"] == "aiperf" and m["source_version"] == doc["aiperf_version"] == "0.13.0"
    assert m["output_tokens_per_s"] == pytest.approx(doc["output_token_throughput"]["avg"])
    assert m["ttft_ms_p99"] == pytest.approx(doc["time_to_first_token"]["p99"])
    assert m["itl_ms_median"] == pytest.approx(doc["inter_token_latency"]["p50"])
    assert m["model"] == "SmolLM2"
    assert m["aiperf"]["time_to_second_token_avg"] == pytest.approx(doc["time_to_second_token"]["avg"])


def test_guidellm():
    doc = load(GUIDELLM)
    rows = imports.read("guidellm", GUIDELLM)
    assert len(rows) == len(doc["benchmarks"])
    m, bench = rows[0], doc["benchmarks"][0]["metrics"]
    assert m["source_version"] == doc["metadata"]["guidellm_version"] == "0.8.1"
    assert m["strategy"] == "synchronous"
    assert m["ttft_ms_median"] == pytest.approx(bench["time_to_first_token_ms"]["successful"]["median"])
    assert m["itl_ms_p99"] == pytest.approx(bench["inter_token_latency_ms"]["successful"]["percentiles"]["p99"])
    assert m["guidellm"]["requests_successful"] == bench["request_totals"]["successful"] == 4
    assert m["guidellm"]["prompt_tokens_per_second_mean"] == pytest.approx(
        bench["prompt_tokens_per_second"]["successful"]["mean"]
    )


@pytest.mark.parametrize(
    "tool,path,said",
    [("aiperf", GUIDELLM, "looks like a guidellm result"), ("guidellm", VLLM, "looks like a vllm-bench result")],
)
def test_a_file_of_another_tool_is_one_clear_error(tool, path, said):
    with pytest.raises(InputError, match=said):
        imports.read(tool, path)


def test_bad_files(tmp_path):
    (tmp_path / "x.json").write_text('{"hello": 1}')
    with pytest.raises(InputError, match="not a result file spectui knows"):
        imports.read("aiperf", tmp_path / "x.json")
    (tmp_path / "y.json").write_text("{not json")
    with pytest.raises(InputError, match="is not JSON"):
        imports.read("aiperf", tmp_path / "y.json")
    with pytest.raises(InputError, match="does not exist"):
        imports.read("aiperf", tmp_path / "none.json")


def test_cli_appends_each_tool_to_one_notebook(tmp_path, capsys):
    nb = tmp_path / "nb.toml"
    for tool, path in (("vllm-bench", VLLM), ("aiperf", AIPERF), ("guidellm", GUIDELLM)):
        assert main(["import", tool, str(path), "--notebook", str(nb)]) == 0
    assert main(["import", "aiperf", str(GUIDELLM), "--notebook", str(nb)]) == 2
    err = capsys.readouterr().err
    assert err.count("appended 1 ") == 3 and "looks like a guidellm result" in err
    rows = tomllib.loads(nb.read_text())["measurement"]
    assert [r["source_tool"] for r in rows] == ["vllm bench serve", "aiperf", "guidellm"]
    assert all(r["kind"] == "import" for r in rows)
