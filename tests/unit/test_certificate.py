"""The certificate on recorded llama-server streams (tests/data), without servers: the real run session,
labeller and session writer make the sessions, `prove` derives the certificate from them, and `verify`,
`regress` and `merge` read it back. Expected values come from the recordings themselves."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from spectui.backends.recorded import ReplayBackend
from spectui.cli.main import main
from spectui.core.events import StreamFailed
from spectui.core.types import GenerationParams
from spectui.run.prove import certificate
from spectui.run.prove.prove import ProveOptions, Prover
from spectui.run.prove.shard import Shard, parse_shard, sampled_positions
from spectui.store import prompts as prompt_sets
from tests.recordings import BASELINE, DATA, DRAFT, INFO, changed, payloads

EMOJI = DATA / "llamacpp-b11434-draft-simple-emoji-utf8.sse"
SCHEMA = json.loads(certificate.SCHEMA.read_text(encoding="utf-8"))


def prompts(n: int = 3):
    return prompt_sets.load_set("default")[1][:n]


def prove(out: Path, baseline=None, candidate=None, items=None, **opts) -> dict:
    b = ReplayBackend("replay://b", baseline or payloads(BASELINE), INFO, virtual_ms_per_event=12.5)
    c = candidate if isinstance(candidate, ReplayBackend) else None
    if c is None:
        c = ReplayBackend("replay://c", candidate or payloads(DRAFT), INFO, virtual_ms_per_event=12.5)
    options = ProveOptions(**{"runs": 2, "triage": False, "hash_files": False, **opts})
    prover = Prover(
        b, c, GenerationParams(max_tokens=64, cache_prompt=False), items or prompts(), "default", out, options
    )
    return asyncio.run(prover.run())


def valid(doc: dict) -> None:
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(SCHEMA)  # the schema in the repo is itself valid
    jsonschema.validate({k: v for k, v in doc.items() if k != "_path"}, SCHEMA)


def recorded_counts(path: Path) -> dict:
    """drafted/accepted of a recorded stream: its last event's cumulative draft counters."""
    last = [p for p in payloads(path) if "draft_n" in (p.get("timings") or {})][-1]["timings"]
    return {"drafted": last["draft_n"], "accepted": last["draft_n_accepted"]}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    out = tmp_path_factory.mktemp("cert") / "c"
    return out, prove(out, sampled=1, samples=4)


def test_an_identical_candidate_gets_identical_first_and_every_figure_from_its_sessions(made):
    out, doc = made
    valid(doc)
    assert doc["verdict"]["line"].startswith("IDENTICAL on 3/3 (greedy) and 1/1 (sampled, seeded bytes identical)")
    assert doc["verdict"]["status"] == "identical"
    want = recorded_counts(DRAFT)
    acc = doc["derived"]["acceptance"]
    # 3 prompts × 2 runs, each the recorded stream: its counters six times over
    assert acc["drafted"] == 6 * want["drafted"] and acc["accepted"] == 6 * want["accepted"]
    assert acc["acceptance_rate"] == pytest.approx(want["accepted"] / want["drafted"])
    per_prompt = doc["derived"]["greedy"]["per_prompt"]
    assert [p["id"] for p in per_prompt] == [p.id for p in prompts()]
    assert all(p["verdicts"] == ["identical", "identical"] for p in per_prompt)
    # every session is referenced by its real sha256, and sits beside the certificate
    for ref in doc["sessions"]:
        assert certificate.sha256_of(out / ref["path"]) == ref["sha256"]
    assert {p.name for p in out.iterdir()} >= {
        "greedy.jsonl",
        "sampled.jsonl",
        "certificate.json",
        "certificate.md",
        "certificate.html",
    }
    # the renderings say the same verdict; the HTML page loads nothing from outside
    md = (out / "certificate.md").read_text(encoding="utf-8")
    page = (out / "certificate.html").read_text(encoding="utf-8")
    assert "IDENTICAL on 3/3" in md and "IDENTICAL on 3/3" in page
    assert "http" not in page.split("<body>")[0] and "<script" not in page and "<link" not in page
    # the servers' configuration in words, never a Python dict's repr
    for side in ("baseline", "candidate"):
        [line] = [x for x in md.splitlines() if x.lstrip("- ").startswith(f"{side}:")]
        assert "{" not in line and "'" not in line and "speculative none, KV cache default" in line, line


def test_the_servers_configuration_is_written_in_words(made):
    from spectui.run.prove.render import render_markdown, render_text

    _, doc = made
    doc = json.loads(json.dumps({k: v for k, v in doc.items() if k != "_path"}))
    servers = doc["measured_on"]["servers"]
    servers["baseline"]["speculative"] = {"enabled": False, "type": "none"}  # as llama-server's /props says
    servers["candidate"]["speculative"] = {"enabled": True, "type": "draft-simple", "n_max": 8}
    servers["candidate"]["kv_cache"] = {"type_k": "q4_0", "type_v": "q4_0"}
    for text in (render_text(doc), render_markdown(doc)):
        [base] = [x for x in text.splitlines() if x.lstrip("- ").startswith("baseline:")]
        [cand] = [x for x in text.splitlines() if x.lstrip("- ").startswith("candidate:")]
        assert "speculative none, KV cache default" in base, base
        plain = cand.replace("\\_", "_")  # Markdown escapes the underscores
        assert "speculative type draft-simple, n_max 8, KV cache type_k q4_0, type_v q4_0" in plain, cand
        assert "{" not in base + cand and "enabled" not in base + cand


def test_the_speed_up_is_the_geometric_mean_of_the_runs_ratios(made):
    _, doc = made
    import math

    ratios = [r for p in doc["derived"]["greedy"]["per_prompt"] for r in p["speedups"]]
    tps = [
        c / b
        for p in doc["derived"]["greedy"]["per_prompt"]
        for b, c in zip(p["decode_tps"]["baseline"], p["decode_tps"]["candidate"])
    ]
    assert ratios == pytest.approx(tps)
    sp = doc["derived"]["speedup"]["overall"]
    assert sp["value"] == pytest.approx(math.exp(sum(math.log(r) for r in ratios) / len(ratios)))
    # a replay's clock is virtual: every run gives the same ratio, so the interval is that ratio
    assert sp["low"] == pytest.approx(sp["value"]) == pytest.approx(sp["high"])
    assert doc["derived"]["speedup"]["speed"] == ("slower" if sp["high"] < 0.98 else "faster")


def test_verify_passes_on_a_fresh_certificate(made, capsys):
    out, _ = made
    assert main(["verify", str(out / "certificate.json")]) == 0
    assert capsys.readouterr().out.startswith("VERIFIED")


def copy(out: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "copy"
    shutil.copytree(out, dest)
    return dest


def test_verify_names_a_session_changed_by_one_byte(made, tmp_path, capsys):
    out, _ = made
    c = copy(out, tmp_path)
    session = c / "greedy.jsonl"
    data = bytearray(session.read_bytes())
    i = data.index(b'"d":"') + 5  # the first token's text: one byte of model output
    data[i] = ord("X") if data[i] != ord("X") else ord("Y")
    session.write_bytes(bytes(data))
    assert main(["verify", str(c / "certificate.json")]) == 1
    out_text = capsys.readouterr().out
    assert out_text.startswith("NOT VERIFIED")
    assert "session greedy.jsonl: sha256" in out_text


def test_verify_names_a_figure_changed_in_the_certificate(made, tmp_path, capsys):
    out, _ = made
    c = copy(out, tmp_path)
    path = c / "certificate.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["derived"]["acceptance"]["accepted"] += 1
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    assert main(["verify", str(path)]) == 1
    text = capsys.readouterr().out
    assert "derived.acceptance.accepted: the certificate says" in text
    assert "session greedy.jsonl: sha256 ok" in text  # the sessions are fine: the figure is what changed


def test_verify_names_an_edited_verdict_line_and_rendering(made, tmp_path, capsys):
    out, _ = made
    c = copy(out, tmp_path)
    path = c / "certificate.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["verdict"]["line"] = doc["verdict"]["line"].replace("SLOWER", "FASTER")
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    md = c / "certificate.md"
    md.write_text(md.read_text(encoding="utf-8").replace("SLOWER", "FASTER"), encoding="utf-8")
    assert main(["verify", str(path)]) == 1
    text = capsys.readouterr().out
    assert "verdict: the certificate says" in text
    assert "certificate.html: does not match the certificate JSON" in text  # rendered from the old line


def test_a_changed_output_is_different_with_its_byte_offset(tmp_path, capsys):
    stream = payloads(BASELINE)
    k = next(i for i, p in enumerate(stream) if p.get("content"))
    want_byte = sum(len(p.get("content", "").encode()) for p in stream[:k])
    doc = prove(tmp_path / "d", candidate=changed(stream, k, "\u00a7"), sampled=0)
    valid(doc)
    assert doc["verdict"]["status"] == "different"
    assert doc["verdict"]["line"].startswith("DIFFERENT on 3/3 (greedy; cause: not triaged)")
    diffs = doc["derived"]["differences"]
    assert [d["byte"] for d in diffs] == [want_byte] * 3 and {d["kind"] for d in diffs} == {"bytes"}
    assert main(["verify", str(tmp_path / "d" / "certificate.json")]) == 0
    capsys.readouterr()


class FailingSecond(ReplayBackend):
    """The recorded stream, but every second request fails after 3 tokens (a side going away)."""

    calls = 0

    async def stream(self, prompt, params):
        FailingSecond.calls += 1
        fail = FailingSecond.calls % 2 == 0
        sent = 0
        async for ev in super().stream(prompt, params):
            if fail and sent >= 3 and not isinstance(ev, StreamFailed):
                yield StreamFailed(ev.t_ns, "connection lost (recorded failure)")
                return
            sent += 1
            yield ev


def test_a_failed_side_gives_no_rate_speedup_or_acceptance_anywhere(tmp_path):
    FailingSecond.calls = 0
    cand = FailingSecond("replay://c", payloads(DRAFT), INFO, virtual_ms_per_event=12.5)
    doc = prove(tmp_path / "f", candidate=cand, sampled=0)
    valid(doc)
    assert doc["verdict"]["status"] == "incomplete" and doc["verdict"]["line"].startswith("INCOMPLETE: identical on")
    per = doc["derived"]["greedy"]["per_prompt"]
    failed_runs = sum(v == "failed" for p in per for v in p["verdicts"])
    measured_runs = sum(v == "identical" for p in per for v in p["verdicts"])
    assert failed_runs == 3 and measured_runs == 3
    # only the finished runs have a rate, a ratio or counters: 3 of the 6
    assert sum(len(p["speedups"]) for p in per) == 3
    assert sum(len(p["decode_tps"]["candidate"]) for p in per) == 3
    assert doc["derived"]["acceptance"]["drafted"] == 3 * recorded_counts(DRAFT)["drafted"]
    assert doc["derived"]["speedup"]["overall"]["runs"] == 3


def test_shards_merged_equal_the_unsharded_certificate(tmp_path, capsys):
    items = prompts(5)
    whole = prove(tmp_path / "whole", items=items, sampled=2, samples=3)
    shard_paths = []
    for i in (1, 2, 3):
        d = prove(tmp_path / f"s{i}", items=items, sampled=2, samples=3, shard=Shard(i, 3))
        assert d["inputs"]["share"] == [p.id for k, p in enumerate(items) if k % 3 == i - 1]
        # the sampled prompts are positions 0 and 2 of the set: shard 2 (positions 1, 4) samples none
        assert (d["derived"]["sampled"] is None) == (i == 2)
        shard_paths.append(str(tmp_path / f"s{i}" / "certificate.json"))
    assert main(["merge", *shard_paths, "-o", str(tmp_path / "merged.json")]) == 0
    assert capsys.readouterr().out.startswith("IDENTICAL on 5/5")
    merged = certificate.load(tmp_path / "merged.json")
    valid(merged)
    # the same raw data: every verdict, count, interval and the verdict line are equal
    assert merged["derived"] == whole["derived"]
    assert merged["verdict"] == whole["verdict"]
    assert len(merged["sessions"]) == 3 + 2  # three greedy shards; the sampled prompts fell in two of them
    assert main(["verify", str(tmp_path / "merged.json")]) == 0
    capsys.readouterr()
    # a missing shard is refused, named
    assert main(["merge", *shard_paths[:2], "-o", str(tmp_path / "m2.json")]) == 2
    assert "missing: 3/3" in capsys.readouterr().err


def test_merge_refuses_shards_of_different_prompt_sets(tmp_path, capsys):
    a = prove(tmp_path / "a", items=prompts(4), sampled=0, shard=Shard(1, 2))
    b = prove(tmp_path / "b", items=prompts(5), sampled=0, shard=Shard(2, 2))
    assert main(["merge", a["_path"], b["_path"], "-o", str(tmp_path / "m.json")]) == 2
    assert "differ in prompt_set" in capsys.readouterr().err


def test_regress_same_configuration_is_no_regression(made, tmp_path, capsys):
    out, _ = made
    again = prove(tmp_path / "again", sampled=1, samples=4)
    assert main(["regress", str(out / "certificate.json"), again["_path"]]) == 0
    assert capsys.readouterr().out.startswith("NO REGRESSION")


def drafting(stream: Path, n_max: int) -> ReplayBackend:
    """The recorded stream from a candidate whose server reports drafting n_max tokens (llama-server /props)."""
    import dataclasses

    info = dataclasses.replace(INFO, speculative={"type": "draft-simple", "n_max": n_max})
    return ReplayBackend("replay://c", payloads(stream), info, virtual_ms_per_event=12.5)


def test_regress_reports_lower_acceptance_and_exits_4(tmp_path, capsys):
    old = prove(tmp_path / "old", baseline=payloads(DRAFT), candidate=drafting(DRAFT, 8), sampled=0)
    new = prove(tmp_path / "new", baseline=payloads(EMOJI), candidate=drafting(EMOJI, 8), sampled=0)
    o, n = old["derived"]["acceptance"], new["derived"]["acceptance"]
    assert n["mean_accepted_length"]["value"] < o["mean_accepted_length"]["value"]  # the recordings' own counts
    assert main(["regress", old["_path"], new["_path"]]) == 4
    text = capsys.readouterr().out
    assert text.startswith("REGRESSION: mean accepted length")
    row = next(line for line in text.splitlines() if line.startswith("mean accepted length"))
    assert "lower beyond the intervals" in row and "◀ REGRESSION" in row


def test_regress_new_divergence_exits_4(made, tmp_path, capsys):
    out, _ = made
    stream = payloads(BASELINE)
    k = next(i for i, p in enumerate(stream) if p.get("content"))
    new = prove(tmp_path / "n", candidate=changed(stream, k, "\u00a7"), sampled=1, samples=4)
    assert main(["regress", str(out / "certificate.json"), new["_path"]]) == 4
    assert "new divergence on code-fizzbuzz, edit-fix-typos, summary-notice" in capsys.readouterr().out


def test_regress_does_not_judge_a_speed_up_measured_one_at_a_time_against_one_measured_side_by_side(
    made, tmp_path, capsys
):
    out, doc = made
    old = {k: v for k, v in doc.items() if k != "_path"}
    new = json.loads(json.dumps(old))
    sp = new["derived"]["speedup"]["overall"]
    assert sp and sp.get("low") is not None  # the recorded set has an interval to be apart from
    # the same certificate measured one server at a time, and its speed-up far below the old interval
    new["derived"]["one_at_a_time"] = {"servers": "one at a time", "line": "measured one after the other"}
    width = sp["high"] - sp["low"]
    for key in ("value", "low", "high"):
        sp[key] = sp[key] - 2 * width - 0.5 * sp["low"]
    assert sp["high"] < old["derived"]["speedup"]["overall"]["low"] and sp["low"] > 0
    path = tmp_path / "alone.json"
    path.write_text(json.dumps(new), encoding="utf-8")
    # hand-made, it does not verify: regress refuses it unless told to compare it as it is
    assert main(["regress", str(out / "certificate.json"), str(path)]) == 2
    said = capsys.readouterr().out
    assert said.startswith("INCOMPARABLE: the new certificate does not verify: ") and "--no-verify" in said
    # not judged is never a pass: the pair is INCOMPARABLE (exit 2), the row saying why
    assert main(["regress", str(out / "certificate.json"), str(path), "--no-verify"]) == 2
    said = capsys.readouterr().out
    assert said.startswith("INCOMPARABLE: nothing worse found, but speed-up measured both servers up vs one")
    row = next(line for line in said.splitlines() if line.startswith("speed-up"))
    assert "measured both servers up vs one server at a time: not judged" in row and "REGRESSION" not in row
    # and the same figures both measured one at a time are judged
    old["derived"]["one_at_a_time"] = new["derived"]["one_at_a_time"]
    both = tmp_path / "old-alone.json"
    both.write_text(json.dumps(old), encoding="utf-8")
    assert main(["regress", str(both), str(path), "--no-verify"]) == 4
    assert "speed-up worse than" in capsys.readouterr().out


def test_regress_refuses_an_edited_certificate_that_verify_rejects(made, tmp_path, capsys):
    out, doc = made
    copy = tmp_path / "edited"
    shutil.copytree(out, copy)
    cert = json.loads((copy / "certificate.json").read_text(encoding="utf-8"))
    cert["derived"]["acceptance"]["accepted"] += 1  # a figure edited by hand: the sessions say otherwise
    (copy / "certificate.json").write_text(json.dumps(cert), encoding="utf-8")
    assert main(["regress", str(out / "certificate.json"), str(copy / "certificate.json")]) == 2
    text = capsys.readouterr().out
    assert text.startswith("INCOMPARABLE: the new certificate does not verify: ") and "accepted" in text, text
    assert main(["regress", str(copy / "certificate.json"), str(out / "certificate.json")]) == 2
    assert capsys.readouterr().out.startswith("INCOMPARABLE: the old certificate does not verify: ")


def test_regress_on_different_prompt_sets_is_incomparable(made, tmp_path, capsys):
    out, _ = made
    other = prove(tmp_path / "o", items=prompts(2), sampled=0)
    assert main(["regress", str(out / "certificate.json"), other["_path"]]) == 2
    assert capsys.readouterr().out.startswith("INCOMPARABLE: different prompt sets")


def test_shard_and_sample_choices_are_deterministic():
    assert parse_shard("2/3") == Shard(2, 3)
    for bad in ("0/3", "4/3", "x", "1/0", "1-3"):
        with pytest.raises(Exception, match="--shard"):
            parse_shard(bad)
    shares = [[k for k in range(10) if Shard(i, 3).takes(k)] for i in (1, 2, 3)]
    assert sorted(sum(shares, [])) == list(range(10)) and shares[0] == [0, 3, 6, 9]
    assert sampled_positions(48, 8) == [0, 6, 12, 18, 24, 30, 36, 42]
    assert sampled_positions(3, 8) == [0, 1, 2] and sampled_positions(5, 0) == []


def test_an_existing_certificate_folder_is_not_overwritten(made, capsys):
    out, _ = made
    code = main(["prove", "--baseline", "http://127.0.0.1:9", "--candidate", "http://127.0.0.1:9", "-o", str(out)])
    assert code == 2
    assert "exists: not overwriting" in capsys.readouterr().err


def test_the_notebook_gets_one_entry_per_certificate(made, tmp_path):
    from spectui.store import notebook

    _, doc = made
    path = tmp_path / "nb.toml"
    notebook.append(path, [notebook.certificate_entry(doc)])
    [row] = notebook.read(path)
    assert row["kind"] == "certificate" and row["verdict_line"] == doc["verdict"]["line"]
    assert row["identical_prompts"] == 3 and row["verdict"] == "identical"
    assert row["speedup"] == round(doc["derived"]["speedup"]["overall"]["value"], 4)
    assert "identical" in notebook.show_text(path)
