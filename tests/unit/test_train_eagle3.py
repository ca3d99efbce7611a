"""spectui drafts train-eagle3's parts that need no torch and no server: the held-out split the trainer
gets, the per-position acceptance it reports, the serving flags, and bad input said in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from spectui.core.errors import InputError
from spectui.labs.drafts.train_eagle3 import eagle3_extra, per_position, split_heldout

HELD = """name = "heldout"
[[prompt]]
id = "held-a"
text = "Explain what a queue is in three sentences."
"""


def rec(pid: str, text: str) -> dict:
    return {"id": f"{pid}_gen0", "primary_id": pid, "input_ids": [1, 2, 3], "loss_mask": [0, 1, 1], "text": text}


def test_held_out_records_never_reach_the_trainer_by_id_or_by_text(tmp_path):
    data = tmp_path / "data.jsonl"
    rows = [
        rec("train-1", "<|im_start|>user\nExplain what a stack is in three sentences.<|im_end|>…"),
        rec("held-a", "anything"),  # the held-out id itself
        rec("renamed", "<|im_start|>user\nExplain what a queue is in three sentences.<|im_end|>…"),  # same text
        rec("train-2", "<|im_start|>user\nWrite a short Python function that reverses a string.<|im_end|>…"),
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "data.heldout.toml").write_text(HELD)
    out = tmp_path / "head"
    out.mkdir()
    path, held, kept, dropped = split_heldout(data, None, out)
    assert (kept, dropped) == (2, 2) and [p.id for p in held] == ["held-a"]
    ids = [json.loads(line)["primary_id"] for line in path.read_text().splitlines()]
    assert ids == ["train-1", "train-2"]


def test_no_held_out_prompts_is_one_clear_error(tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps(rec("a", "x")) + "\n")
    with pytest.raises(InputError) as e:
        split_heldout(data, None, tmp_path)
    assert "no held-out prompts" in str(e.value) and "--holdout" in (e.value.hint or "")
    with pytest.raises(InputError, match="does not exist"):
        split_heldout(tmp_path / "missing.jsonl", None, tmp_path)


def test_per_position_acceptance_is_accepted_at_each_position_over_verification_steps():
    def result(pos, steps):
        return SimpleNamespace(
            candidate=SimpleNamespace(figures=SimpleNamespace(accepted_per_position=pos, metrics_steps=steps))
        )

    got = per_position([result([5, 2, 1], 10), result([3, 0], 6), result(None, 4)])
    assert got == pytest.approx([8 / 16, 2 / 16, 1 / 16])
    assert per_position([result(None, None)]) is None


def test_serving_flags_name_the_head_and_the_draft_length(tmp_path):
    assert eagle3_extra(tmp_path / "h.gguf", 2) == [
        "-md",
        str(tmp_path / "h.gguf"),
        "--spec-type",
        "draft-eagle3",
        "--spec-draft-n-max",
        "2",
    ]


def test_cli_bad_aux_layers_is_one_line(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "spectui", "drafts", "train-eagle3", "--target", "x.gguf", "--data", "d.jsonl"]
        + ["-o", str(tmp_path / "h"), "--aux-layers", "2,15"],
        capture_output=True,
        text=True,
    )
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "--aux-layers '2,15' is not three layer numbers" in r.stderr
