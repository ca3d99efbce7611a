"""run.prove.derive.by_machine: which prompts each machine of a merged certificate ran, from the shard
split `of` (round robin: the prompt at position p is shard p % of + 1's, run.prove.shard.Shard.takes)."""

from __future__ import annotations

from spectui.run.prove.derive import PromptRuns, by_machine

GPU = {"gpus": [{"name": "NVIDIA H200"}]}
CPU = {"cpu": "Intel Xeon"}


def _groups(n: int) -> list[PromptRuns]:
    return [PromptRuns(i, f"p{i}", "") for i in range(n)]


def _prompts(out: dict) -> list[tuple[str, list[int], int]]:
    return [(m["machine"], m["shards"], m["prompts"]) for m in out["by_machine"]]


def test_a_shard_without_its_split_counts_as_one_of_one():
    # no "of": the split is 1, so shard 1 takes every position (p % 1 == 0) and shard 2 none (p % 1 == 1 never)
    mo = {"shards": [{"hardware": GPU, "shard": {"index": 1}}, {"hardware": CPU, "shard": {"index": 2}}]}
    assert _prompts(by_machine(_groups(5), {}, mo)) == [("NVIDIA H200", [1], 5), ("CPU Intel Xeon", [2], 0)]


def test_the_split_is_the_first_shards():
    # the first shard says 1/2: positions 0, 2, 4 are shard 1's (3 prompts), 1 and 3 shard 2's (2 prompts);
    # the second's 3 would give 2 (0, 3) and 2 (1, 4)
    mo = {
        "shards": [
            {"hardware": GPU, "shard": {"index": 1, "of": 2}},
            {"hardware": CPU, "shard": {"index": 2, "of": 3}},
        ]
    }
    assert _prompts(by_machine(_groups(5), {}, mo)) == [("NVIDIA H200", [1], 3), ("CPU Intel Xeon", [2], 2)]
