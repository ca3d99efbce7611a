"""`spectui compare`'s options as the README states them, through the real CLI and HTTP against scripted
llama-servers (tests/scripted_llama.py) replaying recorded streams: what each side was asked (the request
bodies the server kept), which prompts ran, the /metrics cross-check, triage's reach, the deadlines."""

from __future__ import annotations

import json
import tomllib

import pytest

from spectui.cli.main import main
from tests.recordings import BASELINE, DRAFT, changed, payloads
from tests.scripted_llama import ScriptedLlama

OTHER_MODEL = "/models/another-model.Q8_0.gguf"


def compare(capsys, base: ScriptedLlama, cand: ScriptedLlama, *extra) -> tuple[int, dict, str]:
    code = main(["compare", "--baseline", base.url, "--candidate", cand.url, "--json", *extra])
    out = capsys.readouterr()
    return code, json.loads(out.out) if out.out.strip() else {}, out.err


@pytest.fixture
def prompt_file(tmp_path):
    """Six prompts p0 … p5, one user message each."""
    path = tmp_path / "six.toml"
    path.write_text("".join(f'[[prompt]]\nid = "p{i}"\ntext = "question {i}"\n' for i in range(6)))
    return path


def test_what_each_side_is_asked(capsys):
    with ScriptedLlama(payloads(BASELINE)) as b, ScriptedLlama(payloads(DRAFT)) as c:
        code, doc, _ = compare(capsys, b, c, "--prompt", "hi", "--seed", "7", "--max-tokens", "5", "--temperature", "0")
        for server in (b, c):
            [body] = server.bodies
            assert (body["seed"], body["n_predict"], body["temperature"]) == (7, 5, 0.0)
            assert body["cache_prompt"] is False  # README: off by default, both sides cold
            assert body["stream"] is True and body["timings_per_token"] is True and body["return_tokens"] is True
            assert body["prompt"] == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"  # the server's template
        assert code == 0 and doc["prompts"][0]["identical"] is True
        compare(capsys, b, c, "--prompt", "hi", "--cache-prompt", "on")
        assert b.bodies[-1]["cache_prompt"] is True and c.bodies[-1]["cache_prompt"] is True
        compare(capsys, b, c, "--prompt", "hi", "--cache-prompt", "server")
        assert "cache_prompt" not in b.bodies[-1] and "cache_prompt" not in c.bodies[-1]  # the server's default
        compare(capsys, b, c, "--prompt", "def f(", "--raw")
        assert b.bodies[-1]["prompt"] == "def f(" and c.bodies[-1]["prompt"] == "def f("  # no chat template


def test_limit_takes_the_first_n(capsys, prompt_file):
    with ScriptedLlama(payloads(BASELINE)) as b, ScriptedLlama(payloads(DRAFT)) as c:
        code, doc, _ = compare(capsys, b, c, "--prompts", str(prompt_file), "--limit", "2")
    assert code == 0 and [p["id"] for p in doc["prompts"]] == ["p0", "p1"]
    assert len(b.bodies) == len(c.bodies) == 2 and "question 1" in b.bodies[1]["prompt"]


def test_sample_draws_n_in_file_order_and_the_seed_fixes_the_draw(capsys, prompt_file):
    drawn = {}
    with ScriptedLlama(payloads(BASELINE)) as b, ScriptedLlama(payloads(DRAFT)) as c:
        for seed in ("1", "1", "2", "3", "4"):
            code, doc, _ = compare(capsys, b, c, "--prompts", str(prompt_file), "--sample", "3", "--sample-seed", seed)
            ids = [p["id"] for p in doc["prompts"]]
            assert code == 0 and len(ids) == len(set(ids)) == 3
            assert ids == sorted(ids, key=lambda x: int(x[1:]))  # the file's order kept
            drawn.setdefault(seed, ids)
            assert drawn[seed] == ids  # the same seed, the same draw
    assert len({tuple(v) for v in drawn.values()}) > 1  # another seed, another draw (4 seeds of 20 draws)


def test_the_comparison_says_what_it_compared(capsys):
    """README: text+ids when both sides name the same model and give every id; text otherwise."""
    with ScriptedLlama(payloads(BASELINE)) as b, ScriptedLlama(payloads(DRAFT)) as c:
        _, doc, _ = compare(capsys, b, c, "--prompt", "hi")
    assert doc["prompts"][0]["compared"] == "text+ids"
    with ScriptedLlama(payloads(BASELINE)) as b, ScriptedLlama(payloads(DRAFT), model_path=OTHER_MODEL) as c:
        code, doc, _ = compare(capsys, b, c, "--prompt", "hi")
    assert code == 0 and doc["prompts"][0]["compared"] == "text" and doc["prompts"][0]["identical"] is True


def test_the_same_text_with_other_token_ids_is_a_difference(capsys):
    other_ids = [dict(p, tokens=[t + 1 for t in p.get("tokens", [])]) for p in payloads(DRAFT)]
    with ScriptedLlama(payloads(BASELINE)) as b, ScriptedLlama(other_ids) as c:
        code, doc, _ = compare(capsys, b, c, "--prompt", "hi")
    p = doc["prompts"][0]
    assert code == 3 and p["identical"] is False and p["compared"] == "text+ids"
    assert p["first_divergence"]["baseline_token"] == 0  # the ids part at the first token


def metrics_text(drafted: int, accepted: int, steps: int, per_pos: list[int]) -> str:
    lines = [
        f"llamacpp:spec_decode_num_draft_tokens_total {drafted}",
        f"llamacpp:spec_decode_num_accepted_tokens_total {accepted}",
        f"llamacpp:spec_decode_num_drafts_total {steps}",
    ]
    lines += [
        f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {n}' for i, n in enumerate(per_pos)
    ]
    return "\n".join(lines) + "\n"


# the recorded draft stream's own /metrics delta (tests/data/README.md)
PER_POS = [11, 11, 8, 6, 3, 3, 2, 1]


def test_the_counts_are_cross_checked_against_the_servers_metrics(capsys):
    def counters(done: int) -> str:  # the server's totals after `done` requests of the recorded stream
        return metrics_text(119 * done + 7, 45 * done + 3, 15 * done, [n * done for n in PER_POS])

    with ScriptedLlama(payloads(BASELINE)) as b, ScriptedLlama(payloads(DRAFT), metrics=counters) as c:
        code, doc, _ = compare(capsys, b, c, "--prompt", "hi")
    cand = doc["prompts"][0]["candidate"]
    assert code == 0 and cand["metrics_check"] == "ok"
    assert (cand["metrics_drafted"], cand["metrics_accepted"]) == (119, 45)
    assert cand["accepted_per_position"] == PER_POS  # README: per-position acceptance, from the deltas
    assert doc["prompts"][0]["baseline"]["metrics_check"].startswith("unavailable")  # no --metrics there


def test_a_metrics_mismatch_is_reported(capsys):
    def counters(done: int) -> str:  # the server says it drafted 100 and accepted 40 per request
        return metrics_text(100 * done, 40 * done, 15 * done, [0] * 8)

    with ScriptedLlama(payloads(BASELINE)) as b, ScriptedLlama(payloads(DRAFT), metrics=counters) as c:
        code, doc, _ = compare(capsys, b, c, "--prompt", "hi")
        text_code = main(["compare", "--baseline", b.url, "--candidate", c.url, "--prompt", "hi"])
        text = capsys.readouterr().out
    check = doc["prompts"][0]["candidate"]["metrics_check"]
    assert check == "mismatch: drafted 119 vs server 100, accepted 45 vs server 40"
    assert text_code == 0 and "mismatch: drafted 119 vs server 100" in text


def test_the_rate_beside_the_speedup_is_the_server_timed_one(capsys):
    """README: the server's own timing where it reports one, marked server-timed (JSON decode_source)."""
    with ScriptedLlama(payloads(BASELINE)) as b, ScriptedLlama(payloads(DRAFT)) as c:
        _, doc, _ = compare(capsys, b, c, "--prompt", "hi")
        code = main(["compare", "--baseline", b.url, "--candidate", c.url, "--prompt", "hi"])
    out = capsys.readouterr().out
    rates = []
    for side, path in (("baseline", BASELINE), ("candidate", DRAFT)):
        t = payloads(path)[-1]["timings"]
        rates.append((t["predicted_n"] - 1) / t["predicted_ms"] * 1000)
        j = doc["prompts"][0][side]
        assert j["decode_source"] == "server timings" and j["decode_tps"] == pytest.approx(rates[-1])
        row = next(line for line in out.splitlines() if line[19:29].strip() == side)  # the figures row
        parts = row.split()
        at = parts.index(side)  # side, TTFT ms, tok/s, srv tok/s, …
        assert parts[at + 2 : at + 4] == [f"{rates[-1]:.1f}", f"{rates[-1]:.1f}"]
    assert code == 0 and f"speed-up  {rates[1] / rates[0]:.2f}× at 38% (45/119) accepted" in out


DIFFERENT = changed(payloads(DRAFT), 12, " fizz")  # one token's text changed, as a lossy KV cache would


def test_triage_reaches_as_many_divergent_prompts_as_asked(capsys, prompt_file):
    with ScriptedLlama(payloads(BASELINE)) as b, ScriptedLlama(DIFFERENT) as c:
        code, doc, _ = compare(
            capsys, b, c, "--prompts", str(prompt_file), "--limit", "3", "--triage-limit", "2", "--triage"
        )
        triaged = [p["triage"] is not None for p in doc["prompts"]]
        assert code == 3 and triaged == [True, True, False]
        assert len(c.bodies) > 3  # the reruns asked the candidate again
        asked = len(c.bodies)
        code, doc, _ = compare(capsys, b, c, "--prompts", str(prompt_file), "--limit", "3", "--no-triage")
        assert code == 3 and all(p["triage"] is None for p in doc["prompts"]) and len(c.bodies) == asked + 3


def test_a_side_that_does_not_reproduce_itself_is_nondeterminism(capsys):
    # the candidate answers the run with one output and its rerun with another: it moves on its own
    moving = [DIFFERENT, changed(payloads(DRAFT), 20, " banana")]
    with ScriptedLlama(payloads(BASELINE)) as b, ScriptedLlama(moving) as c:
        code, doc, _ = compare(capsys, b, c, "--prompt", "hi", "--triage")
    t = doc["prompts"][0]["triage"]
    assert code == 3 and t["cause"] == "nondeterminism" and "candidate" in t["summary"]
    assert [r["identical"] for r in t["reruns"]][:2] == [True, False]  # the baseline reproduced, the candidate not


def test_a_deadline_fails_the_slow_side_with_one_line(capsys):
    # the limits bind every request, the baseline's too: 10 s (not 0.5 s or 3 s) lets a loaded machine deliver
    # the baseline's whole recorded stream in time (a whole compare of it took 2.1 s here under 4 busy loops);
    # the candidate's first event comes 30 s after the request
    with ScriptedLlama(payloads(BASELINE)) as b, ScriptedLlama(payloads(DRAFT), stall_s=30) as c:
        code, doc, _ = compare(capsys, b, c, "--prompt", "hi", "--deadline", "10")
    p = doc["prompts"][0]
    assert code == 1 and p["identical"] is None and p["baseline"]["failed"] is None, p["baseline"]["failed"]
    assert p["candidate"]["failed"].startswith("the request ran past its deadline of 10 s")
    with ScriptedLlama(payloads(BASELINE)) as b, ScriptedLlama(payloads(DRAFT), stall_s=30) as c:
        code, doc, _ = compare(capsys, b, c, "--prompt", "hi", "--idle-timeout", "10")
    p = doc["prompts"][0]
    assert code == 1 and p["baseline"]["failed"] is None
    assert p["candidate"]["failed"].startswith("no answer for 10 s: idle timeout")


def test_a_server_silent_for_good_meets_the_deadline_not_the_idle_timeout(capsys):
    import time

    # the candidate answers its headers, then nothing for 10 minutes: a 10 s deadline ends it, not the
    # 120 s idle timeout (the deadline binds the baseline too: 10 s, not 3 s, leaves a loaded machine room
    # to read its whole recorded stream; the bound below is only an upper limit with a wide margin)
    with ScriptedLlama(payloads(BASELINE)) as b, ScriptedLlama(payloads(DRAFT), stall_s=600) as c:
        t0 = time.monotonic()
        code, doc, _ = compare(capsys, b, c, "--prompt", "hi", "--deadline", "10", "--idle-timeout", "120")
        took = time.monotonic() - t0
    p = doc["prompts"][0]
    assert code == 1 and p["baseline"]["failed"] is None, p["baseline"]["failed"]
    assert p["candidate"]["failed"].startswith("the request ran past its deadline of 10 s"), p["candidate"]["failed"]
    assert took < 90, took


def test_the_notebook_gets_one_entry_per_prompt(capsys, tmp_path, prompt_file):
    nb = tmp_path / "nb.toml"
    with ScriptedLlama(payloads(BASELINE)) as b, ScriptedLlama(payloads(DRAFT)) as c:
        code, doc, _ = compare(capsys, b, c, "--prompts", str(prompt_file), "--limit", "2", "--notebook", str(nb))
    rows = tomllib.loads(nb.read_text())["measurement"]
    assert code == 0 and [r["prompt_id"] for r in rows] == ["p0", "p1"]
    assert all(r["drafted"] == 119 and r["accepted"] == 45 and r["identical"] is True for r in rows)


def test_the_near_tie_default_is_triages_own(capsys):
    """`compare --near-tie`, a run's and a prove's options default to the threshold triage itself uses, and the
    help says which: one value, read from each place that applies it (a literal drifting in any fails this)."""
    import inspect

    from spectui.cli.main import build_parser
    from spectui.run.prove.prove import ProveOptions
    from spectui.run.session import RunOptions
    from spectui.run.triage import triage

    own = inspect.signature(triage).parameters["threshold"].default
    argv = ["compare", "--baseline", "http://a", "--candidate", "http://b", "--prompt", "x"]
    assert build_parser("compare").parse_args(argv).near_tie == RunOptions().near_tie == ProveOptions().near_tie == own
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    assert f"near-tie (default {own:g})" in " ".join(capsys.readouterr().out.split())
