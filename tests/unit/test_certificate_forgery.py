"""Forgeries made with spectui's own functions (tests/unit/forger.py: hashes recomputed, figures rebuilt with
certificate.build, renderings redrawn): each of the attacks a forger tried against certificates of a plain
llama-server and a draft-simple candidate (recorded streams of both, replayed at their recorded pace, two
prompts, two runs each, the machine probed). Each must be refused in one line: verify non-zero, regress
4 or 2, merge before it writes anything. The unedited original, rebuilt, is the original byte for byte."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
from pathlib import Path

import pytest

from spectui.backends.recorded import ReplayBackend
from spectui.cli.compare import machine_sampler
from spectui.cli.main import main
from spectui.core.types import GenerationParams
from spectui.run.prove import certificate
from spectui.run.prove.prove import ProveOptions, Prover
from spectui.run.prove.regress import EXIT_NO_REGRESSION, regress
from spectui.run.prove.shard import Shard
from tests.recordings import BASELINE, DRAFT, INFO, payloads
from tests.unit.forger import Forger, blocks, events, refusal
from tests.unit.test_certificate import prompts


def make(out: Path, candidate=DRAFT, runs: int = 2, n: int = 2, sampled: int = 1, shard=None, info=INFO) -> Path:
    b = ReplayBackend("replay://b", payloads(BASELINE), INFO, virtual_ms_per_event=12.5)
    c = ReplayBackend("replay://c", payloads(candidate), info, virtual_ms_per_event=12.5)
    options = ProveOptions(runs=runs, triage=False, hash_files=False, sampled=sampled, samples=3, shard=shard)
    params = GenerationParams(max_tokens=64, cache_prompt=False)
    prover = Prover(b, c, params, prompts(n), "default", out, options, machine=machine_sampler())
    return Path(asyncio.run(prover.run())["_path"])


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Path:
    path = make(tmp_path_factory.mktemp("forge") / "c")
    assert refusal(path) is None  # the original verifies
    return path.parent


@pytest.fixture
def forger(original, tmp_path) -> Forger:
    return Forger(original, tmp_path / "f")


def refused(path: Path, capsys=None) -> str:
    why = refusal(path)
    assert why is not None, "the forgery verified"
    assert "\n" not in why
    if capsys is not None:  # the command line too: non-zero, no traceback
        code = main(["verify", str(path)])
        said = capsys.readouterr()
        assert code != 0 and "Traceback" not in said.out + said.err
    return why


def test_an_unedited_original_rebuilt_is_the_original_byte_for_byte(original, forger):
    forger.rebuild()
    for name in (certificate.CERT_NAME, certificate.MD_NAME, certificate.HTML_NAME):
        assert (forger.dir / name).read_bytes() == (original / name).read_bytes(), name


# -- recorded figures trusted without range or cross-checks -------------------------------------------
def _finishes(recs, side="candidate"):
    return [r for r in events(recs, side) if r["ev"] == "finish"]


def test_a_decode_time_divided_by_five_is_refused(forger, capsys):
    forger.edit(
        lambda recs: [f["timings"].update(predicted_ms=f["timings"]["predicted_ms"] / 5) for f in _finishes(recs)]
    )
    assert "predicted_ms" in refused(forger.rebuild(), capsys)


@pytest.mark.parametrize("value", [1e-300, "NaN", "Infinity", -5.0])
def test_an_impossible_decode_time_is_refused(forger, value):
    forger.edit(lambda recs: [f["timings"].update(predicted_ms=value) for f in _finishes(recs)])
    assert "predicted_ms" in refused(forger.rebuild())


def test_per_position_counts_above_the_steps_are_refused(forger):
    def edit(recs):
        for r in recs:
            if r.get("type") == "result":
                r["candidate"]["accepted_per_position"] = [50, 50, 50, 50]

    forger.edit(edit)
    assert "accepted_per_position" in refused(forger.rebuild())


def test_metrics_counts_that_disagree_with_the_step_events_are_refused(forger):
    def edit(recs):
        for r in recs:
            if r.get("type") == "result":
                drafted = sum(e["drafted"] for e in events(recs, "candidate", r["n"]) if e["ev"] == "step")
                r["candidate"].update(metrics_drafted=drafted, metrics_accepted=drafted, metrics_steps=10)

    forger.edit(edit)
    assert "disagree with its step events" in refused(forger.rebuild())


def test_both_outputs_cut_short_while_the_finishes_say_more_is_refused(forger):
    def edit(recs):
        drop = set()
        for side in ("baseline", "candidate"):
            for n in {r["n"] for r in events(recs)}:
                toks = [r for r in events(recs, side, n) if r["ev"] == "token"]
                drop |= {id(r) for r in toks[-8:]}
        return [r for r in recs if id(r) not in drop]

    forger.edit(edit)
    assert "tokens arrived" in refused(forger.rebuild())


def test_events_with_negative_times_are_refused(forger):
    def edit(recs):
        for r in events(recs, n=0):
            r["t"] -= 10**12

    forger.edit(edit)
    assert "negative times" in refused(forger.rebuild())


# -- structure never derived ----------------------------------------------------------------------------
def test_baseline_and_candidate_swapped_in_the_events_are_refused(forger):
    def edit(recs):
        for r in recs:
            if r.get("type") == "event":
                r["side"] = {"baseline": "candidate", "candidate": "baseline"}[r["side"]]
            elif r.get("type") == "result":
                r["baseline"], r["candidate"] = r["candidate"], r["baseline"]

    forger.edit(edit)
    forger.edit(edit, "sampled.jsonl")
    why = refused(forger.rebuild())
    assert "speculation" in why or "went first" in why, why


def test_overlapping_sequential_streams_are_refused(forger):
    def edit(recs):
        for n in {r["n"] for r in events(recs)}:
            b0 = events(recs, "baseline", n)[0]["t"]
            c = events(recs, "candidate", n)
            shift = c[0]["t"] - b0 - 1000
            for r in c:
                r["t"] -= shift

    forger.edit(edit)
    assert "overlap" in refused(forger.rebuild())


def test_the_wrong_side_first_is_refused(forger):
    """Run 2 of a sequential pair starts with the candidate (C B): one stream moved before the other."""

    def edit(recs):
        for n in {r["n"] for r in events(recs)}:
            b, c = events(recs, "baseline", n), events(recs, "candidate", n)
            first, second = (b, c) if b[0]["t"] < c[0]["t"] else (c, b)
            gap = second[0]["t"] - first[0]["t"]
            span = second[-1]["t"] - second[0]["t"]
            for r in second:
                r["t"] -= gap
            for r in first:
                r["t"] += span + 1000

    forger.edit(edit)
    assert "went first" in refused(forger.rebuild())


def test_run_two_copied_as_run_three_is_refused(forger):
    def edit(recs):
        out = list(recs)
        top = max(r.get("n", 0) for r in recs if "n" in r) + 1
        for a, b in blocks(recs):
            block = recs[a:b]
            result = next((r for r in block if r.get("type") == "result"), None)
            if result is None or result.get("run") != 2:
                continue
            for r in copy.deepcopy([x for x in block if x.get("type") in ("prompt", "event", "result")]):
                r["n"] = top
                if r["type"] == "result":
                    r["run"] = 3
                out.append(r)
            top += 1
        for r in out:
            if r.get("type") == "result":
                r["runs"] = 3
        return out

    forger.edit(edit)
    why = refused(forger.rebuild(inputs={**forger.doc["inputs"], "runs": 3}))
    assert "the same recording as" in why or "went first" in why, why


@pytest.mark.parametrize("field,value", [("build", "b99999"), ("model", "other.gguf"), ("n_ctx", 1)])
def test_a_server_that_changed_mid_run_is_refused(forger, field, value):
    def edit(recs):
        at = next(i for i, r in enumerate(recs) if r.get("type") == "result")
        servers = copy.deepcopy(next(r for r in recs if r.get("type") == "servers"))
        servers["candidate"][field] = value
        recs.insert(at + 1, servers)

    forger.edit(edit)
    assert "changed between its servers records" in refused(forger.rebuild())


def test_a_candidate_whose_speculation_changed_mid_run_is_refused(forger):
    def edit(recs):
        fin = _finishes(recs)[-1]
        fin["settings"]["speculative.types"] = "none,ngram-mod"

    forger.edit(edit)
    assert "different speculation" in refused(forger.rebuild())


# -- stated fields decide ---------------------------------------------------------------------------------
def test_a_stated_probabilistic_draft_sampling_never_relaxes_the_promise():
    """The sampled verdict's promise: what the sessions show, or the stated command line only where that
    promises more. `--spec-draft-sampling probabilistic` added to the stated argv cannot turn a seeded
    mismatch into a distribution test."""
    from spectui.run.prove.sampled import promised  # the function under test (named here: older code lacks it)

    info = dataclasses.replace(INFO, backend="llama.cpp", speculative={"type": "draft-simple"})
    argv = ["llama-server", "-m", "m.gguf", "-md", "d.gguf", "--spec-type", "draft-simple"]
    greedy = promised("llama.cpp", info, argv)
    forged = promised("llama.cpp", info, [*argv, "--spec-draft-sampling", "probabilistic"])
    assert greedy.promise == "seeded bytes"  # stated, and stricter: kept
    assert forged.promise == "seeded bytes" and "not relied on" in forged.why
    bare = promised("llama.cpp", info, None)  # nothing stated: the server's default drafting, greedy
    assert bare.promise == "seeded bytes" and bare.drafting == "greedy"


# -- regress ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    """OLD: the plain server against itself; NEW: against the draft candidate (slower: a speed-up regression,
    nothing else worse)."""
    root = tmp_path_factory.mktemp("pair")
    old = make(root / "old", candidate=BASELINE, sampled=0)
    new = make(root / "new", candidate=DRAFT, sampled=0)
    assert regress(old, new).code == 4
    return old, new


def _regress_forged(pair, tmp_path, **kw) -> int:
    old, new = pair
    f = Forger(new.parent, tmp_path / "new")
    f.rebuild(**kw)
    r = regress(old, f.path)
    assert "\n" not in r.reason
    return r.code


def test_regress_a_renamed_cpu_is_not_a_pass(pair, tmp_path):
    f_doc = certificate.load(pair[1])
    mo = copy.deepcopy({k: v for k, v in f_doc.items() if k != "_path"}["measured_on"])
    mo["hardware"]["cpu"] = "Another CPU 9000"
    assert _regress_forged(pair, tmp_path, measured_on=mo) in (2, 4)


def test_regress_an_edited_model_sha256_is_not_a_pass(pair, tmp_path):
    mo = copy.deepcopy(certificate.load(pair[1])["measured_on"])
    mo["servers"]["candidate"]["model_file"] = {"path": "m.gguf", "identity": "sha256", "sha256": "ab" * 32}
    assert _regress_forged(pair, tmp_path, measured_on=mo) in (2, 4)


def test_regress_relabelled_one_at_a_time_is_not_a_pass(pair, tmp_path):
    old, new = pair
    f = Forger(new.parent, tmp_path / "new")

    def edit(recs):
        for r in recs:
            if r.get("type") == "prompt":
                r["order"] = "one-at-a-time"

    f.edit(edit)
    inputs = copy.deepcopy(f.doc["inputs"])
    inputs["params"]["order"] = "one-at-a-time"
    inputs["one_at_a_time"] = {"why": "forged", "triage": "skipped"}
    f.rebuild(inputs=inputs)
    r = regress(old, f.path)
    assert r.code in (2, 4), r.text()


def test_regress_a_new_made_with_one_run_is_judged(tmp_path):
    """The same pair, NEW with --runs 1: the speed-up is judged on its interval over the prompts (or the pair
    is INCOMPARABLE), never a pass."""
    old = make(tmp_path / "old", candidate=BASELINE, sampled=0, n=3)
    new = make(tmp_path / "new", candidate=DRAFT, sampled=0, n=3, runs=1)
    r = regress(old, new)
    assert r.code != EXIT_NO_REGRESSION, r.text()


def test_regress_acceptance_at_temperature_zero_is_exact_with_one_run(tmp_path):
    from spectui.run.prove.regress import _lower

    low, how = _lower({"value": 0.9, "low": None, "high": None}, {"value": 0.72, "low": None, "high": None}, exact=True)
    assert low and "exact" in how
    low, _ = _lower({"value": 0.9, "low": None, "high": None}, {"value": 0.9, "low": None, "high": None}, exact=True)
    assert not low


# -- merge -----------------------------------------------------------------------------------------------
def _shards(root: Path, second_info=INFO) -> list[Path]:
    return [
        make(root / "s1", n=4, sampled=0, shard=Shard(1, 2)),
        make(root / "s2", n=4, sampled=0, shard=Shard(2, 2), info=second_info),
    ]


def _merge_refused(paths, out: Path, capsys, words: str) -> None:
    assert main(["merge", *map(str, paths), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists() and not out.with_suffix(".md").exists()
    assert not any(p.name.startswith("shard-") for p in out.parent.iterdir()), "copied before refusing"


def test_merge_refuses_shards_of_two_candidates(tmp_path, capsys):
    other = dataclasses.replace(INFO, speculative={"type": "draft-simple", "n_max": 2})
    paths = _shards(tmp_path, other)
    (tmp_path / "out").mkdir()
    _merge_refused(paths, tmp_path / "out" / "m.json", capsys, "differs")


def test_merge_refuses_shards_whose_candidates_were_launched_differently(tmp_path, capsys):
    """llama-server b11434 reports no n-max (GET /props: speculative.types "none"): the shards' stated command
    lines (--spec-draft-n-max 4 and 2) are what differs, and a stated field may refuse a merge."""
    paths = _shards(tmp_path)
    forged = []
    for i, n_max in enumerate((4, 2)):
        f = Forger(paths[i].parent, tmp_path / f"n{i}")
        mo = copy.deepcopy(f.doc["measured_on"])
        mo["servers"]["candidate"]["launch_argv"] = ["llama-server", "--spec-draft-n-max", str(n_max)]
        f.rebuild(measured_on=mo)
        assert refusal(f.path) is None  # stated: each verifies by itself
        forged.append(f.path)
    (tmp_path / "out").mkdir()
    _merge_refused(forged, tmp_path / "out" / "m.json", capsys, "launch_argv differs")


def test_merge_refuses_shards_on_different_model_files_of_one_name(tmp_path, capsys):
    paths = _shards(tmp_path)
    f = Forger(paths[1].parent, tmp_path / "s2f")
    mo = copy.deepcopy(f.doc["measured_on"])
    mo["servers"]["candidate"]["model_file"] = {"path": "model.gguf", "identity": "sha256", "sha256": "cd" * 32}
    f.rebuild(measured_on=mo)
    first = Forger(paths[0].parent, tmp_path / "s1f")
    mo1 = copy.deepcopy(first.doc["measured_on"])
    mo1["servers"]["candidate"]["model_file"] = {"path": "model.gguf", "identity": "sha256", "sha256": "ab" * 32}
    first.rebuild(measured_on=mo1)
    (tmp_path / "out").mkdir()
    _merge_refused([first.path, f.path], tmp_path / "out" / "m.json", capsys, "another file")


def test_a_share_that_is_not_its_index_does_not_verify_and_is_not_merged(tmp_path, capsys):
    paths = _shards(tmp_path)
    f = Forger(paths[1].parent, tmp_path / "s2f")
    inputs = copy.deepcopy(f.doc["inputs"])
    inputs["shard"] = {"index": 1, "of": 2}  # says 1/2, holds 2/2's prompts
    f.rebuild(inputs=inputs)
    assert "inputs.share" in refused(f.path)
    (tmp_path / "out").mkdir()
    _merge_refused([paths[0], f.path], tmp_path / "out" / "m.json", capsys, "given twice")


def test_swapped_shard_indices_are_refused(tmp_path, capsys):
    paths = _shards(tmp_path)
    forged = []
    for i, p in enumerate(paths):
        f = Forger(p.parent, tmp_path / f"x{i}")
        inputs = copy.deepcopy(f.doc["inputs"])
        inputs["shard"] = {"index": 2 - i, "of": 2}
        f.rebuild(inputs=inputs)
        assert "inputs.share" in refused(f.path)
        forged.append(f.path)
    (tmp_path / "out").mkdir()
    _merge_refused(forged, tmp_path / "out" / "m.json", capsys, "does not verify")


# -- the JSON itself --------------------------------------------------------------------------------------
def test_a_duplicate_key_is_refused(forger, capsys):
    text = forger.path.read_text(encoding="utf-8")
    forged = text.replace('"verdict": {', '"verdict": {"line": "IDENTICAL FASTER 5.00×", ', 1)
    assert forged != text
    why = refused(forger.write_text(forged), capsys)
    assert "given twice" in why


def test_an_unknown_top_level_field_is_refused(forger):
    doc = dict(forger.doc, note="spectui certifies this candidate 5× faster")
    assert "note" in refused(forger.write_doc(doc))


def test_free_text_as_the_terms_skip_reason_is_refused(forger):
    assert "terms" in refused(forger.rebuild(after=lambda d: d.update(terms={"skipped": "FASTER 5.00× certified"})))


@pytest.mark.parametrize(
    "what,edit",
    [
        ("runs = 10**400", lambda t: t.replace('"runs": 2', '"runs": 1' + "0" * 400, 1)),
        ("runs = 3e8", lambda t: t.replace('"runs": 2', '"runs": 3e8', 1)),
        (
            "a NUL byte in a session path",
            lambda t: t.replace('"path": "greedy.jsonl"', '"path": "greedy\\u0000.jsonl"', 1),
        ),
    ],
)
def test_out_of_range_values_are_one_line(forger, capsys, what, edit):
    text = forger.path.read_text(encoding="utf-8")
    forged = edit(text)
    assert forged != text, what
    forger.write_text(forged)
    code = main(["verify", str(forger.path)])
    said = capsys.readouterr()
    assert code in (1, 2) and "Traceback" not in said.out + said.err, what
    if code == 2:
        assert len(said.err.strip().splitlines()) == 1, said.err
    assert refusal(forger.path) is not None


def test_a_nul_byte_in_the_certificate_path_is_one_line(capsys):
    assert main(["verify", "cert\x00.json"]) == 2
    said = capsys.readouterr()
    assert "Traceback" not in said.err and len(said.err.strip().splitlines()) == 1
    # the file named in the merged output is json: the check holds for merge's inputs too
    assert json.dumps("x")
