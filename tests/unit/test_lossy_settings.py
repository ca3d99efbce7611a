"""Which launch settings make speculation lossy by design, and which promise determinism (backends.lossy)."""

from __future__ import annotations

import json

import pytest

from spectui.backends.lossy import determinism_claims, lossy_settings


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["llama-server", "--spec-synth-len", "3"], ["--spec-synth-len 3"]),
        (["llama-server", "--spec-synth-rates=0.9,0.5"], ["--spec-synth-rates 0.9,0.5"]),
        (["llama-server", "--spec-type", "draft-simple", "-md", "d.gguf"], []),
        (
            ["python", "-m", "sglang", "--speculative-accept-threshold-single", "0.7"],
            ["--speculative-accept-threshold-single 0.7"],
        ),
        (["python", "-m", "sglang", "--speculative-accept-threshold-acc", "1.0"], []),
        (
            ["vllm", "--speculative-config", json.dumps({"method": "ngram", "rejection_sample_method": "synthetic"})],
            ["--speculative-config rejection_sample_method=synthetic"],
        ),
        (["vllm", "--speculative-config", json.dumps({"method": "fly"})], ["--speculative-config method=fly"]),
        (
            [
                "vllm",
                "--speculative-config",
                json.dumps({"method": "medusa", "acceptance_method": "typical_acceptance_sampler"}),
            ],
            ["--speculative-config acceptance_method=typical_acceptance_sampler"],
        ),
        (["vllm", "--speculative-config", json.dumps({"method": "eagle3", "rejection_sample_method": "standard"})], []),
        (["vllm", "--speculative-config", "{not json"], []),
        (None, []),
    ],
)
def test_lossy_settings(argv, expected):
    assert lossy_settings(argv) == expected


def test_determinism_claims_from_flags_and_environment():
    assert determinism_claims(["sglang", "--enable-deterministic-inference"]) == [
        "SGLang --enable-deterministic-inference"
    ]
    assert determinism_claims(["vllm"], {"VLLM_BATCH_INVARIANT": "1"}) == [
        "VLLM_BATCH_INVARIANT=1 (batch-invariant mode)"
    ]
    assert determinism_claims(["vllm"], {"VLLM_BATCH_INVARIANT": "0"}) == []
    assert determinism_claims(None) == []
