"""spectui drafts cost: parameter counts worked out by hand for each method, against published figures
where there are some, the shape readers (GGUF header, config.json), memory and time arithmetic, the CLI."""

from __future__ import annotations

import json
import struct
import subprocess
import sys

import pytest

from spectui.core.errors import InputError
from spectui.labs.drafts import cost as drafts
from spectui.labs.memory.shape import llama_params, read_shape

LLAMA31_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
LLAMA2_7B = {**LLAMA31_8B, "intermediate_size": 11008, "num_key_value_heads": 32, "vocab_size": 32000}
LLAMA2_70B = {
    **LLAMA31_8B,
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_attention_heads": 64,
    "num_hidden_layers": 80,
    "vocab_size": 32000,
}
SMOLLM2_135M = {  # SmolLM2-135M-Instruct's config.json values (the same shape as the GGUF spectui setup fetches)
    "model_type": "llama",
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_attention_heads": 9,
    "num_hidden_layers": 30,
    "num_key_value_heads": 3,
    "vocab_size": 49152,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}


def shape_of(tmp_path, cfg: dict, name: str = "m"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    return read_shape(folder)


def test_target_params_from_config(tmp_path):
    # Llama-3.1-8B by hand: embeddings 128256·4096 = 525,336,576 (and as much again for the untied head);
    # a layer: q 4096·4096 + k,v 2·4096·1024 + o 4096·4096 = 41,943,040, MLP 3·4096·14336 = 176,160,768,
    # norms 2·4096 → 218,112,000 × 32 = 6,979,584,000; final norm 4096
    s = shape_of(tmp_path, LLAMA31_8B)
    assert s.params == 2 * 525_336_576 + 32 * 218_112_000 + 4096 == 8_030_261_248
    # SmolLM2-135M, tied: 49152·576 + 30·(331,776 + 221,184 + 331,776 + 2,654,208 + 1,152) + 576; the GGUF's
    # tensor table holds exactly as many (134,515,008: spectui drafts cost on the cached GGUF)
    assert shape_of(tmp_path, SMOLLM2_135M, "smol").params == 134_515_008


def test_eagle1_matches_the_published_sizes(tmp_path):
    """EAGLE README: 0.24B trainable parameters for a 7B target, 0.99B for 70B."""
    inp = drafts.CostInputs()
    # 7B: attention 4·4096² = 67,108,864; MLP 3·4096·11008 = 135,266,304; post-attention norm 4096;
    # fc 2·4096² + 4096 = 33,558,528
    m7 = drafts.eagle1(shape_of(tmp_path, LLAMA2_7B, "7b"), inp)
    assert m7.trainable_params == 67_108_864 + 135_266_304 + 4096 + 33_558_528 == 235_937_792
    assert abs(m7.trainable_params / 0.24e9 - 1) < 0.02
    # 70B (GQA, 8 KV heads): attention 2·8192² + 2·8192·1024 = 150,994,944; MLP 3·8192·28672 = 704,643,072
    m70 = drafts.eagle1(shape_of(tmp_path, LLAMA2_70B, "70b"), inp)
    assert m70.trainable_params == 150_994_944 + 704_643_072 + 8192 + (2 * 8192 * 8192 + 8192) == 989_872_128
    assert abs(m70.trainable_params / 0.99e9 - 1) < 0.01


# SpecForge's llama3_eagle.py built from its configs/llama3-8B-eagle3.json: fc 3·4096·4096 = 50,331,648;
# q 8192·4096 = 33,554,432, k and v 8192·1024 each = 16,777,216, o 4096·4096 = 16,777,216; MLP 176,160,768;
# hidden_norm, input_layernorm, post_attention_layernorm, norm 4·4096; lm_head 4096·32000 = 131,072,000
SPECFORGE_EAGLE3_8B = 50_331_648 + 33_554_432 + 16_777_216 + 16_777_216 + 176_160_768 + 16_384 + 131_072_000
# counted by the trainer's own code: speculators 0.9.0's Eagle3DraftModel built for this config (one layer,
# draft vocabulary 32000) on the meta device, parameters with requires_grad summed — 293,617,664 trainable of
# 1,081,102,336 (its draft LM head is copied from the target and frozen); counted once, outside the tests
SPECULATORS_EAGLE3_8B_TRAINABLE = 293_617_664
SPECULATORS_EAGLE3_8B_ALL = 1_081_102_336


def test_eagle3_on_the_8b_shape(tmp_path):
    s = shape_of(tmp_path, LLAMA31_8B)
    inp = drafts.CostInputs()
    sf = drafts.eagle3(s, inp, "specforge")
    assert sf.trainable_params == SPECFORGE_EAGLE3_8B == 424_689_664
    assert abs(sf.trainable_params / SPECFORGE_EAGLE3_8B - 1) < 0.05
    sp = drafts.eagle3(s, inp, "speculators")
    assert abs(sp.trainable_params / SPECULATORS_EAGLE3_8B_TRAINABLE - 1) < 0.05
    assert sp.trainable_params == sf.trainable_params - 4096 * 32000
    assert sp.trainable_params + sum(p.value for p in sp.frozen) == SPECULATORS_EAGLE3_8B_ALL
    # the frozen parts speculators holds: embeddings V·h, its LM head h·Vd, verifier LM head h·Vd + norm h
    assert sum(p.value for p in sp.frozen) == 128256 * 4096 + 4096 * 32000 + 4096 * 32000 + 4096
    # offline hidden states: 4 layers × h × 2 B a token, speculators' own estimate (train.md: 268 MB a sample
    # of 8192 tokens for Llama-3.1-8B)
    assert sf.disk_per_token.value == 4 * 4096 * 2
    assert round(sf.disk_per_token.value * 8192 / 1e6) == 268


def test_eagle3_draft_vocab_never_exceeds_the_target_vocab(tmp_path):
    s = shape_of(tmp_path, {**SMOLLM2_135M, "vocab_size": 20000}, "tiny")
    m = drafts.eagle3(s, drafts.CostInputs(draft_vocab=32000), "specforge")
    head = next(p for p in m.trainable if p.name.startswith("LM head"))
    assert head.value == 576 * 20000


def test_medusa_by_hand(tmp_path):
    s = shape_of(tmp_path, LLAMA2_7B)
    m = drafts.medusa(s, drafts.CostInputs(medusa_heads=5, medusa_layers=1))
    # 5 heads × (4096² + 4096 + 4096·32000) = 5 × 147,853,312
    assert m.trainable_params == 5 * (4096 * 4096 + 4096 + 4096 * 32000) == 739_266_560
    m2 = drafts.medusa(s, drafts.CostInputs(medusa_heads=3, medusa_layers=2))
    assert m2.trainable_params == 3 * (2 * (4096 * 4096 + 4096) + 4096 * 32000)
    assert m.target_online


def test_draft_model_needs_no_training_unless_one_is_given(tmp_path):
    target = shape_of(tmp_path, LLAMA31_8B)
    none = drafts.draft_model(target, drafts.CostInputs(), None)
    assert none.trainable_params == 0 and none.notes
    small = shape_of(tmp_path, SMOLLM2_135M, "small")
    m = drafts.draft_model(target, drafts.CostInputs(), small)
    assert m.trainable_params == 134_515_008


def test_training_memory_adds_up(tmp_path):
    s = shape_of(tmp_path, LLAMA31_8B)
    inp = drafts.CostInputs(seq_len=1024, batch=2)
    m = drafts.eagle3(s, inp, "specforge")
    t = m.trainable_params
    by_name = {p.name: p.value for p in m.memory}
    assert by_name["frozen target (online)"] == s.params * 2
    assert (
        by_name["trainable weights (bf16)"] + by_name["gradients (bf16)"] + by_name["Adam: fp32 master + m + v"]
        == 16 * t
    )
    assert by_name["frozen draft parts (bf16)"] == 128256 * 4096 * 2
    # 34·s·b·h bytes a layer, × 3 test-time-training steps
    layer = next(v for k, v in by_name.items() if "decoder layer" in k)
    assert layer == 34 * 1024 * 2 * 4096 * 3
    assert m.memory_bytes == sum(by_name.values())
    fp32 = drafts.eagle3(s, drafts.CostInputs(target_bytes=4), "specforge")
    assert {p.name: p.value for p in fp32.memory}["frozen target (online)"] == s.params * 4


def test_time_from_a_measured_prompt_rate_and_from_a_gpu(tmp_path):
    s = shape_of(tmp_path, LLAMA31_8B)
    inp = drafts.CostInputs(
        samples=100, tokens_per_sample=1000, prompt_tps=500.0, prompt_tps_source="test", gpu="h100-sxm", gpus=2
    )
    m = drafts.eagle3(s, inp, "specforge")
    drafts.add_time(m, s, inp)
    t = {p.name: p.value for p in m.time}
    assert t["target forward over the data, this machine"] == pytest.approx(100_000 / 500.0)
    rate = 989e12 * 0.4 * 2
    assert t["target forward, 2× h100-sxm"] == pytest.approx(2 * s.params * 100_000 / rate)
    flops = sum(p.value for p in m.flops_per_token)
    assert t["draft training, 2× h100-sxm"] == pytest.approx(flops * 100_000 / rate)
    # the lower bound on this machine: the draft's training FLOPs at the FLOP rate its prefill showed
    assert t["draft training at that FLOP rate (a lower bound)"] == pytest.approx(
        flops * 100_000 / (500.0 * 2 * s.params)
    )
    # Medusa trains online: the target runs again every epoch
    med = drafts.medusa(s, drafts.CostInputs(samples=100, tokens_per_sample=1000, epochs=3, prompt_tps=500.0))
    drafts.add_time(med, s, drafts.CostInputs(samples=100, tokens_per_sample=1000, epochs=3, prompt_tps=500.0))
    assert {p.name: p.value for p in med.time}["target forward over the data, this machine"] == pytest.approx(600.0)


def _gguf(path, kv: dict, tensors: dict):
    """A minimal GGUF v3 file: string/uint32/array-of-string key/values and tensor infos (no data)."""

    def s(x: str) -> bytes:
        b = x.encode()
        return struct.pack("<Q", len(b)) + b

    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for k, v in kv.items():
        out += s(k)
        if isinstance(v, str):
            out += struct.pack("<I", 8) + s(v)
        elif isinstance(v, list):
            out += struct.pack("<IIQ", 9, 8, len(v)) + b"".join(s(x) for x in v)
        else:
            out += struct.pack("<II", 4, v)
    for name, dims in tensors.items():
        out += s(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", 0, 0)
    path.write_bytes(out)
    return path


def test_gguf_shape_and_exact_params(tmp_path):
    h, layers, vocab = 64, 2, 10
    tensors = {"token_embd.weight": (h, vocab), "output_norm.weight": (h,)}
    for i in range(layers):
        tensors |= {
            f"blk.{i}.attn_q.weight": (h, h),
            f"blk.{i}.attn_k.weight": (h, 32),
            f"blk.{i}.attn_v.weight": (h, 32),
            f"blk.{i}.attn_output.weight": (h, h),
            f"blk.{i}.ffn_gate.weight": (h, 128),
            f"blk.{i}.ffn_up.weight": (h, 128),
            f"blk.{i}.ffn_down.weight": (128, h),
            f"blk.{i}.attn_norm.weight": (h,),
            f"blk.{i}.ffn_norm.weight": (h,),
        }
    kv = {
        "general.architecture": "llama",
        "llama.embedding_length": h,
        "llama.block_count": layers,
        "llama.attention.head_count": 4,
        "llama.attention.head_count_kv": 2,
        "llama.feed_forward_length": 128,
        "general.file_type": 3,
        "tokenizer.ggml.tokens": [f"t{i}" for i in range(vocab)],
    }
    s = read_shape(_gguf(tmp_path / "m.gguf", kv, tensors))
    assert (s.hidden, s.layers, s.heads, s.kv_heads, s.head_dim, s.intermediate, s.vocab) == (64, 2, 4, 2, 16, 128, 10)
    assert s.tied_embeddings and s.dtype.startswith("Q4_1")
    assert s.params == llama_params(64, 2, 4, 2, 16, 128, 10, tied=True)


def test_bad_models_are_one_line_errors(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        read_shape(tmp_path / "nope.gguf")
    (tmp_path / "x.gguf").write_bytes(b"not a gguf")
    with pytest.raises(InputError, match="not a GGUF"):
        read_shape(tmp_path / "x.gguf")
    (tmp_path / "t.gguf").write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1, 5))  # header cut short
    with pytest.raises(InputError, match="damaged or truncated"):
        read_shape(tmp_path / "t.gguf")
    bad = {k: v for k, v in LLAMA31_8B.items() if k != "hidden_size"}
    with pytest.raises(InputError, match="hidden_size"):
        shape_of(tmp_path, bad, "bad")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{")
    with pytest.raises(InputError, match="not valid JSON"):
        read_shape(tmp_path / "broken")


def test_cli_json_and_text(tmp_path):
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA31_8B))
    run = [sys.executable, "-m", "spectui", "drafts", "cost", "--target", str(folder)]
    r = subprocess.run([*run, "--json", "--gpu", "rtx-4090"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    methods = {m["method"]: m for m in doc["methods"]}
    assert methods["eagle3"]["trainable_params"] == SPECFORGE_EAGLE3_8B
    assert doc["gpu_memory_gib"] == 24 and {d["method"] for d in doc["data_and_servers"]} >= {"EAGLE-3", "Medusa"}
    assert any(p["name"].startswith("draft training, rtx-4090") for p in methods["eagle3"]["time"])
    r = subprocess.run([*run, "--profile", "s-nvidia"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "fits" in r.stdout and "SafeAILab/EAGLE README" in r.stdout and "--spec-type draft-eagle3" in r.stdout
    r = subprocess.run([*run[:-2], "--target", str(tmp_path / "missing")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "does not exist" in r.stderr


async def test_the_tui_screen_shows_the_same_report(tmp_path):
    from textual.app import App
    from textual.widgets import Input, Static

    from spectui.tui.screens.drafts_screen import DraftsScreen, cost_text
    from tests.pilot import until

    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA31_8B))

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(DraftsScreen(str(folder), "s-nvidia"))

    app = Host()
    async with app.run_test(size=(160, 50)) as pilot:
        # pushed from on_mount: composed, and its on_mount wrote the report
        await until(
            pilot,
            lambda: isinstance(app.screen, DraftsScreen) and any(str(w.render()) for w in app.screen.query("#report")),
            what="the drafts screen's report",
        )
        shown = str(app.screen.query_one("#report", Static).render())
        assert "EAGLE-3 (SpecForge" in shown and "424.7M" in shown and "fits" in shown
        assert shown == cost_text(str(folder), "s-nvidia", 2048, 5000)
        app.screen.query_one("#target", Input).value = str(tmp_path / "missing")
        await pilot.press("tab", "enter")  # submit from the profile field
        report = app.screen.query_one("#report", Static)
        await until(pilot, lambda: str(report.render()) != shown, what="the report for the new target")
        assert "cannot cost" in str(app.screen.query_one("#report", Static).render())
