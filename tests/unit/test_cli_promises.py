"""README promises of the command line that need no server: profiles, notebook, theory, report, import, kv,
sessions and the SPECTUI_* environment variables. Expected values are written out here (hand arithmetic,
the README's words, the input files' own fields), never read back from spectui."""

from __future__ import annotations

import json
import re
import struct
import tomllib
from pathlib import Path

import pytest

from spectui.cli.main import main
from spectui.store.profiles import Hardware

GIB = 1024**3
TOOLS = Path(__file__).parent.parent / "data" / "tools"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


# -- profiles ---------------------------------------------------------------------------------------------
@pytest.fixture
def twelve_gb_nvidia(monkeypatch):
    """`spectui profiles` on a machine with one 12 GB NVIDIA GPU and 32 GB of RAM, whatever this one has."""
    import spectui.store.profiles as profiles

    hw = Hardware("nvidia", [("RTX 3060", 12 * GIB)], 32 * GIB)
    monkeypatch.setattr(profiles, "detect", lambda *a, **k: hw)
    return hw


def test_profiles_list_marks_the_most_demanding_fit_and_says_why_others_do_not(capsys, twelve_gb_nvidia):
    code, out, _ = run(capsys, "profiles", "list")
    assert code == 0
    rows = {line[2:].split()[0]: line for line in out.splitlines() if re.match(r"^[* ] [a-z]", line)}
    assert set(rows) >= {"cpu-demo", "x-gpu", "s-nvidia", "n-nvidia", "m-apple"}
    assert rows["x-gpu"].startswith("* ") and " fits " in rows["x-gpu"]  # 12 GB ≥ its 6 GB floor
    assert "* pre-selected: x-gpu" in out
    # README: "needs 24 GB of GPU memory (the full lab's floor), the largest GPU here has 12.0 GB"
    assert "does not fit" in rows["s-nvidia"] and "24 GB" in rows["s-nvidia"] and "12.0 GB" in rows["s-nvidia"]
    assert "does not fit" in rows["m-apple"]


def test_profiles_show_lists_each_variable_and_whether_it_is_set(capsys, monkeypatch, twelve_gb_nvidia):
    monkeypatch.delenv("SPECTUI_LAB_GGUF", raising=False)
    monkeypatch.setenv("SPECTUI_LAB_DRAFT_GGUF", "/somewhere/draft.gguf")
    code, out, _ = run(capsys, "profiles", "show", "x-gpu")
    assert code == 0 and out.startswith("x-gpu (track X)")
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip().startswith("SPECTUI_LAB_")}
    assert lines["SPECTUI_LAB_GGUF"].endswith("[NOT SET]") and lines["SPECTUI_LAB_DRAFT_GGUF"].endswith("[set]")
    assert "llama-draft" in out and "llama-kv" in out


def test_profiles_check_fails_where_the_machine_does_not_fit(capsys, twelve_gb_nvidia):
    code, out, _ = run(capsys, "profiles", "check", "s-nvidia")
    assert code == 1 and out.startswith("s-nvidia (track S)") and "does not fit" in out
    code, out, _ = run(capsys, "profiles", "check", "cpu-demo")  # anything fits the demo
    assert code == 0 and out.startswith("cpu-demo")


def test_profiles_check_fits_before_set_up_and_says_what_is_missing(capsys, monkeypatch, tmp_path):
    """A machine that fits the demo but has built nothing yet (an empty cache, no llama-server): check says
    the set-up to do and still exits 0, so the fast tests need nothing built."""
    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SPECTUI_LLAMA_SERVER", str(tmp_path / "nonexistent"))
    monkeypatch.setenv("PATH", str(tmp_path))
    code, out, _ = run(capsys, "profiles", "check", "cpu-demo")
    assert code == 0 and out.startswith("cpu-demo")
    assert "cannot launch draft" in out and "need set-up first" in out


def test_profiles_usage_errors_are_one_line(capsys):
    code, _, err = run(capsys, "profiles", "show", "no-such-profile")
    assert code == 2 and err.count("\n") == 1 and "no profile named 'no-such-profile'" in err
    code, _, err = run(capsys, "profiles", "check")
    assert code == 2 and "needs a profile name" in err


def test_a_user_profile_in_the_config_dir_is_listed(capsys, monkeypatch, tmp_path, twelve_gb_nvidia):
    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path))
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "mine.toml").write_text(
        'name = "my-lab"\ndescription = "my own pair"\n[[comparison]]\nid = "a"\n'
        'baseline = { backend = "llama.cpp", argv = ["x"] }\ncandidate = { backend = "llama.cpp", argv = ["x"] }\n'
    )
    code, out, _ = run(capsys, "profiles", "list")
    assert code == 0 and re.search(r"^  my-lab .*my own pair$", out, re.M)


def test_a_profile_can_set_host_and_port(tmp_path):
    """README: launched servers bind to 127.0.0.1 on free ports unless the profile sets host/port."""
    from spectui.store.profiles import parse_profile, servers_for

    text = (
        'name = "p"\n[[comparison]]\nid = "c"\n'
        'baseline = { backend = "llama.cpp", argv = ["x", "--host", "{host}", "--port", "{port}"] }\n'
        'candidate = { backend = "llama.cpp", argv = ["x", "--host", "{host}", "--port", "{port}"], '
        'host = "127.0.0.2", port = 18123 }\n'
    )
    p = parse_profile(text, "p.toml")
    base, cand = servers_for(p, p.comparison("c"))
    assert (cand.host, cand.port) == ("127.0.0.2", 18123) and cand.url == "http://127.0.0.2:18123"
    assert cand.argv[cand.argv.index("--port") + 1] == "18123" and "127.0.0.2" in cand.argv
    assert base.host == "127.0.0.1" and base.port != 18123 and base.port > 0


# -- notebook ---------------------------------------------------------------------------------------------
def test_the_default_notebook_is_in_the_data_dir(capsys, monkeypatch, tmp_path):
    """README: --notebook PATH, else SPECTUI_NOTEBOOK, else notebook.toml in the data dir."""
    monkeypatch.delenv("SPECTUI_NOTEBOOK", raising=False)
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path / "data"))
    code, out, _ = run(capsys, "notebook", "path")
    assert code == 0 and out.strip() == str(tmp_path / "data" / "notebook.toml")
    code, out, _ = run(capsys, "notebook", "path", "--notebook", str(tmp_path / "given.toml"))
    assert out.strip() == str(tmp_path / "given.toml")


def test_notebook_show_prints_each_entry(capsys, tmp_path):
    nb = tmp_path / "nb.toml"
    assert main(["import", "aiperf", str(TOOLS / "aiperf-0.13.0-llamacpp.json"), "--notebook", str(nb)]) == 0
    capsys.readouterr()
    [row] = tomllib.loads(nb.read_text())["measurement"]
    doc = json.loads((TOOLS / "aiperf-0.13.0-llamacpp.json").read_text())
    code, out, _ = run(capsys, "notebook", "show", "--notebook", str(nb))
    lines = out.splitlines()
    assert code == 0 and lines[0] == f"{nb}: 1 measurements"
    [entry] = [line for line in lines if "(aiperf)" in line]
    assert row["source_tool"] == "aiperf" and f"out {doc['output_token_throughput']['avg']:.1f} tok/s" in entry
    assert f"TTFT {doc['time_to_first_token']['avg']:.0f} ms" in entry and "0.13.0" in entry


# -- theory -----------------------------------------------------------------------------------------------
def speedup(a: float, g: int, c: float) -> float:
    return (1 - a ** (g + 1)) / ((1 - a) * (g * c + 1))


def break_even(g: int, c: float) -> float:
    lo, hi = 0.0, 1 - 1e-12  # S rises with α: bisection on S(α) = 1, by hand
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if speedup(mid, g, c) < 1 else (lo, mid)
    return lo


def test_theory_prints_the_worked_example_break_even_and_best_gamma(capsys):
    code, out, _ = run(capsys, "theory", "--alpha", "0.8", "--gamma", "4", "--cost", "0.05")
    assert code == 0
    best = max(range(1, 33), key=lambda g: speedup(0.8, g, 0.05))
    assert best == 8  # so the break-even for γ = 4 cannot be confused with the best γ's
    assert "E = (1−α^(γ+1))/(1−α) = 3.36" in out and "S = E/(γc+1) = 2.80×" in out
    assert f"break-even α per position (S = 1): {break_even(4, 0.05):.3f}" in out
    assert f"best γ for α = 0.8, c = 0.05: {best} (S = {speedup(0.8, best, 0.05):.2f}×)" in out
    code, out, _ = run(capsys, "theory", "--alpha", "0.8", "--gamma", "4", "--cost", "0.05", "--json")
    doc = json.loads(out)
    assert doc["tokens_per_step"] == pytest.approx((1 - 0.8**5) / 0.2)
    assert doc["speedup"] == pytest.approx(speedup(0.8, 4, 0.05))
    assert doc["break_even_alpha"] == pytest.approx(break_even(4, 0.05), abs=1e-6)
    assert doc["break_even_alpha"] != pytest.approx(break_even(8, 0.05), abs=1e-3)  # the given γ's, not the best's
    assert (doc["best_gamma"], doc["best_speedup"]) == (best, pytest.approx(speedup(0.8, best, 0.05)))
    assert [r["alpha"] for r in doc["table"]] == pytest.approx([k / 10 for k in range(10)])
    assert all(r["speedup"] == pytest.approx(speedup(r["alpha"], 4, 0.05)) for r in doc["table"])


def test_theory_with_a_draft_as_slow_as_the_target_has_no_break_even(capsys):
    code, out, _ = run(capsys, "theory", "--alpha", "0.5", "--gamma", "3", "--cost", "1", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["break_even_alpha"] is None  # (γ+1)/(γc+1) = 1: never pays
    assert doc["speedup"] == pytest.approx(speedup(0.5, 3, 1.0))


# -- report -----------------------------------------------------------------------------------------------
def raw(name: str) -> list[dict]:
    data = Path(__file__).parent.parent / "data" / name
    return [json.loads(x[6:]) for x in data.read_text("utf-8").splitlines() if x.startswith("data: ")]


def test_report_json_and_markdown_from_a_saved_session(capsys, tmp_path):
    from tests.recordings import write_session

    session = write_session(tmp_path / "s.jsonl")
    draft = raw("llamacpp-b11434-draft-simple-fizzbuzz.sse")[-1]["timings"]
    base = raw("llamacpp-b11434-baseline-fizzbuzz.sse")[-1]["timings"]
    code, out, _ = run(capsys, "report", str(session), "--format", "json")
    assert code == 0
    [p] = json.loads(out)["prompts"]
    assert p["identical"] is True and p["first_divergence"] is None
    c = p["candidate"]
    assert (c["drafted"], c["accepted"]) == (draft["draft_n"], draft["draft_n_accepted"])
    assert c["acceptance_rate"] == pytest.approx(draft["draft_n_accepted"] / draft["draft_n"])
    b_tps = (base["predicted_n"] - 1) / base["predicted_ms"] * 1000
    c_tps = (draft["predicted_n"] - 1) / draft["predicted_ms"] * 1000
    assert p["speedup"] == pytest.approx(c_tps / b_tps)
    out_md = tmp_path / "r.md"
    code, _, _ = run(capsys, "report", str(session), "--format", "md", "-o", str(out_md))
    md = out_md.read_text()
    pct = f"{100 * draft['draft_n_accepted'] / draft['draft_n']:.0f}%"
    row = next(line for line in md.splitlines() if line.startswith("| prompt |") and "×" in line)
    assert code == 0 and row.endswith("| identical |") and "1/1 outputs identical" in md
    # the speed-up with the acceptance rate beside it, and both rates the server timed
    assert f"| {b_tps:.1f} | {c_tps:.1f} | {c_tps / b_tps:.2f}× at {pct} (45/119) accepted |" in row
    assert "Builds: baseline b11434-pypi, candidate b11434-pypi" in md
    code, out, _ = run(capsys, "report", str(session))  # Markdown is the default, printed
    assert code == 0 and out.rstrip("\n") == md.rstrip("\n")


# -- import -----------------------------------------------------------------------------------------------
def test_import_json_prints_instead_of_appending_and_takes_the_tool_version(capsys, tmp_path, monkeypatch):
    nb = tmp_path / "nb.toml"
    monkeypatch.setenv("SPECTUI_NOTEBOOK", str(nb))
    vllm = TOOLS / "vllm-bench-0.32.0-llamacpp.json"
    code, out, _ = run(capsys, "import", "vllm-bench", str(vllm), "--tool-version", "0.32.0", "--json")
    assert code == 0 and not nb.exists()  # printed, not appended
    [m] = json.loads(out) if out.strip().startswith("[") else json.loads(out)["measurements"]
    doc = json.loads(vllm.read_text())
    assert m["source_version"] == "0.32.0" and m["output_tokens_per_s"] == pytest.approx(doc["output_throughput"])
    code, out, _ = run(capsys, "import", "vllm-bench", str(vllm), "--json")
    [m] = json.loads(out) if out.strip().startswith("[") else json.loads(out)["measurements"]
    assert m["source_version"] == "not in the file"
    assert main(["import", "vllm-bench", str(vllm)]) == 0  # without --notebook: $SPECTUI_NOTEBOOK
    assert tomllib.loads(nb.read_text())["measurement"][0]["source_tool"] == "vllm bench serve"


# -- kv ---------------------------------------------------------------------------------------------------
def gguf(path: Path, meta: dict) -> Path:
    """A GGUF v3 header with only the given metadata (ints as uint32, strings as strings) and no tensors."""

    def s(x: str) -> bytes:
        b = x.encode()
        return struct.pack("<Q", len(b)) + b

    body = b""
    for k, v in meta.items():
        body += s(k) + (struct.pack("<I", 8) + s(v) if isinstance(v, str) else struct.pack("<II", 4, v))
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(meta)) + body)
    return path


def test_kv_sizes_the_cache_from_the_models_own_header(capsys, tmp_path):
    model = gguf(
        tmp_path / "m.gguf",
        {
            "general.architecture": "llama",
            "llama.block_count": 30,
            "llama.attention.head_count": 9,
            "llama.attention.head_count_kv": 3,
            "llama.embedding_length": 576,
        },
    )
    code, out, _ = run(capsys, "kv", "--model", str(model), "--ctx", "2048")
    assert code == 0
    # 2 (K and V) × 30 layers × 2048 positions × 3 KV heads × 64 (576 / 9) × bytes per element
    f16 = 2 * 30 * 2048 * 3 * 64 * 2
    assert "30 layers, 3 KV heads × 64" in out
    assert re.search(rf"^f16 +{f16 / 2**20:.1f} MiB +0%$", out, re.M)  # 45.0 MiB, as the README says
    assert re.search(rf"^q8_0 +{f16 * 34 / 64 / 2**20:.1f} MiB +{1 - 34 / 64:.0%}$", out, re.M)
    assert re.search(rf"^q4_0 +{f16 * 18 / 64 / 2**20:.1f} MiB +{1 - 18 / 64:.0%}$", out, re.M)
    assert "not lossless" in out


def test_kv_refuses_what_is_not_a_gguf(capsys, tmp_path):
    (tmp_path / "x.gguf").write_bytes(b"nope")
    code, _, err = run(capsys, "kv", "--model", str(tmp_path / "x.gguf"))
    assert code == 2 and "is not a GGUF file" in err and err.count("\n") == 1


# -- sessions and the data dir ----------------------------------------------------------------------------
def test_sessions_lists_the_data_dirs_sessions_by_default(capsys, monkeypatch, tmp_path):
    from tests.recordings import write_session

    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path / "data"))
    folder = tmp_path / "data" / "sessions"
    folder.mkdir(parents=True)
    write_session(folder / "one.jsonl")
    code, out, _ = run(capsys, "sessions")
    [row] = [line for line in out.splitlines() if "one.jsonl" in line]
    # the date, the prompt, the verdict, the speed-up with its acceptance rate (from the recorded streams:
    # 22.2 / 80.3 server-timed tok/s, 45 of 119 drafts)
    assert code == 0 and re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d +one\.jsonl +prompt +1 prompt +identical ", row)
    assert "0.28× at 38% accepted" in row
    code, out, _ = run(capsys, "sessions", str(tmp_path / "empty"))
    assert "one.jsonl" not in out


def test_the_cache_dir_comes_from_spectui_cache_dir(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("SPECTUI_LLAMA_SERVER", "SPECTUI_MODEL", "SPECTUI_DRAFT_MODEL"):
        monkeypatch.setenv(var, str(tmp_path / "missing"))
    code, out, _ = run(capsys, "doctor", "--json")
    assert code == 0 and json.loads(out)["cache_dir"] == str(tmp_path / "cache")
