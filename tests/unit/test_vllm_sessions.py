"""`spectui sessions` shows a one-prompt session's speed-up as replay and the reports print it (the vLLM
audit: a real vLLM one-at-a-time session, runs 0.99× and 1.33×, listed 1.14× — the geometric mean — beside
replay's 1.16×, the median of the runs that core.stats.interval gives)."""

from __future__ import annotations

from pathlib import Path

from spectui.cli.main import main
from spectui.store.session_list import summarise

DATA = Path(__file__).parent.parent / "data"


def test_a_one_prompt_session_lists_the_speed_up_replay_prints(capsys):
    path = DATA / "session-vllm-ngram-alone-repeat2.jsonl"
    assert main(["replay", str(path), "--no-tui"]) == 0
    replayed = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("code-fizzbuzz      speed-up"))
    figure = replayed.split("speed-up ")[1].split(" ")[0]  # '1.16×'
    s = summarise(path)
    assert s.count_text().startswith("1 prompt, 2 runs")
    assert s.speedup_text().startswith(figure + " at 100% accepted"), (s.speedup_text(), replayed)
