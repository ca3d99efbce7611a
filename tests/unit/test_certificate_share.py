"""The share is the denominator: a certificate rebuilt over sessions that lack a prompt of its
share, hold a (prompt, run) twice, or hold another count of runs than `inputs.runs` says INCOMPLETE … N not
run, and verify, merge and regress refuse it; a session listed twice does not verify. Certificates are built
with `certificate.build` from recorded llama-server streams (tests/unit/test_certificate.py's `prove`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from spectui.cli.main import main
from spectui.run.prove import certificate
from spectui.run.prove.shard import Shard
from tests.unit.test_certificate import prompts, prove


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    out = tmp_path_factory.mktemp("share") / "c"
    return out, prove(out, sampled=0)


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_records(path: Path, recs: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")


def prompt_of(recs: list[dict]) -> dict[int, tuple[str, int]]:
    """n → (prompt id, run) of a session's records."""
    ids = {r["n"]: r["prompt"]["id"] for r in recs if r.get("type") == "prompt"}
    runs = {r["n"]: r.get("run") for r in recs if r.get("type") == "result"}
    return {n: (pid, runs.get(n)) for n, pid in ids.items()}


def rebuild(src: Path, dest: Path, edit) -> dict:
    """A copy of the certificate whose greedy session was edited by `edit(records)`, its hashes fixed and
    every derived figure rebuilt (what someone relabelling a session would do)."""
    shutil.copytree(src, dest)
    session = dest / "greedy.jsonl"
    write_records(session, edit(records(session)))
    doc = certificate.load(dest)
    refs = [certificate.session_ref(dest / r["path"], dest, r["phase"]) for r in doc["sessions"]]
    new = certificate.build(doc["inputs"], doc["measured_on"], refs, dest)
    certificate.write(new, dest / certificate.CERT_NAME)
    return new


def without(pid: str, run: int | None = None):
    def edit(recs):
        who = prompt_of(recs)
        drop = {n for n, (p, k) in who.items() if p == pid and (run is None or k == run)}
        return [r for r in recs if r.get("n") not in drop]

    return edit


def twice(pid: str, run: int):
    """The records of (pid, run) appended again under a fresh n: the same run recorded twice."""

    def edit(recs):
        who = prompt_of(recs)
        [n] = [n for n, (p, k) in who.items() if p == pid and k == run]
        fresh = max(who) + 1
        return recs + [{**r, "n": fresh} for r in recs if r.get("n") == n]

    return edit


def test_a_prompt_of_the_share_with_no_run_is_counted_not_run_and_fails_verify(made, tmp_path, capsys):
    out, doc = made
    gone = doc["inputs"]["share"][1]
    new = rebuild(out, tmp_path / "c", without(gone))
    assert new["verdict"]["status"] == "incomplete"
    assert new["verdict"]["line"].startswith(f"INCOMPLETE: identical on 2/3 (greedy; 1 not run: {gone})")
    assert new["derived"]["greedy"]["not_run"] == [gone]
    assert main(["verify", str(tmp_path / "c")]) == 1
    said = capsys.readouterr().out
    assert f"prompt {gone}: in the share, but the sessions hold no run of it" in said


@pytest.mark.parametrize("how", ["run missing", "run twice"])
def test_runs_per_prompt_other_than_the_inputs_are_not_run(made, tmp_path, capsys, how):
    out, doc = made
    pid = doc["inputs"]["share"][0]
    edit = without(pid, run=2) if how == "run missing" else twice(pid, 1)
    new = rebuild(out, tmp_path / "c", edit)
    assert new["verdict"]["line"].startswith(f"INCOMPLETE: identical on 2/3 (greedy; 1 not run: {pid})"), new["verdict"]
    assert main(["verify", str(tmp_path / "c")]) == 1
    said = capsys.readouterr().out
    assert ("recorded twice" if how == "run twice" else "inputs.runs says 2") in said


def test_the_same_session_listed_twice_does_not_verify(made, tmp_path, capsys):
    out, _ = made
    dest = tmp_path / "c"
    shutil.copytree(out, dest)
    doc = certificate.load(dest)
    refs = doc["sessions"] + doc["sessions"]
    new = certificate.build(doc["inputs"], doc["measured_on"], refs, dest)
    certificate.write(new, dest / certificate.CERT_NAME)
    assert main(["verify", str(dest)]) == 1
    said = capsys.readouterr().out
    assert "the same path listed 2 times" in said and "recorded twice" in said


def test_a_relabelled_shard_does_not_merge_and_an_incomplete_certificate_does_not_regress(made, tmp_path, capsys):
    items = prompts(4)
    a = prove(tmp_path / "s1", items=items, sampled=0, shard=Shard(1, 2))
    prove(tmp_path / "s2", items=items, sampled=0, shard=Shard(2, 2))
    gone = a["inputs"]["share"][0]
    rebuild(tmp_path / "s1", tmp_path / "s1x", without(gone))
    paths = [str(tmp_path / "s1x" / "certificate.json"), str(tmp_path / "s2" / "certificate.json")]
    assert main(["merge", *paths, "-o", str(tmp_path / "m.json")]) == 2
    assert "does not verify" in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()
    out, doc = made
    rebuild(out, tmp_path / "c", without(doc["inputs"]["share"][2]))
    assert main(["regress", str(out), str(tmp_path / "c")]) == 2
    assert capsys.readouterr().out.startswith("INCOMPARABLE: the new certificate does not verify")
