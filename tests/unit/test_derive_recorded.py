"""The certificate's derivation (run/prove/derive.derive) from sessions recorded on real vLLM servers
(tests/data/README.md), against what their raw lines say: the servers record, each run's verdict and ratio as
the run recorded them, the first difference's byte from the outputs' bytes, triage's recorded cause, one
server at a time from the recorded order — and each problem a damaged or mismatched set of sessions gives,
in the order derive finds them (the mutation table's survivors in derive and greedy_groups)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict

from spectui.run.prove.derive import derive, load_sessions
from spectui.store.session import load_session
from tests.oracles import first_difference
from tests.recordings import DATA
from tests.unit.test_certificate import prove

BOTH_UP = DATA / "session-vllm-ngram-quick2-runs2.jsonl"  # prove --runs 2: code-fizzbuzz, qa-capital
ALONE = DATA / "session-vllm-ngram-alone-repeat2.jsonl"  # --one-at-a-time --repeat 2: code-fizzbuzz


def raw(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def outputs(path) -> dict[tuple[int, str], bytes]:
    """Each (prompt record, side)'s output bytes, joined from its recorded token events."""
    out: dict[tuple[int, str], bytes] = defaultdict(bytes)
    for r in raw(path):
        if r.get("type") == "event" and r["ev"] == "token":
            out[(r["n"], r["side"])] += r["d"].encode("utf-8")
    return out


def inputs(*prompts: dict, runs: int = 2, order: str = "sequential", **more) -> dict:
    return {"prompt_set": {"prompts": list(prompts)}, "runs": runs, "params": {"order": order}, **more}


def test_a_set_with_one_difference_is_derived_as_its_sessions_recorded_it():
    lines = raw(BOTH_UP)
    results = [r for r in lines if r.get("type") == "result"]
    prompt_of = {r["n"]: r["prompt"]["id"] for r in lines if r.get("type") == "prompt"}
    triage = next(r["triage"] for r in lines if r.get("type") == "triage")
    # qa-capital given no category: the certificate's set says which, not the session
    d = derive(
        {"greedy": [load_session(BOTH_UP)], "sampled": []},
        inputs({"id": "code-fizzbuzz", "category": "code"}, {"id": "qa-capital"}),
        {"servers": {"candidate": {}}},
    )
    servers = next(r for r in lines if r.get("type") == "servers")
    assert d["servers"] == {
        side: {k: v for k, v in servers[side].items() if k != "url"} for side in servers if side != "type"
    }
    g = d["greedy"]
    assert {k: g[k] for k in ("prompts", "identical", "differs", "failed", "incomplete", "runs")} == {
        "prompts": 2,
        "identical": 1,
        "differs": 1,
        "failed": 0,
        "incomplete": 0,
        "runs": 4,
    }
    assert "not_run" not in g  # every prompt of the share run as scheduled
    assert [(p["id"], p["category"], p["verdicts"]) for p in g["per_prompt"]] == [
        ("code-fizzbuzz", "code", [r["verdict"]["status"] for r in results if prompt_of[r["n"]] == "code-fizzbuzz"]),
        ("qa-capital", "", [r["verdict"]["status"] for r in results if prompt_of[r["n"]] == "qa-capital"]),
    ]
    for p in g["per_prompt"]:  # each run's ratio as the run itself recorded it
        recorded = [r["speedup"] for r in results if prompt_of[r["n"]] == p["id"]]
        assert [round(x, 9) for x in p["speedups"]] == [round(x, 9) for x in recorded]
    every = [r["speedup"] for r in results]
    assert math.isclose(d["speedup"]["overall"]["value"], math.exp(sum(map(math.log, every)) / 4), rel_tol=1e-9)
    assert d["speedup"]["overall"]["method"].startswith("this prompt set: geometric mean")  # both up: pooled
    [diff] = d["differences"]
    n = next(r["n"] for r in results if prompt_of[r["n"]] == "qa-capital" and r["run"] == 1)
    out = outputs(BOTH_UP)
    assert (diff["id"], diff["category"], diff["run"]) == ("qa-capital", "", 1)
    assert diff["byte"] == first_difference(out[(n, "baseline")], out[(n, "candidate")])
    assert (diff["cause"], diff["cause_summary"]) == (triage["cause"], triage["summary"])
    assert "one_at_a_time" not in d and d["problems"] == []
    assert d["verdict"]["status"] == "different"
    assert d["verdict"]["line"].startswith(f"DIFFERENT on 1/2 (greedy; cause: {triage['cause']})")


def test_one_server_at_a_time_is_said_and_its_interval_is_over_the_runs():
    lines = raw(ALONE)
    ratios = [r["speedup"] for r in lines if r.get("type") == "result"]
    d = derive(
        {"greedy": [load_session(ALONE)], "sampled": []},
        inputs({"id": "code-fizzbuzz", "category": "code"}, order="one-at-a-time"),
        {"servers": {"candidate": {}}},
    )
    assert d["one_at_a_time"] == {
        "servers": "one at a time",
        "line": "the baseline and the candidate were measured one after the other, never both up: each side "
        "started alone, whole phases alternating B C | C B, and each pair judged from the two recordings as "
        "side by side",
    }
    sp = d["speedup"]["overall"]
    assert len(ratios) == 2 and sp["runs"] == 2 and sp["df"] == 1
    assert sp["method"].startswith("this prompt set, runs sharing launches")  # over the runs, not pooled
    assert d["problems"] == [] and d["verdict"]["status"] == "identical"


def test_each_step_names_its_problems_in_order():
    both, alone = load_session(BOTH_UP), load_session(ALONE)
    cand = alone.infos["candidate"]
    alone.infos["candidate"] = dataclasses.replace(cand, n_ctx=(cand.n_ctx or 0) + 1)
    d = derive(
        {"greedy": [both, alone], "sampled": []},
        inputs({"id": "code-fizzbuzz", "category": "code"}, {"id": "other"}),
        {"servers": {"candidate": {}}},
    )
    not_in_set = f"{BOTH_UP.name}: prompt 'qa-capital' is not in the certificate's prompt set"
    assert d["problems"] == [
        f"{ALONE.name}: the candidate differs from the other sessions' in n_ctx",
        # the edit is to the session's last servers record: its earlier ones say otherwise (run.prove.crosscheck)
        f"{ALONE.name}: the candidate server's n_ctx changed between its servers records",
        not_in_set,
        not_in_set,
        "prompt code-fizzbuzz: run 1, 2 recorded twice",
        "prompt other: in the share, but the sessions hold no run of it",
        "some runs were measured one server at a time and some with both up (one-at-a-time, sequential)",
    ]
    assert d["greedy"]["not_run"] == ["code-fizzbuzz", "other"]


def test_a_recorded_verdict_its_events_contradict_and_runs_without_a_number():
    s = load_session(BOTH_UP)
    first = s.prompts[0]  # code-fizzbuzz run 1, recorded identical: record it as differing instead
    assert isinstance(first.result, dict) and first.result["verdict"]["status"] == "identical"
    qa = next(sp for sp in s.prompts if sp.prompt.id == "qa-capital" and sp.result["run"] == 1)
    first.result = {**first.result, "verdict": qa.result["verdict"]}
    for sp in s.prompts[2:]:
        sp.result = None if sp is qa else {k: v for k, v in sp.result.items() if k != "run"}  # both read as run 1
    d = derive(
        {"greedy": [s], "sampled": []},
        inputs({"id": "code-fizzbuzz"}, {"id": "qa-capital"}),
        {"servers": {"candidate": {}}},
    )
    # stripped of their numbers, runs 2 (C B) read as runs 1 (B C): the cross-checks say the wrong side went first
    went_first = [p for p in d["problems"] if "went first" in p]
    assert went_first and all("run 1 of a sequential pair starts with the baseline" in p for p in went_first)
    [contradicted, twice] = [p for p in d["problems"] if p not in went_first]
    assert contradicted.startswith(f"{BOTH_UP.name}: code-fizzbuzz: the run recorded DIFFERS")
    assert "; its events give IDENTICAL" in contradicted
    assert twice == "prompt qa-capital: run 1 recorded twice"


def test_the_sampled_sessions_count_for_the_servers_the_order_and_the_candidates_promise(tmp_path):
    # a certificate made here from the recorded llama.cpp streams, with a sampled pass over one prompt
    doc = prove(tmp_path / "c", sampled=1, samples=4)
    base = tmp_path / "c"
    probabilistic = ["llama-server", "-m", "t.gguf", "-md", "d.gguf", "--spec-draft-sampling", "probabilistic"]
    mo = {**doc["measured_on"], "servers": {"candidate": {"launch_argv": probabilistic}}}
    d = derive(load_sessions(doc["sessions"], base), doc["inputs"], mo)
    # the launch command line is stated, not derivable: it may not relax the promise the server's own report
    # gives (llama-server drafts greedily by default: seeded bytes), and the certificate says it did not rely on it
    assert [p["guarantee"]["promise"] for p in d["sampled"]["prompts"]] == ["seeded bytes"]
    assert all("not relied on" in p["guarantee"]["why"] for p in d["sampled"]["prompts"])
    assert d["problems"] == []
    sessions = load_sessions(doc["sessions"], base)
    [sampled] = sessions["sampled"]
    cand = sampled.infos["candidate"]
    sampled.infos["candidate"] = dataclasses.replace(cand, n_ctx=(cand.n_ctx or 0) + 1)
    for sp in sampled.prompts:
        sp.order = "one-at-a-time"
    assert derive(sessions, doc["inputs"], doc["measured_on"])["problems"] == [
        "sampled.jsonl: the candidate differs from the other sessions' in n_ctx",
        "some runs were measured one server at a time and some with both up (one-at-a-time, sequential)",
    ]


def test_a_token_id_changed_under_the_same_text_is_a_difference_and_a_damaged_prompt_is_not_compared(tmp_path):
    # code-fizzbuzz run 1: the candidate's 4th token given another id, its text kept (both sides share a
    # tokenizer: the same model on the same vLLM build, so the ids are compared)
    lines = raw(BOTH_UP)
    n = next(r["n"] for r in lines if r.get("type") == "prompt" and r["prompt"]["id"] == "code-fizzbuzz")
    tokens = [r for r in lines if r.get("type") == "event" and r["n"] == n and r["ev"] == "token"]
    changed = next(r for r in tokens if r["side"] == "candidate" and r["i"] == 3)
    changed["id"] += 1
    before = sum(len(r["d"].encode("utf-8")) for r in tokens if r["side"] == "candidate" and r["i"] < 3)
    path = tmp_path / BOTH_UP.name
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    s = load_session(path)
    s.prompts[1].damaged = True  # code-fizzbuzz run 2: a record of it unreadable
    d = derive({"greedy": [s], "sampled": []}, inputs({"id": "code-fizzbuzz"}, {"id": "qa-capital"}), {})
    code = d["greedy"]["per_prompt"][0]
    assert code["verdicts"] == ["differs", "incomplete"]
    first = d["differences"][0]
    assert (first["id"], first["run"], first["kind"]) == ("code-fizzbuzz", 1, "ids")
    assert (first["byte"], first["baseline_token"], first["candidate_token"]) == (before, 3, 3)
    assert [p.split(": ")[1:3] for p in d["problems"]] == [
        ["code-fizzbuzz", "the run recorded IDENTICAL (compared text+ids); its events give DIFFERS"],
        ["code-fizzbuzz", "the run recorded IDENTICAL (compared text+ids); its events give INCOMPLETE"],
    ]


def test_one_at_a_time_an_untriaged_difference_says_triage_was_skipped_and_mixed_clocks_are_noted(tmp_path):
    lines = raw(ALONE)
    first, second = [r["n"] for r in lines if r.get("type") == "prompt"]
    # run 1: the candidate's 3rd token gets one more character; its rate timed by the server (llama.cpp's
    # timings: 31 tokens in 1 s after the first), the baseline's observed. Run 2: the other way round.
    token = next(
        r for r in lines if r.get("type") == "event" and (r["n"], r["side"], r.get("i")) == (first, "candidate", 2)
    )
    token["d"] += "!"
    for n, side in ((first, "candidate"), (second, "baseline")):
        finish = next(
            r for r in lines if r.get("type") == "event" and (r["n"], r["side"], r["ev"]) == (n, side, "finish")
        )
        finish["timings"] |= {"predicted_n": 32, "predicted_ms": 1000.0}
    path = tmp_path / ALONE.name
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    skipped = {"triage": "skipped: one server at a time"}
    d = derive(
        {"greedy": [load_session(path)], "sampled": []},
        inputs({"id": "code-fizzbuzz"}, order="one-at-a-time", one_at_a_time=skipped),
        {},
    )
    out = outputs(path)
    [diff] = d["differences"]
    assert diff["byte"] == first_difference(out[(first, "baseline")], out[(first, "candidate")])
    assert (diff["cause"], diff["cause_summary"]) == (None, "triage skipped: one server at a time")
    assert d["verdict"]["line"].startswith("DIFFERENT on 1/1 (greedy; cause: not triaged, one server at a time)")
    assert d["speedup"]["note"] == (
        "the baseline's rate is from observed, the candidate's from server timings: the ratio mixes two clocks; "
        "the baseline's rate is from server timings, the candidate's from observed: the ratio mixes two clocks"
    )
