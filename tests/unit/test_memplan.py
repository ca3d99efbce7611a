"""The memory plan: two servers on one GPU, planned before launch against a fake NVML.

An 8B-shaped bf16 model and its draft on a 24 GB GPU do not fit twice: the plan says one at a time, with
the numbers. A 1B-shaped pair does: each server gets an explicit share that does not overlap the other's,
and the argv of each launched server carries it (built here without launching anything).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from spectui.core.errors import InputError, SetupError
from spectui.labs.memory.plan import (
    CUDA_CONTEXT,
    MARGIN,
    VLLM_WORKSPACE,
    floor_gpu,
    gpu_for,
    plan_pair,
    plan_profile,
    sglang_workspace,
    summary,
)
from spectui.machine.launcher import Launcher, MemoryShare, ServerProcess, apply_memory_share
from spectui.machine.probes import GPUMemory, GPUProbe
from spectui.store.profiles import load_profiles, parse_profile, servers_for
from tests.fakes import FakeNVML

GIB = 1024**3
ROOT = Path(__file__).resolve().parents[2]


def fake_gpu(total_gib: float = 24, used_gib: float = 0) -> GPUMemory:
    nvml = FakeNVML(gpus=(("NVIDIA GeForce RTX 4090", int(total_gib * GIB), int(used_gib * GIB), 0),))
    gpu = GPUProbe(nvml).memory(0)
    assert gpu is not None
    return gpu


def shaped(name: str, params_b: float, layers: int, kv_heads: int, head_dim: int) -> str:
    return (
        f'[variables.{name}]\nenv = "TEST_MEMPLAN_{name.upper()}"\ndescription = "{name}"\n'
        f'[variables.{name}.stated]\nparams_b = {params_b}\ndtype = "bf16"\nlayers = {layers}\n'
        f'kv_heads = {kv_heads}\nhead_dim = {head_dim}\ncontext = 131072\nsource = "test shape"\n'
    )


def profile(target: tuple, draft: tuple) -> str:
    """A Track-S-like profile with one pair per engine; target/draft are (params_b, layers, kv_heads, head_dim)."""
    spec = '{\\"method\\": \\"draft_model\\", \\"model\\": \\"{draft}\\", \\"num_speculative_tokens\\": 4}'
    return (
        'name = "t"\ntrack = "T"\n[hardware]\ngpu_vendor = "nvidia"\nmin_gpu_memory_gib = 24\n'
        + shaped("target", *target)
        + shaped("draft", *draft)
        + '[[comparison]]\nid = "vllm-draft"\n'
        'baseline = { backend = "vllm", argv = ["vllm", "serve", "{target}", "--max-model-len", "8192"] }\n'
        'candidate = { backend = "vllm", argv = ["vllm", "serve", "{target}", "--max-model-len", "8192", '
        f'"--speculative-config", "{spec}"] }}\n'
        '[[comparison]]\nid = "sglang-standalone"\n'
        'baseline = { backend = "sglang", argv = ["python", "-m", "sglang.launch_server", "--model-path", '
        '"{target}", "--context-length", "8192"] }\n'
        'candidate = { backend = "sglang", argv = ["python", "-m", "sglang.launch_server", "--model-path", '
        '"{target}", "--context-length", "8192", "--speculative-algorithm", "STANDALONE", '
        '"--speculative-draft-model-path", "{draft}"] }\n'
        '[[comparison]]\nid = "llama-draft"\n'
        'baseline = { backend = "llama.cpp", argv = ["{llama_server}", "-m", "{target}", "-ngl", "99", "-c", "8192"] }\n'
        'candidate = { backend = "llama.cpp", argv = ["{llama_server}", "-m", "{target}", "-ngl", "99", "-c", "8192", '
        '"-md", "{draft}", "-ngld", "99"] }\n'
    )


LLAMA_8B = (8.03, 32, 8, 128)  # Llama-3.1-8B's shape
LLAMA_1B = (1.24, 16, 8, 64)  # Llama-3.2-1B's
SMALL_DRAFT = (0.135, 30, 3, 64)  # SmolLM2-135M's


def test_eight_b_bf16_and_a_draft_on_24_gb_run_one_at_a_time():
    p = parse_profile(profile(LLAMA_8B, LLAMA_1B), "t.toml")
    gpu = fake_gpu(24)
    assert gpu.free == 24 * GIB and gpu.source == "NVML"
    plan = plan_pair(p, p.comparison("vllm-draft"), gpu)
    base, cand = plan.servers
    assert base.of("weights") == round(8.03e9 * 2) and cand.of("weights") == round(8.03e9 * 2) + round(1.24e9 * 2)
    # KV: 8192 tokens × 32 layers × 8 heads × 128 × (K + V) × 2 bytes = 1 GiB; the draft's 16 × 8 × 64: 1/4
    assert base.of("KV cache") == GIB and cand.of("KV cache") == GIB + GIB // 4
    assert base.of("overhead") == CUDA_CONTEXT + VLLM_WORKSPACE
    assert base.total + cand.total > 24 * GIB - MARGIN >= cand.total
    assert plan.one_at_a_time and not plan.fits and plan.decision == "one-at-a-time"
    assert "one server at a time" in plan.reason and "> 23.5 GiB usable" in plan.reason
    # each alone gets the GPU (less the margin), told in vLLM's terms
    for share in plan.shares.values():
        assert share.alone and share.gib == pytest.approx(23.5)
        assert share.engine_fraction == pytest.approx((23.5 * GIB - CUDA_CONTEXT) / (24 * GIB), abs=1e-3)
    text = "\n".join(plan.lines(detail=True))
    assert (
        "stated: 8.03B × bf16 (test shape; TEST_MEMPLAN_TARGET not set)" in text and "--gpu-memory-utilization" in text
    )
    # the same holds for the llama.cpp pair; SGLang's STANDALONE reserve makes its candidate too big even alone
    assert plan_pair(p, p.comparison("llama-draft"), gpu).one_at_a_time
    too_big = plan_pair(p, p.comparison("sglang-standalone"), gpu)
    assert too_big.decision == "too-big" and not too_big.shares and "candidate needs" in too_big.reason


def test_shares_planned_alone_are_refused_for_two_servers_at_once():
    alone = MemoryShare(23.5, 0.979, 0.947, alone=True)
    launcher = Launcher()
    launcher.add(ServerProcess("baseline", ["vllm"], port=1, backend="vllm", memory_share=alone))
    launcher.add(ServerProcess("candidate", ["vllm"], port=2, backend="vllm", memory_share=alone))
    with pytest.raises(SetupError, match="do not fit on the GPU together"):
        launcher.start_all()
    assert all(s.proc is None for s in launcher.servers)  # nothing was started


def test_one_b_pair_gets_explicit_non_overlapping_shares_and_each_argv_carries_its_share(tmp_path):
    p = parse_profile(profile(LLAMA_1B, SMALL_DRAFT), "t.toml")
    gpu = fake_gpu(24)
    for name in ("t.gguf", "d.gguf"):  # llama.cpp's argv must name files that exist; the plan uses the stated shape
        (tmp_path / name).write_bytes(b"")
    values = {
        "llama_server": "/opt/llama-server",
        "target": str(tmp_path / "t.gguf"),
        "draft": str(tmp_path / "d.gguf"),
    }
    for cid, flag in (
        ("vllm-draft", "--gpu-memory-utilization"),
        ("sglang-standalone", "--mem-fraction-static"),
        ("llama-draft", "-ngl"),
    ):
        plan = plan_pair(p, p.comparison(cid), gpu, values)
        assert plan.fits and not plan.one_at_a_time, plan.reason
        base, cand = (plan.shares[s] for s in ("baseline", "candidate"))
        needs = {s.side: s.total for s in plan.servers}
        # each share covers its server's need, and the two together stay inside the free memory
        assert base.gib * GIB >= needs["baseline"] - 0.01 * GIB and cand.gib * GIB >= needs["candidate"] - 0.01 * GIB
        assert (base.gib + cand.gib) * GIB <= gpu.free - MARGIN + 0.02 * GIB
        assert not base.alone and not cand.alone
        servers = servers_for(p, p.comparison(cid), values, shares=plan.shares)
        for server, share in zip(servers, (base, cand)):
            argv = server.argv
            assert server.memory_share is share and argv.count(flag) == 1, argv
            value = argv[argv.index(flag) + 1]
            if flag == "--gpu-memory-utilization":
                assert float(value) == share.engine_fraction and float(value) * gpu.total <= share.gib * GIB
            elif flag == "--mem-fraction-static":
                assert float(value) == share.engine_fraction
            else:
                assert value == "17" and argv[argv.index("-c") + 1] == "8192" and argv.count("-c") == 1
        if flag == "--gpu-memory-utilization":
            # vLLM's fractions are of the GPU's total: together they leave the other's memory alone
            assert (base.engine_fraction + cand.engine_fraction) * gpu.total <= gpu.free
        if flag == "--mem-fraction-static":
            # SGLang's is of the memory free when it starts (after its CUDA context): the candidate starts
            # second, with the baseline's share taken; its static part plus its reserve stays in its share
            ws = plan.servers[1].workspace
            static = cand.engine_fraction * (gpu.free - base.gib * GIB - CUDA_CONTEXT)
            assert static + CUDA_CONTEXT + ws <= cand.gib * GIB + 1
        if flag == "-ngl":
            assert servers[1].argv[servers[1].argv.index("-ngld") + 1] == "31"


def test_apply_memory_share_replaces_every_spelling_of_the_flags():
    share = MemoryShare(6.0, 0.25, 0.218, gpu_layers=33, draft_gpu_layers=17, ctx=4096)
    argv = ["vllm", "serve", "m", "--gpu-memory-utilization=0.9", "--max-model-len", "8192"]
    assert apply_memory_share(argv, "vllm", share) == [
        "vllm",
        "serve",
        "m",
        "--max-model-len",
        "8192",
        "--gpu-memory-utilization",
        "0.218",
    ]
    argv = [
        "llama-server",
        "-m",
        "x",
        "--n-gpu-layers",
        "99",
        "--ctx-size",
        "8192",
        "--spec-draft-ngl",
        "99",
        "-fa",
        "on",
    ]
    out = apply_memory_share(argv, "llama.cpp", share)
    assert out == ["llama-server", "-m", "x", "-fa", "on", "-ngl", "33", "-ngld", "17", "-c", "4096"]
    sg = apply_memory_share(["python", "--mem-fraction-static", "0.88"], "sglang", share)
    assert sg == ["python", "--mem-fraction-static", "0.218"]
    assert apply_memory_share(argv, "llama.cpp", None) == argv


def test_gpu_figures_come_from_nvml_and_without_it_from_the_profile():
    gpu = GPUProbe(FakeNVML()).memory(0)  # the fake's RTX 4090: 24 GiB, 6 GiB in use
    assert gpu.total == 24 * GIB and gpu.free == 18 * GIB and gpu.name == "NVIDIA GeForce RTX 4090"
    assert GPUProbe(FakeNVML()).sample()[0].memory_free == 18 * GIB
    p = parse_profile(profile(LLAMA_8B, LLAMA_1B), "t.toml")
    none = gpu_for(p, probe=GPUProbe(FakeNVML(fail_init=True)))
    assert none.total == none.free == 24 * GIB
    assert "no NVIDIA GPU here" in none.source and "NVML Shared Library Not Found" in none.source
    # 6 GiB already used by something else: the 1B pair that fits on an empty card no longer does together
    small = parse_profile(profile(LLAMA_1B, SMALL_DRAFT), "t.toml")
    assert plan_pair(small, small.comparison("vllm-draft"), fake_gpu(24, used_gib=12)).one_at_a_time


def write_gguf(path: Path, pad: int) -> None:
    """A minimal GGUF v3 header with the attention shape spectui reads, padded to `pad` bytes."""

    def s(text: str) -> bytes:
        return struct.pack("<Q", len(text)) + text.encode()

    kv = [
        s("general.architecture") + struct.pack("<I", 8) + s("llama"),
        s("llama.block_count") + struct.pack("<II", 4, 4),
        s("llama.attention.head_count") + struct.pack("<II", 4, 8),
        s("llama.attention.head_count_kv") + struct.pack("<II", 4, 2),
        s("llama.embedding_length") + struct.pack("<II", 4, 512),
        s("llama.context_length") + struct.pack("<II", 4, 4096),
    ]
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)) + b"".join(kv)
    path.write_bytes(body + b"\0" * (pad - len(body)))


def test_files_on_this_machine_are_measured_not_stated(tmp_path, monkeypatch):
    gguf = tmp_path / "m.gguf"
    write_gguf(gguf, 3 * 2**20)
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(
        json.dumps({"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 256,
                    "max_position_embeddings": 2048, "torch_dtype": "bfloat16"})
    )  # fmt: skip
    for name, size in (("model-00001-of-00002.safetensors", 5 * 2**20), ("model-00002-of-00002.safetensors", 2**20)):
        with open(hf / name, "wb") as fh:
            fh.truncate(size)
    text = profile(LLAMA_8B, LLAMA_1B)
    p = parse_profile(text, "t.toml")
    monkeypatch.setenv("TEST_MEMPLAN_TARGET", str(gguf))
    monkeypatch.setenv("TEST_MEMPLAN_DRAFT", str(gguf))
    plan = plan_pair(p, p.comparison("llama-draft"), fake_gpu(24), {"llama_server": "/x"})
    base = plan.servers[0]
    assert base.of("weights") == 3 * 2**20 and base.layers == 4
    # 8192 tokens × 4 layers × 2 KV heads × 64 (512 / 8 heads) × (K + V) × 2 bytes
    assert base.of("KV cache") == 8192 * 4 * 2 * 64 * 2 * 2
    assert "measured: file m.gguf; shape from GGUF header" in base.terms[0].source
    assert plan.fits and plan.shares["baseline"].gpu_layers == 5
    monkeypatch.setenv("TEST_MEMPLAN_TARGET", str(hf))
    vplan = plan_pair(p, p.comparison("vllm-draft"), fake_gpu(24))
    t = vplan.servers[0]
    assert t.of("weights") == 6 * 2**20 and "2 safetensors file(s) in hf" in t.terms[0].source
    assert t.of("KV cache") == 8192 * 2 * 2 * 64 * 2 * 2  # --max-model-len 8192, config.json's shape
    (hf / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 123456}}))
    assert plan_pair(p, p.comparison("vllm-draft"), fake_gpu(24)).servers[0].of("weights") == 123456
    # a variable naming a file that is not here: the stated figure, saying why
    monkeypatch.setenv("TEST_MEMPLAN_TARGET", str(tmp_path / "absent"))
    gone = plan_pair(p, p.comparison("vllm-draft"), fake_gpu(24)).servers[0].terms[0].source
    assert gone.startswith("stated:") and "absent is not on this machine" in gone


def test_unknown_sizes_are_named_not_guessed():
    text = (
        'name = "u"\n[hardware]\ngpu_vendor = "nvidia"\nmin_gpu_memory_gib = 24\n'
        '[variables.m]\nenv = "TEST_MEMPLAN_NOTHING"\n[[comparison]]\nid = "a"\n'
        'baseline = { backend = "vllm", argv = ["vllm", "serve", "{m}"] }\n'
        'candidate = { backend = "vllm", argv = ["vllm", "serve", "{m}"] }\n'
    )
    p = parse_profile(text, "u.toml")
    plan = plan_pair(p, p.comparison("a"), fake_gpu(24), values={})
    assert plan.decision == "unknown" and not plan.fits and not plan.one_at_a_time and not plan.shares
    assert "TEST_MEMPLAN_NOTHING" in plan.reason and "sizes unknown" in summary(plan)


def test_stated_figures_are_checked_where_the_profile_is_read():
    base = 'name = "x"\n[[comparison]]\nid = "a"\nbaseline = { backend = "vllm", argv = ["v"] }\n'
    base += 'candidate = { backend = "vllm", argv = ["v"] }\n[variables.m]\nenv = "E"\n'
    with pytest.raises(InputError, match=r"x\.toml.*variables\.m\.stated\.dtype.*'q9'"):
        parse_profile(base + '[variables.m.stated]\nparams_b = 8\ndtype = "q9"\nsource = "s"\n', "x.toml")
    with pytest.raises(InputError, match=r"variables\.m\.stated\.source"):
        parse_profile(base + "[variables.m.stated]\nparams_b = 8\n", "x.toml")
    with pytest.raises(InputError, match=r"params_b .* or size_gib"):
        parse_profile(base + '[variables.m.stated]\nsource = "s"\n', "x.toml")
    with pytest.raises(InputError, match=r"memory\.slots"):
        parse_profile(base + "[memory]\nslots = 0\n", "x.toml")
    ok = parse_profile(base + '[variables.m.stated]\nsize_gib = 4.5\nsource = "s"\n[memory]\nslots = 4\n', "x.toml")
    assert ok.variables["m"].stated.weight_bytes == round(4.5 * GIB) and ok.slots == 4


def test_the_track_profiles_plan_on_24_gb_and_on_80_gb():
    profiles, problems = load_profiles()
    assert not problems
    decisions = {}
    for name in ("s-nvidia", "n-nvidia"):
        p = profiles[name]
        for plan in plan_profile(p, floor_gpu(p)):
            decisions[(name, plan.comparison)] = plan.decision
    # on the tracks' 24 GB floor an 8B bf16 model never fits twice; SGLang's STANDALONE pair not even alone
    assert decisions.pop(("n-nvidia", "sglang-standalone")) == "too-big"
    assert set(decisions.values()) == {"one-at-a-time"}, decisions
    for name in ("s-nvidia", "n-nvidia"):
        p = profiles[name]
        assert {pl.decision for pl in plan_profile(p, fake_gpu(80))} == {"together"}
    # the CPU and Apple profiles are not planned (no NVML figures there)
    assert {pl.decision for pl in plan_profile(profiles["cpu-demo"])} == {"not-planned"}
    assert {pl.decision for pl in plan_profile(profiles["m-apple"])} == {"not-planned"}


def test_sglang_reserve_follows_its_own_rule():
    # 512 + 1.5 × 2048 + 2 × 24 + 128 MiB on a card under 35 GiB (SGLang's figure for a 24 GB GPU)
    assert sglang_workspace(24 * GIB, None, 0) == 3760 * 2**20
    assert sglang_workspace(24 * GIB, "EAGLE3", GIB) == 3760 * 2**20 + GIB
    assert sglang_workspace(80 * GIB, None, 0) == int((512 + 1.5 * 8192 + 2 * 256 + 128) * 2**20)


def test_profiles_check_says_what_it_would_do_on_the_tracks_hardware():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECTUI_LAB_")}
    r = subprocess.run(
        [sys.executable, "-m", "spectui", "profiles", "check", "s-nvidia"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    out = r.stdout
    assert "memory plan on track S's hardware (no NVIDIA GPU here)" in out, out + r.stderr
    assert "GPU: track S's 24 GiB floor, 24.0 GiB total, 24.0 GiB free" in out
    assert out.count("one server at a time") == 9 and "candidate alone: 23.5 GiB" in out
    assert "weights  target         14.96 GiB  stated: 8.03B × bf16 (Llama-3.1-8B config.json" in out
    assert "overhead figures:" in out and "vLLM PR 10511" in out
    assert r.returncode != 0  # no NVIDIA GPU here: the profile does not fit this machine


async def test_the_profile_picker_shows_each_comparisons_plan():
    from textual.app import App
    from textual.widgets import OptionList, Static

    from spectui.store.profiles import Hardware
    from spectui.tui.screens.profiles_screen import ProfilePicker
    from tests.pilot import until

    profiles, problems = load_profiles()
    hw = Hardware("nvidia", [("NVIDIA GeForce RTX 4090", 24 * GIB)], 64 * GIB, gpu_memory=fake_gpu(24, used_gib=0.5))

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(ProfilePicker(profiles, hw, "n-nvidia", problems))

    app = Host()
    async with app.run_test(size=(160, 60)) as pilot:
        # the screen on top once the host's on_mount pushed the picker (not whatever was there first)
        await until(
            pilot, lambda: isinstance(app.screen, ProfilePicker) and app.screen.query("#comparison-list"), what="picker"
        )
        screen = app.screen
        detail = screen.query_one("#detail", Static)
        # the plan is made in a worker thread: wait for it, not for a count of frames (a loaded machine is slow)
        await until(pilot, lambda: "planning…" not in str(detail.render()), what="the memory plan")
        text = str(detail.render())
        assert "memory plan (GPU: NVIDIA GeForce RTX 4090, 24.0 GiB total, 23.5 GiB free (NVML))" in text, text
        assert "sglang-eagle3: one at a time" in text and "sglang-standalone: does not fit" in text
        clist = screen.query_one("#comparison-list", OptionList)
        labels = [str(clist.get_option_at_index(i).prompt) for i in range(clist.option_count)]
        assert labels[0] == "sglang-eagle3: SGLang: EAGLE-3 speculation [one at a time]", labels
        await pilot.press("enter")  # into the comparison list: its highlighted comparison's whole plan
        await until(pilot, lambda: "--mem-fraction-static" in str(detail.render()), what="the comparison's plan")
        text = str(detail.render())
        assert "baseline alone: 23.0 GiB" in text and "SGLang's own reserve rule" in text
        await pilot.press("down")
        await until(pilot, lambda: "does not fit even alone" in str(detail.render()), what="the next comparison's plan")


def test_a_vllm_server_the_plan_sizes_counts_its_cuda_graphs_inside_its_share():
    """vLLM keeps CUDA graphs outside --gpu-memory-utilization unless its profiler estimates them: a sized vLLM
    server is launched with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 (the profile's own value wins), an
    unsized one and other engines get nothing added, and the printed plan says so."""
    from spectui.labs.memory.plan import OVERHEAD_SOURCES
    from spectui.machine.launcher import MemoryShare, share_env

    share = MemoryShare(gib=20.0, fraction=0.4, engine_fraction=0.4)
    assert share_env("vllm", share, {"HF_HUB_OFFLINE": "1"}) == {
        "HF_HUB_OFFLINE": "1",
        "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "1",
    }
    assert share_env("vllm", share, {"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0"}) == {
        "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0"
    }
    assert share_env("vllm", None, None) == {}
    assert share_env("sglang", share, None) == {}
    assert any("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1" in s for s in OVERHEAD_SOURCES)
