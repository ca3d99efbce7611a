"""Settings read from a server's command line wherever spectui can read it (run.cmdline): launched, or the local
process listening on the URL's port, the source named; vLLM's verification methods named (backends.lossy)."""

from __future__ import annotations

import json
import socket

import psutil

from spectui.backends.launchspec import LaunchSpec
from spectui.backends.lossy import lossy_settings, verification_named
from spectui.core.types import ServerInfo
from spectui.run.cmdline import CommandLine, fill_settings


def vllm(cfg: dict) -> list[str]:
    return ["vllm", "serve", "m", "--speculative-config", json.dumps(cfg)]


def test_vllm_rejection_methods_are_named_and_only_the_lossy_ones_are_lossy():
    assert lossy_settings(vllm({"method": "eagle3", "rejection_sample_method": "block"})) == []
    named = verification_named(vllm({"method": "eagle3", "rejection_sample_method": "block"}))
    assert named == ["rejection_sample_method=block: block verification (distribution-preserving, arXiv 2403.10444)"]
    synth = vllm({"method": "ngram", "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 3})
    assert lossy_settings(synth) == [
        "--speculative-config rejection_sample_method=synthetic",
        "--speculative-config synthetic_acceptance_length=3",
    ]
    assert "lossy" in verification_named(synth)[0]
    assert "FLy" in verification_named(vllm({"method": "fly"}))[0]
    assert verification_named(["llama-server", "--spec-synth-len", "3"]) == [
        "--spec-synth-len 3: drafts accepted at random (lossy)"
    ]


def test_a_server_spectui_did_not_launch_is_read_from_its_process_and_the_source_named():
    argv = ["llama-server", "-m", "t.gguf", "--spec-default", "--spec-synth-len", "3", "-ctk", "q8_0"]
    cmd = CommandLine.of(None, "http://127.0.0.1:8080", read=lambda url: argv)
    assert cmd.source == "process command line" and cmd.words() == "from the process command line"
    info = ServerInfo("http://127.0.0.1:8080", speculative={"type": "none"})
    fill_settings(info, cmd)
    label = info.describe_speedup()
    assert "spec ngram-mod (stateful: ngram-mod keeps state across requests) [process command line]" in label
    assert "--spec-synth-len 3: drafts accepted at random (lossy) (from the process command line)" in label
    assert info.kv_cache == {"type_k": "q8_0", "type_v": "f16", "from": "process command line"}


def test_a_request_report_outranks_the_command_line_and_an_unused_draft_is_said():
    launched = LaunchSpec.from_argv(["llama-server", "-m", "t.gguf", "-md", "d.gguf"])
    cmd = CommandLine.of(launched, "http://127.0.0.1:1", read=lambda url: None)
    assert cmd.source == "launch command"
    info = ServerInfo("http://127.0.0.1:1")
    fill_settings(info, cmd)
    assert "d.gguf" in info.describe_speedup() and "drafts nothing" in info.describe_speedup()
    info = ServerInfo("u", speculative={"type": "draft-simple", "types_from": "the request's final event"})
    fill_settings(info, CommandLine(("llama-server", "--spec-type", "ngram-mod"), "launch command"))
    assert info.speculative["type"] == "draft-simple"  # what the request really used stands


def test_nothing_known_where_nothing_local_listens():
    assert not CommandLine.of(None, "http://example.com:8080").known
    assert not CommandLine.of(None, "http://127.0.0.1:1").known


def test_the_local_process_is_found_by_its_port():
    with socket.socket() as s:  # this process listens on a port of its own
        s.bind(("127.0.0.1", 0))
        s.listen()
        cmd = CommandLine.of(None, f"http://127.0.0.1:{s.getsockname()[1]}")
    assert cmd.argv == tuple(psutil.Process().cmdline()) and cmd.source == "process command line"


def test_the_sampling_promise_reads_spec_default_and_synthetic_acceptance():
    from spectui.labs.sampling.exact import guarantee_for

    g = guarantee_for("llama.cpp", None, ["llama-server", "--spec-default"])
    assert (g.drafting, g.promise) == ("greedy", "seeded bytes")  # ngram-mod: speculation, drafts looked up
    g = guarantee_for("llama.cpp", None, ["llama-server", "--spec-type", "draft-simple", "--spec-synth-len", "3"])
    assert (g.drafting, g.promise) == ("lossy", "unknown") and "--spec-synth-len 3" in g.why
