"""A second suite of forgeries, beyond the ones first reported, each made with spectui's own functions
(tests/unit/forger.py) on the same kind of certificate (a plain llama-server against a draft-simple
candidate, recorded streams replayed at their recorded pace): every one must be refused by verify, in one
line. Where an attack is out of reach by construction (a session forged whole and self-consistently) it
is not here: README's prove section says so."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from tests.unit.forger import Forger, events
from tests.unit.test_certificate_forgery import make, refused


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    return make(tmp_path_factory.mktemp("fresh") / "c").parent


def _side(recs, side, n=0, ev=None):
    return [r for r in events(recs, side, n) if ev is None or r["ev"] == ev]


def _fin(recs, side="candidate", n=0):
    return _side(recs, side, n, "finish")[0]


def drop_middle_token(recs):
    toks = _side(recs, "candidate", ev="token")
    recs.remove(toks[len(toks) // 2])


def step_accepts_more_than_drafted(recs):
    st = _side(recs, "candidate", ev="step")[0]
    st["accepted"] = st["drafted"] + 1


def steps_removed(recs):
    return [r for r in recs if not (r.get("type") == "event" and r["ev"] == "step" and r["side"] == "candidate")]


def draft_n_accepted_raised(recs):
    _fin(recs)["timings"]["draft_n_accepted"] += 20


def tokens_predicted_edited(recs):
    _fin(recs)["tokens_predicted"] += 5


def stop_type_limit(recs):
    _fin(recs)["stop_type"] = "limit"


def prompt_ms_nan(recs):
    _fin(recs)["timings"]["prompt_ms"] = "NaN"


def predicted_n_negative(recs):
    _fin(recs)["timings"]["predicted_n"] = -1


def cache_n_negative(recs):
    _fin(recs, "baseline")["timings"]["cache_n"] = -57


def predicted_per_second_inflated(recs):
    _fin(recs)["timings"]["predicted_per_second"] = 1e9


def _result(recs, n=0):
    return next(r for r in recs if r.get("type") == "result" and r["n"] == n)


def metrics_steps_fractional(recs):
    _result(recs)["candidate"].update(metrics_drafted=119, metrics_accepted=45, metrics_steps=2.5)


def metrics_negative(recs):
    _result(recs)["candidate"].update(metrics_drafted=-119, metrics_accepted=-45, metrics_steps=15)


def per_position_rising(recs):
    _result(recs)["candidate"].update(accepted_per_position=[1, 5])


def per_position_sum_above_accepted(recs):
    _result(recs)["candidate"].update(accepted_per_position=[15, 15, 15, 15])


def per_position_text(recs):
    _result(recs)["candidate"].update(accepted_per_position=[3, "9", True])


def finish_moved_first(recs):
    fin = _fin(recs)
    first_token = _side(recs, "candidate", ev="token")[0]
    recs.remove(fin)
    fin["t"] = first_token["t"] - 1
    recs.insert(recs.index(first_token), fin)


def token_times_swapped(recs):
    toks = _side(recs, "candidate", ev="token")
    toks[3]["t"], toks[9]["t"] = toks[9]["t"], toks[3]["t"]


def baseline_arrivals_squeezed(recs):
    toks = _side(recs, "baseline", ev="token")
    t0 = toks[0]["t"]
    for r in toks:
        r["t"] = t0 + (r["t"] - t0) // 3
    # the finish follows its last token, as a live one would
    _fin(recs, "baseline")["t"] = toks[-1]["t"] + 1


def last_servers_record_other_build(recs):
    last = max(i for i, r in enumerate(recs) if r.get("type") == "servers")
    recs[last] = copy.deepcopy(recs[last])
    recs[last]["baseline"]["build"] = "b99999"


def run_labels_swapped(recs):
    for r in recs:
        if r.get("type") == "result" and r.get("run") in (1, 2):
            r["run"] = 3 - r["run"]


def run_copied_and_moved(recs):
    """Run 1 of the first prompt copied over run 2's records, every time moved by 1 ms."""
    by_n = {r["n"]: r for r in recs if r.get("type") == "result"}
    first = next(n for n, r in by_n.items() if r.get("run") == 1)
    pid = next(r["prompt"]["id"] for r in recs if r.get("type") == "prompt" and r["n"] == first)
    second = next(
        r["n"]
        for r in recs
        if r.get("type") == "prompt" and r["prompt"]["id"] == pid and by_n.get(r["n"], {}).get("run") == 2
    )
    src = [copy.deepcopy(r) for r in events(recs, n=first)]
    out = [r for r in recs if not (r.get("type") == "event" and r["n"] == second)]
    at = next(i for i, r in enumerate(out) if r.get("type") == "result" and r["n"] == second)
    for r in src:
        r["n"], r["t"] = second, r["t"] + 1_000_000
    # the copy goes B C like run 1 did: run 2 goes C B, so the sides are put in that order too
    cand = [r for r in src if r["side"] == "candidate"]
    base = [r for r in src if r["side"] == "baseline"]
    shift = base[0]["t"] - cand[0]["t"]
    span = cand[-1]["t"] - cand[0]["t"]
    for r in cand:
        r["t"] += shift
    for r in base:
        r["t"] += span + 1000
    out[at:at] = cand + base
    _result(out, second)["candidate"] = copy.deepcopy(_result(out, first)["candidate"])
    _result(out, second)["baseline"] = copy.deepcopy(_result(out, first)["baseline"])
    return out


def accepted_labels_inflated(recs):
    for r in _side(recs, "candidate", ev="token"):
        if r["label"] == "target":
            r["label"] = "accepted"


def concurrent_relabel(recs):
    for r in recs:
        if r.get("type") == "prompt":
            r["order"] = "concurrent"


def probe_memory_edited(recs):
    for r in recs:
        if r.get("type") == "probe" and r.get("host"):
            r["host"]["memory_total"] *= 2


def sampled_seed_copied(recs):
    """In the sampled pass, seed 2's recording replaced by seed 1's (moved by 1 ms)."""
    prompts = [r for r in recs if r.get("type") == "prompt"]
    a, b = prompts[0]["n"], prompts[1]["n"]
    src = [copy.deepcopy(r) for r in events(recs, n=a)]
    out = [r for r in recs if not (r.get("type") == "event" and r["n"] == b)]
    at = next(i for i, r in enumerate(out) if r.get("type") in ("result", "probe") and r.get("n") == b)
    for r in src:
        r["n"], r["t"] = b, r["t"] + 1_000_000
    out[at:at] = src
    return out


def _write_duplicate_key(f: Forger) -> None:
    """A token event whose text is given twice: orjson keeps the last, a first-key reader the first."""
    lines = (f.dir / "greedy.jsonl").read_text(encoding="utf-8").splitlines()
    k = next(i for i, line in enumerate(lines) if '"token"' in line and '"candidate"' in line and '"d"' in line)
    lines[k] = '{"d": "FORGED", ' + lines[k][1:]
    (f.dir / "greedy.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_session_line_with_a_key_given_twice_is_refused(original, tmp_path):
    f = Forger(original, tmp_path / "f")
    _write_duplicate_key(f)
    assert "given twice" in refused(f.rebuild())


def max_tokens_relabelled(recs):
    for r in recs:
        if r.get("type") == "prompt":
            r["params"]["max_tokens"] = 128


# what the forger states in the inputs to match an edit of the sessions
STATED_TOO: dict[Callable, Callable[[dict], None]] = {
    concurrent_relabel: lambda inputs: inputs["params"].update(order="concurrent"),
    max_tokens_relabelled: lambda inputs: inputs["params"].update(max_tokens=128),
}

ATTACKS: list[tuple[str, str, Callable]] = [
    ("a middle token of the candidate deleted", "greedy.jsonl", drop_middle_token),
    ("a step accepting more than it drafted", "greedy.jsonl", step_accepts_more_than_drafted),
    ("the candidate's step events removed", "greedy.jsonl", steps_removed),
    ("draft_n_accepted raised in the final timings", "greedy.jsonl", draft_n_accepted_raised),
    ("tokens_predicted edited alone", "greedy.jsonl", tokens_predicted_edited),
    ("stop_type limit before max_tokens", "greedy.jsonl", stop_type_limit),
    ('prompt_ms "NaN"', "greedy.jsonl", prompt_ms_nan),
    ("predicted_n -1", "greedy.jsonl", predicted_n_negative),
    ("cache_n negative", "greedy.jsonl", cache_n_negative),
    ("predicted_per_second 1e9", "greedy.jsonl", predicted_per_second_inflated),
    ("metrics_steps 2.5", "greedy.jsonl", metrics_steps_fractional),
    ("metrics counts negative", "greedy.jsonl", metrics_negative),
    ("per-position counts rising", "greedy.jsonl", per_position_rising),
    ("per-position counts adding up to more than accepted", "greedy.jsonl", per_position_sum_above_accepted),
    ("per-position counts with text and a boolean", "greedy.jsonl", per_position_text),
    ("the finish moved before the tokens", "greedy.jsonl", finish_moved_first),
    ("two token times swapped", "greedy.jsonl", token_times_swapped),
    ("the baseline's arrivals squeezed to a third", "greedy.jsonl", baseline_arrivals_squeezed),
    ("the last servers record names another baseline build", "greedy.jsonl", last_servers_record_other_build),
    ("runs 1 and 2 relabelled", "greedy.jsonl", run_labels_swapped),
    ("run 1 copied over run 2, moved in time and reordered C B", "greedy.jsonl", run_copied_and_moved),
    ("the candidate's target tokens relabelled accepted", "greedy.jsonl", accepted_labels_inflated),
    ("sequential pairs relabelled concurrent", "greedy.jsonl", concurrent_relabel),
    ("the probes' memory doubled", "greedy.jsonl", probe_memory_edited),
    ("a sampled seed's recording copied to another seed", "sampled.jsonl", sampled_seed_copied),
    ("max_tokens relabelled 128 in every greedy request and the inputs", "greedy.jsonl", max_tokens_relabelled),
]


@pytest.mark.parametrize("what,name,edit", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_a_fresh_forgery_is_refused(original, tmp_path, what, name, edit):
    f = Forger(original, tmp_path / "f")
    before = f.records(name)
    f.edit(edit, name)
    assert f.records(name) != before, f"{what}: nothing edited"
    if edit is concurrent_relabel:
        f.edit(edit, "sampled.jsonl")
    inputs = copy.deepcopy(f.doc["inputs"])
    if edit in STATED_TOO:
        STATED_TOO[edit](inputs)
    refused(f.rebuild(inputs=inputs))
