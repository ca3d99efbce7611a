"""regress as a CI gate: exit 4 for a candidate that no longer completes, a sampled prompt that
passed and now does not, a figure measured before and not now; the mean accepted length is not judged when
the draft length changed. Certificates are built from recorded llama-server streams
(tests/unit/test_certificate.py's `prove`)."""

from __future__ import annotations

import json

from spectui.backends.recorded import ReplayBackend
from spectui.cli.main import main
from spectui.core.events import StreamFailed
from tests.recordings import DATA, DRAFT, INFO, payloads
from tests.unit.test_certificate import drafting, prove

EMOJI = DATA / "llamacpp-b11434-draft-simple-emoji-utf8.sse"


class FailingAll(ReplayBackend):
    """The recorded stream, every request failing after 3 tokens: a candidate that crashes."""

    async def stream(self, prompt, params):
        sent = 0
        async for ev in super().stream(prompt, params):
            if sent >= 3 and not isinstance(ev, StreamFailed):
                yield StreamFailed(ev.t_ns, "connection lost (recorded failure)")
                return
            sent += 1
            yield ev


def test_a_candidate_that_no_longer_completes_is_a_regression(tmp_path, capsys):
    old = prove(tmp_path / "old", sampled=1, samples=2)
    crash = FailingAll("replay://c", payloads(DRAFT), INFO, virtual_ms_per_event=12.5)
    new = prove(tmp_path / "new", candidate=crash, sampled=1, samples=2)
    assert new["verdict"]["status"] == "incomplete" and new["derived"]["speedup"]["overall"] is None
    assert main(["verify", new["_path"]]) == 0  # it verifies: the sessions do say every stream failed
    capsys.readouterr()
    assert main(["regress", old["_path"], new["_path"]]) == 4
    said = capsys.readouterr().out
    head = said.splitlines()[0]
    assert head.startswith("REGRESSION: greedy identical, greedy compared, sampled")
    assert "speed-up" in head and "measured before and not now" in head
    assert "passed before, not now: code-fizzbuzz (failed)" in said


def test_a_sampled_prompt_that_passed_and_now_cannot_decide_is_a_regression(tmp_path, capsys):
    old = prove(tmp_path / "old", sampled=1, samples=2)
    doc = {k: v for k, v in old.items() if k != "_path"}
    p = doc["derived"]["sampled"]["prompts"][0]
    p["status"], doc["derived"]["sampled"]["passed"] = "undecided", 0
    edited = tmp_path / "undecided.json"
    edited.write_text(json.dumps(doc), encoding="utf-8")
    assert main(["regress", old["_path"], str(edited), "--no-verify"]) == 4
    assert "passed before, not now: code-fizzbuzz (undecided)" in capsys.readouterr().out


def test_a_shorter_draft_is_not_judged_on_mean_accepted_length(tmp_path, capsys):
    old = prove(tmp_path / "old", baseline=payloads(DRAFT), candidate=drafting(DRAFT, 8), sampled=0)
    new = prove(tmp_path / "new", baseline=payloads(EMOJI), candidate=drafting(EMOJI, 2), sampled=0)
    o, n = old["derived"]["acceptance"], new["derived"]["acceptance"]
    assert n["mean_accepted_length"]["high"] < o["mean_accepted_length"]["low"]  # lower beyond the intervals
    code = main(["regress", old["_path"], new["_path"]])
    said = capsys.readouterr().out
    row = next(line for line in said.splitlines() if line.startswith("mean accepted length"))
    assert "draft length changed (8 → 2): not judged" in row and "REGRESSION" not in row
    assert code == 0, said
