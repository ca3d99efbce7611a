"""backends.launchspec's argv readers, the one place a server's command line is read: a flag's value in
both spellings with the last one winning (as the engines' own parsers do), and what each engine's argv asks
of the GPU (the memory plan's input)."""

from __future__ import annotations

from spectui.backends.launchspec import engine_args, flag_value, has_flag, without_flags
from spectui.machine.launcher import MemoryShare, apply_memory_share


def test_flag_value_reads_both_spellings_and_the_last_one_wins():
    argv = ["llama-server", "-c", "512", "--ctx-size=4096", "-m", "a.gguf", "--spec-type"]
    assert flag_value(argv, "-c", "--ctx-size") == "4096"
    assert flag_value(argv, "-m", "--model") == "a.gguf"
    assert flag_value(argv, "--spec-type") is None and has_flag(argv, "--spec-type")  # given, without a value
    assert flag_value(argv, "-np") is None and not has_flag(argv, "-np") and flag_value(None, "-m") is None


def test_without_flags_takes_out_each_spelling_with_its_value():
    argv = [
        "vllm",
        "serve",
        "m",
        "--gpu-memory-utilization",
        "0.9",
        "--max-model-len=8k",
        "--gpu-memory-utilization=0.5",
    ]
    assert without_flags(argv, {"--gpu-memory-utilization"}) == ["vllm", "serve", "m", "--max-model-len=8k"]
    share = MemoryShare(10.0, 0.5, gpu_layers=31, ctx=2048)
    out = apply_memory_share(
        ["llama-server", "--n-gpu-layers", "99", "--ctx-size=512", "-fa", "on"], "llama.cpp", share
    )
    assert out == ["llama-server", "-fa", "on", "-ngl", "31", "-c", "2048"]


def test_engine_args_for_each_engine():
    ll = engine_args(
        "llama.cpp", ["s", "-m", "{model}", "-md", "d.gguf", "-c", "4096", "-ctk", "q8_0", "-ctvd", "q4_0"]
    )
    assert (ll.target, ll.draft, ll.ctx, ll.kv_k, ll.kv_v, ll.kv_draft) == (
        "{model}",
        "d.gguf",
        4096,
        "q8_0",
        "f16",
        ("f16", "q4_0"),
    )
    spec = '{"method": "eagle3", "model": "{head}", "num_speculative_tokens": 3}'
    v = engine_args("vllm", ["vllm", "serve", "{target}", "--max-model-len", "8k", "--speculative-config", spec])
    assert (v.target, v.draft, v.draft_kind, v.algorithm, v.ctx) == ("{target}", "{head}", "eagle head", "eagle3", 8000)
    sg = engine_args(
        "sglang", ["python", "--model-path", "t", "--speculative-algorithm", "eagle", "--kv-cache-dtype=fp8"]
    )
    assert (sg.target, sg.algorithm, sg.draft_kind, sg.kv_k, sg.kv_draft) == (
        "t",
        "EAGLE",
        "eagle head",
        "fp8",
        ("fp8", "fp8"),
    )
    assert engine_args("openai", ["anything", "--model", "x"]).target is None  # spectui neither launches nor sizes it
