"""`spectui prove`, `verify`, `regress` and `merge` on real llama-servers (SmolLM2, 1 thread each).

Expected values come from the servers (their /metrics deltas), from the raw session lines, or from a hand
computation here; small sets and few tokens keep each run to seconds on 2 shared cores.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from spectui.cli.main import main
from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv
from tests.conftest import CANDIDATES, COPYING, DRAFT_N_MAX, _need_assets
from tests.oracles import first_difference

ROOT = Path(__file__).resolve().parents[2]


def metrics(url: str) -> dict[str, float]:
    """The server's /metrics page as {name or name{position="i"}: value}, read with prometheus_client."""
    out = {}
    for fam in text_string_to_metric_families(httpx.get(url + "/metrics", timeout=10).text):
        for s in fam.samples:
            key = s.name + (f'{{position="{s.labels["position"]}"}}' if "position" in s.labels else "")
            out[key] = s.value
    return out


def prove(capsys, baseline: str, candidate: str, out: Path, *extra: str) -> tuple[int, str, dict]:
    code = main(["prove", "--baseline", baseline, "--candidate", candidate, "-o", str(out), "--no-notebook", *extra])
    text = capsys.readouterr().out
    return code, text, json.loads((out / "certificate.json").read_text(encoding="utf-8"))


def alpha_by_hand(accepted: float, drafted: float, steps: float) -> float:
    """Leviathan's α: α(1 − α^γ)/(1 − α) = accepted/steps at γ = drafted/steps (FACTS), solved with scipy."""
    from scipy.optimize import brentq

    gamma, target = drafted / steps, accepted / steps
    return brentq(lambda a: a * (1 - a**gamma) / (1 - a) - target, 1e-12, 1 - 1e-12, xtol=1e-14)


@pytest.fixture(scope="module")
def draft_cert(llama_servers, tmp_path_factory):
    """baseline vs draft-simple (n-max 8) on the quick set, 2 interleaved runs, 16 tokens (0.45–0.51× here:
    no promise below needs more, and the servers' decoding is most of the suite's CPU); the candidate's
    /metrics read before and after (nothing else asks it in between: greedy only, nothing to triage). The
    measured terms are test_prove_terms.py's promise: --no-terms here, as in every prove below that is not
    about them (each measurement launches servers of its own and times batches on them)."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("prove") / "draft"
    before = metrics(llama_servers["draft"])
    buf = io.StringIO()  # capsys is per test: this module-scoped run reads stdout itself
    with contextlib.redirect_stdout(buf):
        code = main(
            ["prove", "--baseline", llama_servers["baseline"], "--candidate", llama_servers["draft"]]
            + ["--prompts", "quick", "--max-tokens", "16", "--runs", "2", "--sampled", "0", "--no-terms"]
            + ["-o", str(out), "--no-notebook"]
        )
    after = metrics(llama_servers["draft"])
    doc = json.loads((out / "certificate.json").read_text(encoding="utf-8"))
    return code, buf.getvalue(), doc, out, before, after


def test_draft_simple_is_identical_slower_here_and_its_acceptance_is_the_servers(draft_cert):
    code, text, doc, _, before, after = draft_cert
    assert code == 0
    print("draft-simple prove:", text.splitlines()[0])
    sp = doc["derived"]["speedup"]["overall"]
    assert sp["value"] < 1.0  # on a CPU a draft model costs more than it saves
    # the word is the interval's, not this test's hope: 2 runs of 2 prompts at 16 tokens gave 0.32-0.33x
    # [0.30-0.36] in three runs of this test alone, and 0.39x [0.15-1.05] once in a whole suite, a run stalled by
    # the other pytest worker (the README's rule: an interval holding 1.00 is no measurable difference; a point
    # this far below 1 cannot fall within its ±2 % band)
    word = "SLOWER" if sp["high"] < 1.0 else "NO MEASURABLE DIFFERENCE"
    assert text.splitlines()[0].startswith(f"IDENTICAL on 2/2 (greedy) · {word} ")
    assert text.splitlines()[0].endswith("on this CPU")
    acc = doc["derived"]["acceptance"]

    def d(name):
        return after[f"llamacpp:{name}"] - before[f"llamacpp:{name}"]

    drafted, accepted = d("spec_decode_num_draft_tokens_total"), d("spec_decode_num_accepted_tokens_total")
    steps = d("spec_decode_num_drafts_total")
    assert (acc["drafted"], acc["accepted"], acc["steps"]) == (drafted, accepted, steps)
    assert acc["alpha"]["value"] == pytest.approx(alpha_by_hand(accepted, drafted, steps), abs=1e-9)
    assert acc["mean_accepted_length"]["value"] == pytest.approx(1 + accepted / steps)
    positions = sorted(
        (int(k.split('"')[1]), after[k] - before.get(k, 0.0)) for k in after if "per_pos" in k and "position=" in k
    )
    assert [q["accepted"] for q in acc["per_position"]] == [v for _, v in positions][: len(acc["per_position"])]
    for q, (_, v) in zip(acc["per_position"], positions):
        assert q["value"] == pytest.approx(v / steps)
    # both servers' builds, flags and files, as measured
    c = doc["measured_on"]["servers"]["candidate"]
    assert c["launch_flags"]["spec"] == "draft-simple" and c["launch_flags"]["n_max"] == str(DRAFT_N_MAX)
    assert len(c["draft_file"]["sha256"]) == 64 and c["model_file"]["identity"] == "sha256"
    assert doc["measured_on"]["hardware"]["gpus"] == [] and doc["measured_on"]["hardware"]["cores_logical"] >= 1


def test_verify_passes_and_names_a_changed_byte_or_figure(draft_cert, tmp_path, capsys):
    *_, out, _, _ = draft_cert
    assert main(["verify", str(out)]) == 0
    assert capsys.readouterr().out.startswith("VERIFIED")
    one = tmp_path / "one"
    shutil.copytree(out, one)
    raw = bytearray((one / "greedy.jsonl").read_bytes())
    at = raw.index(b'"ev":"token"')
    raw[at - 3] = raw[at - 3] ^ 1  # one byte of the first token record
    (one / "greedy.jsonl").write_bytes(bytes(raw))
    assert main(["verify", str(one)]) == 1
    assert "session greedy.jsonl: sha256" in capsys.readouterr().out
    two = tmp_path / "two"
    shutil.copytree(out, two)
    doc = json.loads((two / "certificate.json").read_text(encoding="utf-8"))
    doc["derived"]["greedy"]["per_prompt"][1]["speedups"][0] *= 1.5
    (two / "certificate.json").write_text(json.dumps(doc), encoding="utf-8")
    assert main(["verify", str(two)]) == 1
    assert "derived.greedy.per_prompt[1].speedups[0]: the certificate says" in capsys.readouterr().out


def test_ngram_on_a_copying_set_is_identical_and_accepts_most(llama_servers, tmp_path, capsys):
    code, text, doc = prove(
        capsys,
        llama_servers["baseline"],
        llama_servers["ngram"],
        tmp_path / "ngram",
        "--prompts",
        str(COPYING),
        "--max-tokens",
        "32",
        "--runs",
        "1",
        "--sampled",
        "0",
        "--no-terms",
    )
    assert code == 0 and text.startswith("IDENTICAL on 2/2 (greedy)")
    acc = doc["derived"]["acceptance"]
    assert acc["drafted"] > 0 and acc["accepted"] / acc["drafted"] > 0.8, acc


def test_q4_kv_cache_is_different_with_byte_offsets_and_causes(llama_servers, tmp_path, capsys):
    code, text, doc = prove(
        capsys,
        llama_servers["baseline"],
        llama_servers["kvq4"],
        tmp_path / "kvq4",
        "--prompts",
        "quick",
        "--max-tokens",
        "32",  # q4_0 parts from f16 at bytes 39 and 84 of the two quick prompts (about token 20): both differ
        "--runs",
        "1",
        "--sampled",
        "0",
        "--no-terms",
    )
    assert code == 3 and text.startswith("DIFFERENT on ")
    diffs = doc["derived"]["differences"]
    assert diffs and doc["derived"]["greedy"]["differs"] == len(diffs)
    outputs = session_outputs(tmp_path / "kvq4" / "greedy.jsonl")
    for dd in diffs:
        b, c = outputs[dd["id"]]
        assert dd["byte"] == first_difference(b, c)  # the offset, found here from the raw session lines
        assert dd["cause"] in ("configuration", "near-tie", "nondeterminism", "cache"), dd
    causes = sorted({dd["cause"] for dd in diffs})
    assert f"cause{'s' if len(causes) > 1 else ''}: " in text.splitlines()[0]


def session_outputs(path: Path) -> dict[str, tuple[bytes, bytes]]:
    """Each prompt's output bytes per side, from the raw session lines (first run of each prompt)."""
    found: dict[str, dict[str, bytes]] = {}
    current = None
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        rec = json.loads(line)
        if rec.get("type") == "prompt":
            current = rec["prompt"]["id"] if rec["prompt"]["id"] not in found else None
            if current:
                found[current] = {"baseline": b"", "candidate": b""}
        elif rec.get("type") == "event" and current:
            if rec["ev"] == "token":
                found[current][rec["side"]] += rec["d"].encode() if "d" in rec else bytes.fromhex(rec["x"])
            elif rec["ev"] == "finish":
                found[current][rec["side"]] += (
                    rec["tail"].encode() if "tail" in rec else bytes.fromhex(rec.get("tail_x", ""))
                )
    return {k: (v["baseline"], v["candidate"]) for k, v in found.items()}


def test_regress_does_not_judge_a_shorter_draft_on_mean_accepted_length(draft_cert, llama_servers, tmp_path, capsys):
    """n-max DRAFT_N_MAX → 2: mean accepted length (1 + Σᵢ P(positions 1…i accepted)) falls by itself when fewer
    positions are drafted, so it is shown, not judged; positions 1 and 2, drafted by both, are."""
    *_, out, _, _ = draft_cert
    args = ("--prompts", "quick", "--max-tokens", "16", "--runs", "2", "--sampled", "0", "--no-terms")
    code, _, same = prove(capsys, llama_servers["baseline"], llama_servers["draft"], tmp_path / "same", *args)
    assert code == 0
    assert main(["regress", str(out), str(tmp_path / "same")]) == 0
    assert capsys.readouterr().out.startswith("NO REGRESSION")
    found = _need_assets()
    extra = ["-md", str(found.draft_model), "--spec-type", "draft-simple", "--spec-draft-n-max", "2"]
    with Launcher() as launcher:
        short = launcher.add(ServerProcess("nmax2", llama_server_argv(found.llama_server, found.model, 0, extra=extra)))
        short.argv[short.argv.index("--port") + 1] = str(short.port)
        launcher.start_all(timeout=120)
        code, _, new = prove(capsys, llama_servers["baseline"], short.url, tmp_path / "nmax2", *args)
    assert code == 0  # still identical: only the acceptance changed
    old_len = json.loads((out / "certificate.json").read_text())["derived"]["acceptance"]["mean_accepted_length"]
    new_len = new["derived"]["acceptance"]["mean_accepted_length"]
    assert new_len["value"] < old_len["value"] and new_len["value"] <= 3  # at most 2 drafts accepted a step
    code = main(["regress", str(out), str(tmp_path / "nmax2")])
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith("mean accepted length"))
    assert f"draft length changed ({DRAFT_N_MAX} → 2): not judged" in row and "◀" not in row, text
    assert "mean accepted length" not in text.splitlines()[0]
    positions = [line for line in text.splitlines() if line.startswith("acceptance at position")]
    assert [p.split()[3] for p in positions] == ["1", "2"]  # the positions both drafted, each judged
    assert all("interval" in p for p in positions), text  # on their intervals
    # the exit status is the rows' verdict: whether the acceptance at 1 and 2 moves with the draft length is this
    # prompt set's finding (with n-max 8 → 2 both held; with 4 → 2 position 1 fell from 88.9 % to 75.0 % accepted,
    # the steps starting elsewhere in the text), not this test's
    flagged = [line for line in text.splitlines() if line.rstrip().endswith("◀ REGRESSION")]
    assert code == (4 if flagged else 0) and text.startswith("REGRESSION" if flagged else "NO REGRESSION"), text
    assert len(new["derived"]["acceptance"]["per_position"]) <= 2  # the server drafted 2 positions at most


def test_shards_in_separate_processes_merge_to_the_unsharded_run(llama_servers, tmp_path, capsys):
    # the n-gram pair on the two copying prompts (both draft from the first steps; n-gram needs no drafter for
    # the terms): what the merge must reproduce does not depend on how the candidate drafts, nor on the length
    args = ["--prompts", str(COPYING), "--max-tokens", "8", "--runs", "1", "--sampled", "0"]
    whole_args = [*args, "--no-terms"]  # the unsharded run is compared on its verdicts and acceptance only
    code, _, whole = prove(capsys, llama_servers["baseline"], llama_servers["ngram"], tmp_path / "whole", *whole_args)
    assert code == 0 and whole["derived"]["acceptance"]["drafted"] > 0
    for i in (1, 2):
        cmd = [sys.executable, "-m", "spectui", "prove", "--baseline", llama_servers["baseline"]]
        cmd += ["--candidate", llama_servers["ngram"], *args, "--shard", f"{i}/2", "-o", str(tmp_path / f"s{i}")]
        if i != 2:  # one shard measures the terms, one does not: the merge keeps that shard's, as measured
            cmd.append("--no-terms")
        done = subprocess.run([*cmd, "--no-notebook"], cwd=ROOT, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.startswith("IDENTICAL on 1/1 (greedy)")
    shards = [str(tmp_path / f"s{i}" / "certificate.json") for i in (1, 2)]
    assert main(["merge", *shards, "-o", str(tmp_path / "merged.json")]) == 0
    capsys.readouterr()
    merged = json.loads((tmp_path / "merged.json").read_text(encoding="utf-8"))
    m, w = merged["derived"], whole["derived"]
    assert [(p["id"], p["verdicts"]) for p in m["greedy"]["per_prompt"]] == [
        (p["id"], p["verdicts"]) for p in w["greedy"]["per_prompt"]
    ]
    for key in ("prompts", "identical", "differs", "failed", "runs"):
        assert m["greedy"][key] == w["greedy"][key]
    for key in ("drafted", "accepted", "steps"):
        assert m["acceptance"][key] == w["acceptance"][key]
    assert [q["accepted"] for q in m["acceptance"]["per_position"]] == [
        q["accepted"] for q in w["acceptance"]["per_position"]
    ]
    measured = json.loads((tmp_path / "s2" / "certificate.json").read_text(encoding="utf-8"))["terms"]
    assert len(measured["prompts"]) == 1 and merged["terms"]["prompts"] == measured["prompts"]  # not averaged
    assert "(1 of 2 shards measured them)" in merged["terms"]["merged"]
    assert main(["verify", str(tmp_path / "merged.json")]) == 0  # re-derives shard 2's terms check too
    capsys.readouterr()


def test_prove_launches_a_profile_pair_and_stops_it(tmp_path, capsys):
    code = main(
        ["prove", "--profile", "cpu-demo", "--comparison", "ngram", "--prompts", "quick", "--limit", "1"]
        + ["--max-tokens", "8", "--runs", "1", "--sampled", "0", "--no-terms"]
        + ["-o", str(tmp_path / "p"), "--no-notebook"]
    )
    out = capsys.readouterr()
    assert code == 0 and out.out.startswith("IDENTICAL on 1/1 (greedy)")
    doc = json.loads((tmp_path / "p" / "certificate.json").read_text(encoding="utf-8"))
    argv = doc["measured_on"]["servers"]["candidate"]["launch_argv"]
    assert "ngram-simple" in argv and "127.0.0.1" in doc["measured_on"]["servers"]["candidate"]["url"]
    port = doc["measured_on"]["servers"]["candidate"]["url"].rsplit(":", 1)[1]
    with pytest.raises(httpx.HTTPError):  # stopped when prove ended
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)


assert set(CANDIDATES) >= {"baseline", "draft", "ngram", "kvq4"}


def test_a_full_disk_during_prove_is_one_line_the_text_report_and_exit_5(draft_cert, llama_servers, tmp_path):
    """A file-size limit in the child (RLIMIT_FSIZE: EFBIG, as a full disk's ENOSPC) cuts greedy.jsonl
    mid-run: prove prints the text report of the runs it has, one error line naming the session and the
    disk, exits 5, and writes no certificate over the cut session. One run of draft_cert's
    prove, cut about halfway: the limit is taken from draft_cert's own session (a header line, two runs)."""
    import resource

    out = tmp_path / "c"
    whole = (draft_cert[3] / "greedy.jsonl").read_bytes()
    header = len(whole.splitlines(keepends=True)[0])
    cut = header + (len(whole) - header) // 4  # half of one run's lines past the header

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (cut, cut))

    cmd = [sys.executable, "-m", "spectui", "prove", "--baseline", llama_servers["baseline"]]
    cmd += ["--candidate", llama_servers["draft"], "--prompts", "quick", "--max-tokens", "16", "--runs", "1"]
    cmd += ["--sampled", "0", "-o", str(out), "--no-notebook", "--no-terms"]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, preexec_fn=limit)
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode == 5, (r.returncode, r.stderr[-2000:])
    [line] = [x for x in r.stderr.splitlines() if x.startswith("spectui: error")]
    assert f"the session {out / 'greedy.jsonl'} stopped being written (File too large" in line
    assert "the disk is full" in line and "no certificate was made" in line
    assert r.stdout.startswith("baseline ") and "prompt " in r.stdout  # the text report of the finished runs
    assert not (out / "certificate.json").exists()
    assert header < (out / "greedy.jsonl").stat().st_size <= cut  # cut mid-run, past the header
