"""The sampling lab's own logic (spectui/labs/sampling/exact.py), part by part: which promise a candidate makes
(guarantee_for and its launched-server reading), a prompt's seeded count, verdict, lines and JSON
(SamplingResult), what the distribution pass compares, and the seeded pass's requests (`sampling`, against
two in-process sources). Every expected string and count is written by hand from the inputs of its test
(the mutation table's survivors in exact.py; the statistics themselves are twosample.py's, tested in
test_sampling_stats/power/threshold)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys

import psutil
import pytest

from spectui.core.events import StreamFailed, StreamFinished, StreamStarted, TokenEvent
from spectui.core.figures import SideRecorder
from spectui.core.runner import PromptResult, RunObserver
from spectui.core.stats import ratio_interval
from spectui.core.types import GenerationParams, Prompt, ServerInfo
from spectui.core.verdict import judge
from spectui.labs.sampling.exact import (
    SAMPLING_ENV,
    Guarantee,
    SamplingResult,
    distribution_pass,
    guarantee_for,
    launch_argv,
    launch_env,
    sampling,
)
from spectui.labs.sampling.twosample import DistributionTest, PositionTest

UNREAD = "LLAMA_ARG_SPEC_DRAFT_SAMPLING not read: its environment is not readable here"
GREEDY_TAIL = ": every position is sampled from the target with the request's RNG"

# -- which promise applies ------------------------------------------------------------------------


def info(spec_type: str | None) -> ServerInfo:
    return ServerInfo("http://x", speculative={"type": spec_type} if spec_type is not None else {})


def test_the_environment_variable_is_llama_servers_own():
    assert SAMPLING_ENV == "LLAMA_ARG_SPEC_DRAFT_SAMPLING"


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_vllm_and_sglang_promise_the_distribution_only(kind):
    assert guarantee_for(kind, info("ngram"), ["x", "-md", "d"]) == Guarantee(
        "own randomness", "distribution only", f"{kind} draws its own randomness in rejection sampling"
    )


def test_another_server_kind_is_unknown_and_says_which():
    assert guarantee_for("openai", None, None) == Guarantee(
        "unknown", "unknown", "a openai server: how it verifies drafts under sampling is unknown"
    )


def test_a_known_argv_decides_over_what_the_server_reports():
    # the server reports a sampled drafter, but its command line has no speculation flag
    assert guarantee_for("llama.cpp", info("draft-simple"), ["llama-server", "-m", "m.gguf"]) == Guarantee(
        "none", "seeded bytes", "launched without speculation"
    )
    # an empty argv is still a known one
    assert guarantee_for("llama.cpp", info("ngram-simple"), []).why == "launched without speculation"


@pytest.mark.parametrize("spec_type", ["none", "none,none"])
def test_a_candidate_that_drafts_nothing_promises_seeded_bytes(spec_type):
    assert guarantee_for("llama.cpp", info(spec_type), None) == Guarantee(
        "none", "seeded bytes", "the candidate drafts nothing"
    )


@pytest.mark.parametrize("spec_type", ["ngram-simple", "ngram-simple,ngram-map-k", "ngram-mod,none"])
def test_looked_up_drafts_promise_seeded_bytes_and_name_the_types(spec_type):
    assert guarantee_for("llama.cpp", info(spec_type), None) == Guarantee(
        "n-gram",
        "seeded bytes",
        f"{spec_type} drafts are looked up, not sampled: --spec-draft-sampling does not apply",
    )


UNKNOWN_WHY = (
    "llama-server does not report --spec-draft-sampling and this server's argv is not readable here: a seeded "
    "mismatch is a failure under greedy drafting, expected under probabilistic"
)


@pytest.mark.parametrize("spec_type", [None, "", ",", "draft-simple", "draft-mtp", "on", "ngram-simple,draft-mtp"])
def test_a_sampled_or_unreported_drafter_with_no_argv_is_unknown(spec_type):
    assert guarantee_for("llama.cpp", info(spec_type), None) == Guarantee("unknown", "unknown", UNKNOWN_WHY)


def test_no_server_info_and_no_argv_is_unknown():
    assert guarantee_for("llama.cpp", None, None) == Guarantee("unknown", "unknown", UNKNOWN_WHY)


@pytest.mark.parametrize("flag", ["--spec-type", "-md", "--spec-draft-model", "--model-draft"])
def test_each_speculation_flag_makes_a_launched_server_a_greedy_drafter(flag):
    argv = ["llama-server", "-m", "t.gguf", flag, "x"]
    assert guarantee_for("llama.cpp", None, argv, {}) == Guarantee(
        "greedy", "seeded bytes", "launched without --spec-draft-sampling probabilistic" + GREEDY_TAIL
    )


def test_greedy_says_where_the_environment_was_not_read():
    g = guarantee_for("llama.cpp", None, ["llama-server", "-md", "d.gguf"], None)
    assert g == Guarantee(
        "greedy", "seeded bytes", f"launched without --spec-draft-sampling probabilistic ({UNREAD})" + GREEDY_TAIL
    )


def test_probabilistic_from_the_argument():
    g = guarantee_for("llama.cpp", None, ["llama-server", "-md", "d", "--spec-draft-sampling", "probabilistic"], None)
    assert g == Guarantee(
        "probabilistic",
        "distribution only",
        "launched with --spec-draft-sampling probabilistic: drafts are verified by rejection sampling",
    )


def test_probabilistic_from_the_environment():
    g = guarantee_for("llama.cpp", None, ["llama-server", "-md", "d"], {SAMPLING_ENV: "probabilistic", "X": "1"})
    assert g == Guarantee(
        "probabilistic",
        "distribution only",
        "launched with LLAMA_ARG_SPEC_DRAFT_SAMPLING in its environment probabilistic: drafts are verified by "
        "rejection sampling",
    )


def test_the_argument_wins_over_the_environment():
    argv = ["llama-server", "-md", "d", "--spec-draft-sampling", "greedy"]
    g = guarantee_for("llama.cpp", None, argv, {SAMPLING_ENV: "probabilistic"})
    assert g == Guarantee(
        "greedy", "seeded bytes", "launched without --spec-draft-sampling probabilistic" + GREEDY_TAIL
    )
    argv = ["llama-server", "-md", "d", "--spec-draft-sampling", "probabilistic"]
    g = guarantee_for("llama.cpp", None, argv, {SAMPLING_ENV: "greedy"})
    assert g.drafting == "probabilistic" and g.why.startswith("launched with --spec-draft-sampling probabilistic")


def test_an_empty_environment_setting_is_no_setting():
    g = guarantee_for("llama.cpp", None, ["llama-server", "-md", "d"], {SAMPLING_ENV: ""})
    assert (g.drafting, g.promise) == ("greedy", "seeded bytes") and "not read" not in g.why


def test_guarantee_json():
    assert Guarantee("greedy", "seeded bytes", "w").to_json() == {
        "drafting": "greedy",
        "promise": "seeded bytes",
        "why": "w",
    }


# -- the launched server behind a URL -------------------------------------------------------------


def test_argv_and_environment_of_a_local_listener_are_this_process():
    me = psutil.Process()
    with socket.socket() as s:  # this process listens on a port of its own
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        for host in ("127.0.0.1", "localhost"):
            url = f"http://{host}:{port}"
            assert launch_argv(url) == me.cmdline()
            # the environment the process started with (/proc/PID/environ), which an xdist worker may have
            # started without: its content is checked on another process below
            assert launch_env(url) == dict(me.environ())


def test_no_argv_or_environment_where_nothing_local_listens():
    # port 1 (tcpmux): nothing listens there here (a port bound and closed could be taken meanwhile by a
    # server another test starts on a free port)
    for url in ("http://127.0.0.1:1", "http://127.0.0.1", "http://example.com:8080", "http://[::1"):
        assert launch_argv(url) is None and launch_env(url) is None


LISTEN = (
    "import socket, sys, time\n"
    "s = socket.socket(socket.AF_INET6 if sys.argv[1] == '::1' else socket.AF_INET)\n"
    "s.bind((sys.argv[1], 0)); s.listen()\n"
    "print(s.getsockname()[1], flush=True); time.sleep(60)\n"
)


@contextlib.contextmanager
def listener(host: str = "127.0.0.1", args: tuple = (), env: dict | None = None):
    """Another process listening on `host`, with `args` on its command line and `env` added to its
    environment: (its port, its PID). Ended by its PID on the way out."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LISTEN, host, *args],
        stdout=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline()), proc.pid
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_argv_and_environment_of_another_local_process():
    with listener(args=("-md", "d.gguf"), env={"SPECTUI_TEST_MARK": "here"}) as (port, pid):
        url = f"http://127.0.0.1:{port}"
        assert launch_argv(url) == [sys.executable, "-c", LISTEN, "127.0.0.1", "-md", "d.gguf"]
        env = launch_env(url)
        assert env is not None and env["SPECTUI_TEST_MARK"] == "here" and "SPECTUI_TEST_MARK" not in os.environ
        # the same port behind a name that is not this machine's is not read
        assert launch_argv(f"http://example.com:{port}") is None and launch_env(f"http://example.com:{port}") is None
    assert pid != os.getpid()


def test_argv_of_a_process_listening_on_the_ipv6_loopback():
    with listener("::1", args=("--spec-type", "ngram-simple")) as (port, _):
        assert launch_argv(f"http://[::1]:{port}")[-2:] == ["--spec-type", "ngram-simple"]


# -- one prompt's result ---------------------------------------------------------------------------


def side(name: str, toks, *, failed: str | None = None, ids: bool = True, cut: bool = False) -> SideRecorder:
    rec = SideRecorder(name)
    rec.feed(StreamStarted(0, "p"))
    for i, t in enumerate(toks):
        rec.feed(TokenEvent(i, t if ids else None, bytes([97 + t % 26]), i + 1, "unknown"))
    if failed is not None:
        rec.feed(StreamFailed(50, failed))
    elif not cut:
        rec.feed(StreamFinished(99, "limit"))
    return rec


def run(seed, b=(1, 2), c=(1, 2), *, b_failed=None, c_failed=None, cut=False, ids=True) -> PromptResult:
    r = PromptResult(
        Prompt("p"),
        side("baseline", b, failed=b_failed, ids=ids),
        side("candidate", c, failed=c_failed, cut=cut, ids=ids),
        seed=seed,
    )
    if not cut:
        r.verdict = judge(r.baseline, r.candidate, True)
    r.baseline.figures.decode_tps = r.candidate.figures.decode_tps = None  # no speed-up unless a test gives one
    return r


def result(runs, promise: str | None = None, test: DistributionTest | None = None) -> SamplingResult:
    res = SamplingResult(Prompt("q1"), runs, test=test)
    if promise is not None:
        res.guarantee = Guarantee({"seeded bytes": "greedy"}.get(promise, "probabilistic"), promise, "why")
    return res


def position(i, tvd=0.5, chance=0.2, p_adj=0.5, z=1.0) -> PositionTest:
    return PositionTest(i, (4, 4), tvd, chance, z, p_adj)


def dtest(p, positions, *, reason=None, detectable=0.75, computed=True, n=(4, 4)) -> DistributionTest:
    return DistributionTest(p, 2.0, 70, True, 1 / 70, positions, n, detectable, computed, reason)


SAME, DIFF = (1, 2), (1, 3)


def test_failed_and_cut_off_requests_are_left_out_and_named_by_seed():
    runs = [
        run(1001),
        run(1002, b_failed="connection lost"),
        run(1003, b_failed="x", c_failed="y"),
        run(1004, cut=True),
        run(1005, c=DIFF),
    ]
    res = result(runs)
    assert [r.seed for r in res.compared] == [1001, 1005]
    assert res.failed_seeds == [
        "seed 1002 (baseline: connection lost)",
        "seed 1003 (baseline: x; candidate: y)",
        "seed 1004 (cut off)",
    ]
    assert res.seeded_identical == 1


def test_the_seeded_line_counts_and_names_the_left_out_requests():
    assert result([run(1), run(2, c=DIFF)]).seeded_line() == "byte-identical for 1 of 2 seeds"
    one = result([run(1), run(2, c_failed="boom")])
    assert one.seeded_line() == (
        "byte-identical for 1 of 1 seeds (1 failed request left out of both counts: seed 2 (candidate: boom))"
    )
    three = result([run(1), *(run(s, b_failed="f") for s in (2, 3, 4))])
    assert three.seeded_line() == (
        "byte-identical for 1 of 1 seeds (3 failed requests left out of both counts: "
        "seed 2 (baseline: f), seed 3 (baseline: f), seed 4 (baseline: f))"
    )
    four = result([run(1), *(run(s, b_failed="f") for s in (2, 3, 4, 5))])
    assert four.seeded_line() == (
        "byte-identical for 1 of 1 seeds (4 failed requests left out of both counts: "
        "seed 2 (baseline: f), seed 3 (baseline: f), seed 4 (baseline: f) …)"
    )


@pytest.mark.parametrize(
    "promise,failure", [(None, True), ("seeded bytes", True), ("unknown", True), ("distribution only", False)]
)
def test_a_seeded_mismatch_is_a_failure_unless_only_the_distribution_is_promised(promise, failure):
    assert result([run(1), run(2, c=DIFF)], promise).seeded_mismatch_is_failure is failure
    assert result([run(1), run(2)], promise).seeded_mismatch_is_failure is False  # every seed identical


def test_the_verdict_before_and_after_the_distribution_pass():
    assert result([]).verdict == "not run"
    assert result([run(1, b_failed="x"), run(2, cut=True)]).verdict == "not run (every request failed)"
    assert result([run(1), run(2)]).verdict == "not run (every seed byte-identical)"
    assert result([run(1), run(2, c=DIFF)]).verdict == "not run"
    assert result([run(1)], test=dtest(0.01, [position(0)])).verdict == "different"
    assert result([run(1)], test=dtest(0.05, [position(0)])).verdict == "consistent"
    assert result([run(1)], test=dtest(1.0, [], reason="r")).verdict == "not enough samples to decide"


def test_positions_and_the_smallest_detectable_tvd_come_from_the_test():
    res = result([run(1)])
    assert res.positions == [] and res.smallest_detectable_tvd is None and res.distribution_run is False
    ps = [position(0), position(1)]
    res = result([run(1)], test=dtest(0.5, ps, detectable=0.42))
    assert res.positions == ps and res.smallest_detectable_tvd == 0.42 and res.distribution_run is True


def overall(runs, promise=None, test=None):
    return result(runs, promise, test).overall()


def test_overall_when_every_request_failed():
    assert overall([run(1, b_failed="x")], "seeded bytes") == (
        "undecided",
        "verdict: NOT COMPARED — every request failed",
    )
    assert overall([]) == ("undecided", "verdict: NOT COMPARED — every request failed")


def test_overall_different_distributions_whatever_the_seeds_say():
    t = dtest(0.001, [position(0, p_adj=0.001)])
    line = "verdict: DIFFERENT — the two sides' output distributions differ"
    assert overall([run(1), run(2)], "distribution only", t) == ("different", line)
    assert overall([run(1), run(2, c=DIFF)], "seeded bytes", t) == ("different", line)


def test_overall_seeded_bytes_promised_and_differing():
    assert overall([run(1), run(2, c=DIFF), run(3, c=DIFF)], "seeded bytes") == (
        "different",
        "verdict: DIFFERENT — seeded bytes differ for 2 of 3 seeds, which the candidate's drafting promises",
    )
    # a consistent distribution does not excuse seeds the drafting promised
    assert overall([run(1, c=DIFF)], "seeded bytes", dtest(0.5, [position(0)]))[0] == "different"


def test_overall_not_enough_samples():
    t = dtest(1.0, [], reason="too few")
    assert overall([run(1), run(2, c=DIFF)], "distribution only", t) == (
        "undecided",
        "verdict: NOT DECIDED — not enough samples to test the distributions",
    )
    assert overall([run(1), run(2)], "seeded bytes", t)[0] == "undecided"  # even with every seed identical


@pytest.mark.parametrize("promise", ["unknown", None])
def test_overall_differing_seeds_where_the_promise_is_unknown(promise):
    assert overall([run(1), run(2, c=DIFF)], promise, dtest(0.5, [position(0)])) == (
        "undecided",
        "verdict: NOT DECIDED — seeded bytes differ for 1 of 2 seeds; whether the drafting promises them is unknown",
    )


def test_overall_differing_seeds_not_promised_and_not_tested():
    assert overall([run(1, c=DIFF), run(2, c=DIFF)], "distribution only") == (
        "undecided",
        "verdict: NOT DECIDED — seeded bytes differ for 2 of 2 seeds, which this drafting does not promise; the "
        "distributions were not tested",
    )


def test_overall_differing_seeds_not_promised_and_consistent():
    assert overall([run(1), run(2, c=DIFF)], "distribution only", dtest(0.3, [position(0)])) == (
        "same",
        "verdict: CONSISTENT — seeded bytes differ for 1 of 2 seeds, which this drafting does not promise; the "
        "distributions are consistent",
    )


def test_overall_every_seed_identical():
    assert overall([run(1), run(2)], "seeded bytes") == (
        "same",
        "verdict: SAME — every seed's bytes identical (2 of 2)",
    )
    assert overall([run(1), run(2), run(3)], "distribution only", dtest(0.9, [position(0)])) == (
        "same",
        "verdict: SAME — every seed's bytes identical (3 of 3); the distributions are consistent",
    )


def test_overall_counts_the_left_out_requests():
    assert overall([run(1), run(2, b_failed="x")], "seeded bytes") == (
        "same",
        "verdict: SAME — every seed's bytes identical (1 of 1) · 1 failed request left out",
    )
    assert overall([run(1), run(2, b_failed="x"), run(3, cut=True)], "seeded bytes")[1].endswith(
        "(1 of 1) · 2 failed requests left out"
    )


def with_figures(r: PromptResult, accepted: int | None, drafted: int = 10, tps: tuple = (10.0, 20.0)):
    """Give a run's candidate drafted/accepted counts (None: drafted nothing) and both sides a decode rate."""
    if accepted is not None:
        r.candidate.figures.drafted, r.candidate.figures.accepted = drafted, accepted
    r.baseline.figures.decode_tps, r.candidate.figures.decode_tps = tps
    return r


def test_acceptance_is_the_median_over_the_runs_that_drafted():
    runs = [with_figures(run(1), 5), with_figures(run(2), 2), with_figures(run(3), None)]
    assert result(runs).acceptance() == pytest.approx(0.35)  # median of 0.5 and 0.2: their mean
    runs.append(with_figures(run(4), 9))
    assert result(runs).acceptance() == pytest.approx(0.5)  # median of 0.2, 0.5, 0.9
    assert result([with_figures(run(1), None)]).acceptance() is None


def test_the_speedup_is_over_the_measured_runs_only():
    runs = [with_figures(run(1), 5, tps=(10.0, 20.0)), with_figures(run(2), 5, tps=(10.0, 30.0))]
    runs.append(with_figures(run(3, b_failed="x"), 5, tps=(10.0, 90.0)))  # failed: no speed-up
    sp = result(runs).speedup()
    assert sp is not None and sp.to_json() == ratio_interval([2.0, 3.0]).to_json()
    assert result([run(1, b_failed="x")]).speedup() is None


def test_distribution_line_without_a_test():
    assert result([run(1), run(2)]).distribution_line() == "distributions: not run (every seed byte-identical)"


def test_distribution_line_not_enough_samples():
    t = dtest(1.0, [], reason="no outcome could reach p < 0.05")
    assert result([run(1)], test=t).distribution_line() == (
        "distributions: NOT ENOUGH SAMPLES TO DECIDE — no outcome could reach p < 0.05"
    )


def test_distribution_line_different_counts_the_positions_that_stand_out():
    ps = [position(0, p_adj=0.01), position(1, p_adj=0.2), position(2, p_adj=0.0499), position(3, p_adj=0.05)]
    assert result([run(1)], test=dtest(0.0123456, ps)).distribution_line() == (
        "distributions: DIFFERENT (one test over 4 positions, p 0.0123; 2 positions stand out)"
    )
    one = [position(0, p_adj=0.01), position(1, p_adj=0.5)]
    assert result([run(1)], test=dtest(0.01, one)).distribution_line() == (
        "distributions: DIFFERENT (one test over 2 positions, p 0.01; 1 position stand out)"
    )


def test_distribution_line_consistent_with_what_it_could_have_found():
    ps = [position(0), position(1, z=None), position(2)]  # two positions vary
    t = dtest(0.43219, ps, detectable=0.6666, n=(5, 6))
    assert result([run(1)], test=t).distribution_line() == (
        "distributions: consistent (one test over 3 positions, 2 varying, p 0.432 ≥ 0.05; 5+6 samples): a TVD of "
        "0.67 at any one position would have been found with 80 % probability; smaller differences may remain"
    )
    for not_computed in (dtest(0.5, ps, computed=False), dtest(0.5, ps, detectable=None)):
        assert result([run(1)], test=not_computed).distribution_line() == (
            "distributions: consistent (one test over 3 positions, 2 varying, p 0.5 ≥ 0.05; 4+4 samples): the "
            "smallest detectable TVD was not computed; smaller differences may remain"
        )


def test_text_with_a_guarantee_and_no_speedup():
    res = result([run(1), run(2)])
    res.guarantee = Guarantee("greedy", "seeded bytes", "launched so")
    assert res.text() == (
        "q1: byte-identical for 2 of 2 seeds\n"
        "  drafting greedy: seeded bytes promised, a mismatch is a failure (launched so)\n"
        "  verdict: SAME — every seed's bytes identical (2 of 2)"
    )


def test_text_for_each_promise():
    for promise, judged in (
        ("distribution only", "only the distribution promised, a seeded mismatch is not a failure"),
        ("unknown", "whether seeded bytes are promised is unknown"),
    ):
        res = result([run(1)])
        res.guarantee = Guarantee("d", promise, "w")
        assert res.text().splitlines()[1] == f"  drafting d: {judged} (w)"


def test_text_without_a_guarantee():
    assert (
        result([run(1)]).text()
        == "q1: byte-identical for 1 of 1 seeds\n  verdict: SAME — every seed's bytes identical (1 of 1)"
    )


def test_text_speedup_with_and_without_acceptance():
    runs = [with_figures(run(1), 5, tps=(10.0, 20.0)), with_figures(run(2), 5, tps=(10.0, 20.0))]
    sp = ratio_interval([2.0, 2.0]).text(unit="×")
    assert result(runs).text().splitlines()[1] == f"  speed-up {sp} at 50% accepted"
    runs = [with_figures(run(1), None), with_figures(run(2), None)]
    assert result(runs).text().splitlines()[1] == f"  speed-up {sp} (the candidate drafted nothing)"


def test_text_different_names_at_most_three_positions_by_their_p():
    ps = [
        PositionTest(0, (4, 4), 0.75, 0.25, 2.0, 0.04),
        PositionTest(1, (4, 4), 0.5, 0.25, 1.0, 0.3),
        PositionTest(2, (4, 4), 1.0, 0.25, 3.0, 0.001),
        PositionTest(3, (4, 4), 0.875, 0.125, 2.5, 0.0123456),
        PositionTest(4, (4, 4), 0.625, 0.25, 2.2, 0.02),
    ]
    res = result([run(1), run(2, c=DIFF)], "distribution only", dtest(0.001, ps))
    assert res.text().splitlines()[1:] == [
        "  drafting probabilistic: only the distribution promised, a seeded mismatch is not a failure (why)",
        "  distributions: DIFFERENT (one test over 5 positions, p 0.001; 4 positions stand out)",
        "    token 2: TVD 1.00 (0.25 expected by chance), p 0.001",
        "    token 3: TVD 0.88 (0.12 expected by chance), p 0.0123",
        "    token 4: TVD 0.62 (0.25 expected by chance), p 0.02",
        "  verdict: DIFFERENT — the two sides' output distributions differ",
    ]


def test_text_names_only_the_positions_below_the_level():
    ps = [position(0, p_adj=0.01), position(1, p_adj=0.05)]  # a p of exactly 0.05 does not stand out
    lines = result([run(1)], test=dtest(0.01, ps)).text().splitlines()
    assert [x for x in lines if x.startswith("    token")] == [
        "    token 0: TVD 0.50 (0.20 expected by chance), p 0.01"
    ]


def test_text_consistent_names_no_positions():
    res = result([run(1), run(2, c=DIFF)], "distribution only", dtest(0.5, [position(0, p_adj=0.01)]))
    lines = res.text().splitlines()
    assert lines[2].startswith("  distributions: consistent (one test over 1 positions") and len(lines) == 4


def test_to_json():
    runs = [
        with_figures(run(11), 5, tps=(10.0, 20.0)),
        with_figures(run(12, c=DIFF), 3, tps=(10.0, 40.0)),
        run(13, b_failed="x"),
        run(14, cut=True),
    ]
    t = dtest(0.5, [position(0), position(1)], detectable=0.7)
    res = result(runs, "distribution only", t)
    res.representation = "token bytes"
    assert res.to_json() == {
        "id": "q1",
        "samples": 4,
        "seeded_identical": 1,
        "divergent_seeds": [12],
        "compared_samples": 2,
        "failed_seeds": [13, 14],
        "overall": "verdict: CONSISTENT — seeded bytes differ for 1 of 2 seeds, which this drafting does not "
        "promise; the distributions are consistent · 2 failed requests left out",
        "guarantee": {"drafting": "probabilistic", "promise": "distribution only", "why": "why"},
        "seeded_mismatch_is_failure": False,
        "verdict": "consistent",
        "level": 0.05,
        "test": t.to_json(),
        "compared": "token bytes",
        "positions": [position(0).to_json(), position(1).to_json()],
        "smallest_detectable_tvd": 0.7,
        "acceptance_rate": pytest.approx(0.4),  # median of 0.5 and 0.3
        "speedup": ratio_interval([2.0, 4.0]).to_json(),
    }


def test_to_json_before_any_test_or_guarantee():
    j = result([run(1)]).to_json()
    assert (j["guarantee"], j["test"], j["positions"], j["smallest_detectable_tvd"]) == (None, None, [], None)
    assert (j["speedup"], j["acceptance_rate"], j["compared"], j["divergent_seeds"]) == (None, None, "token ids", [])


# -- the distribution pass ---------------------------------------------------------------------------


def test_the_distribution_pass_compares_token_ids_of_the_compared_seeds():
    runs = [run(1, (1, 2), (1, 3)), run(2, (4, 5), (4, 5)), run(3, (7, 7), (8, 8), b_failed="x")]
    res = result(runs)
    distribution_pass(res, 2)
    assert res.representation == "token ids"
    assert res.test is not None and res.test.n == (2, 2)  # the failed seed left out of both sides
    # position 0 holds 1 and 4 on both sides: no evidence there; position 1: 2,5 against 3,5
    assert [p.position for p in res.test.positions] == [0, 1]
    assert [p.tvd for p in res.test.positions] == [0.0, 0.5]


def test_the_distribution_pass_compares_bytes_where_a_side_lacks_ids():
    runs = [run(1, (1, 2), (1, 2)), run(2, (1, 2), (1, 2), ids=False)]
    res = result(runs)
    distribution_pass(res, 2)
    assert res.representation == "token bytes" and res.test is not None and res.test.n == (2, 2)


def test_ids_tell_apart_tokens_whose_bytes_are_the_same():
    # token ids 1 and 27 both arrive as the byte b"b" (side() writes 97 + id % 26)
    res = result([run(s, (1,), (27,)) for s in range(3)])
    distribution_pass(res, 1)
    assert res.representation == "token ids" and [p.tvd for p in res.test.positions] == [1.0]


def test_bytes_where_the_baseline_gives_no_ids_even_if_the_candidate_does():
    # the same bytes on both sides: compared as bytes they are alike (ids on one side only would differ)
    res = result([run(s, (1, 2), (1, 2), ids=False) for s in range(3)])
    for r in res.runs:  # the candidate's tokens carry their ids, the baseline's none
        r.candidate = side("candidate", (1, 2))
    distribution_pass(res, 2)
    assert res.representation == "token bytes" and [p.tvd for p in res.test.positions] == [0.0, 0.0]


def test_the_distribution_pass_reads_only_the_first_k_tokens():
    runs = [run(s, (1, 2, 3), (1, 2, 9)) for s in range(3)]
    res = result(runs)
    distribution_pass(res, 2)  # the third token, where they differ, is not read
    assert [p.tvd for p in res.test.positions] == [0.0, 0.0]
    distribution_pass(res, 3)
    assert [p.tvd for p in res.test.positions] == [0.0, 0.0, 1.0]


# -- the seeded pass, against two in-process sources --------------------------------------------------


class Source:
    """A source that answers each request with tokens chosen by its seed (`answer(seed)`) and logs it."""

    def __init__(self, name, kind, log, answer, spec_type="none"):
        self.name, self.kind, self.log, self.answer = name, kind, log, answer
        self.url = "http://example.invalid:9"  # not on this machine: no argv is read
        self.info = ServerInfo(self.url, backend=kind, speculative={"type": spec_type})

    async def render_chat(self, messages):
        return "rendered"

    async def stream(self, prompt, params):
        self.log.append((self.name, params.seed, params.cache_prompt, params.temperature))
        yield StreamStarted(1, prompt)
        for i, t in enumerate(self.answer(params.seed)):
            yield TokenEvent(i, t, bytes([97 + t % 26]), 10 + i, "unknown")
        yield StreamFinished(30, "limit")

    async def counters(self):
        return None

    def recorded_verdict(self):
        return None

    def recorded_findings(self):
        return None, None


class Watch(RunObserver):
    def __init__(self):
        self.started, self.finished, self.events = [], [], []

    def event(self, side, ev):
        self.events.append((side, type(ev).__name__))

    def prompt_started(self, prompt, params, order):
        self.started.append((prompt.id, params.seed, order))

    def prompt_finished(self, result):
        self.finished.append((result.prompt.id, result.seed))


def lab(answer_b, answer_c, *, samples=3, kind="llama.cpp", spec_type="none", url=None, **kw):
    log, progress, watch = [], [], Watch()
    b = Source("baseline", "llama.cpp", log, answer_b)
    c = Source("candidate", kind, log, answer_c, spec_type)
    if url is not None:  # where the candidate listens (its process's argv and environment are read there)
        c.url = url
    prompts = [Prompt("a", raw="A"), Prompt("b", raw="B")]
    params = GenerationParams(max_tokens=2, temperature=0.8, seed=7, cache_prompt=True)
    out = asyncio.run(
        sampling(b, c, prompts, params, samples, 1000, observer=watch, progress=lambda *a: progress.append(a), **kw)
    )
    return out, log, progress, watch


def test_the_seeded_pass_requests_each_seed_of_each_prompt_on_both_sides_in_turn():
    out, log, progress, watch = lab(lambda s: (1, 2), lambda s: (1, 2))
    # seeds from seed_base, the prompt cache off, the request's temperature kept; the side that goes first
    # alternates with the seed (baseline first for the first seed)
    assert (
        log
        == [
            ("baseline", 1000, False, 0.8),
            ("candidate", 1000, False, 0.8),
            ("candidate", 1001, False, 0.8),
            ("baseline", 1001, False, 0.8),
            ("baseline", 1002, False, 0.8),
            ("candidate", 1002, False, 0.8),
        ]
        * 2
    )
    assert [(p.id, i, n) for p, i, n in progress] == [("a", 1, 3), ("a", 2, 3), ("a", 3, 3)] + [
        ("b", 1, 3),
        ("b", 2, 3),
        ("b", 3, 3),
    ]
    assert watch.started == [(p, s, "sequential") for p in "ab" for s in (1000, 1001, 1002)]
    assert watch.finished == [(p, s) for p in "ab" for s in (1000, 1001, 1002)]
    # every event of every request reaches the observer, in the order the sides ran
    one = ["StreamStarted", "TokenEvent", "TokenEvent", "StreamFinished"]
    sides = [name for name, *_ in log]
    assert watch.events == [(name, e) for name in sides for e in one]
    assert [r.prompt.id for r in out] == ["a", "b"]
    assert [[r.seed for r in res.runs] for res in out] == [[1000, 1001, 1002]] * 2


def test_every_seed_identical_skips_the_distribution_pass_unless_asked():
    out, *_ = lab(lambda s: (1, 2), lambda s: (1, 2))
    assert [(res.seeded_identical, res.test) for res in out] == [(3, None), (3, None)]
    assert out[0].guarantee == Guarantee("none", "seeded bytes", "the candidate drafts nothing")
    out, *_ = lab(lambda s: (1, 2), lambda s: (1, 2), force_distribution=True)
    assert all(res.test is not None and len(res.test.positions) == 2 for res in out)  # k = max_tokens


def test_a_differing_seed_runs_the_distribution_pass_with_the_candidates_guarantee():
    out, *_ = lab(lambda s: (1, s % 3), lambda s: (1, 2), kind="vllm")
    assert [res.seeded_identical for res in out] == [1, 1]  # seed 1001 alone: 1001 % 3 == 2
    assert all(res.test is not None and res.test.n == (3, 3) for res in out)
    assert out[0].guarantee.promise == "distribution only" and out[0].representation == "token ids"


def test_the_guarantee_reads_the_argv_and_environment_given():
    argv = ["llama-server", "-md", "d", "--spec-draft-sampling", "probabilistic"]
    out, *_ = lab(lambda s: (1, 2), lambda s: (1, 2), samples=1, candidate_argv=argv, candidate_env={})
    assert out[0].guarantee.drafting == "probabilistic"
    out, *_ = lab(
        lambda s: (1, 2),
        lambda s: (1, 2),
        samples=1,
        candidate_argv=["llama-server", "-md", "d"],
        candidate_env={SAMPLING_ENV: "probabilistic"},
    )
    assert out[0].guarantee.why.startswith("launched with LLAMA_ARG_SPEC_DRAFT_SAMPLING in its environment")
    # no argv given and none readable (the source is not on this machine): what the server reports decides
    out, *_ = lab(lambda s: (1, 2), lambda s: (1, 2), samples=1, spec_type="ngram-simple")
    assert out[0].guarantee.drafting == "n-gram"


def test_without_an_argv_given_the_seeded_pass_reads_the_local_candidates():
    with listener(args=("-md", "d.gguf"), env={SAMPLING_ENV: "probabilistic"}) as (port, _):
        out, *_ = lab(lambda s: (1, 2), lambda s: (1, 2), samples=1, url=f"http://127.0.0.1:{port}")
    assert out[0].guarantee.drafting == "probabilistic"
    assert out[0].guarantee.why.startswith("launched with LLAMA_ARG_SPEC_DRAFT_SAMPLING in its environment")
    with listener(args=("-md", "d.gguf", "--spec-draft-sampling", "probabilistic")) as (port, _):
        out, *_ = lab(lambda s: (1, 2), lambda s: (1, 2), samples=1, url=f"http://127.0.0.1:{port}")
    assert out[0].guarantee.why.startswith("launched with --spec-draft-sampling probabilistic")
