"""The formula's terms, measured and checked: a synthetic server pair with known α, γ, c and
cost curve, timed through labs.theory.costs.measure as a real llama-server would answer, must give back each
term within 2 %, a prediction within 2 % of the measured speed-up, and — where the run hides a cost the
terms do not hold — name that cost and its size."""

from __future__ import annotations

import asyncio
import random

import pytest

from spectui.backends.llamacpp_timing import CompletionTimings
from spectui.core.events import StepEvent, StreamFinished, StreamStarted, TokenEvent
from spectui.core.figures import SideRecorder
from spectui.core.runner import PromptResult
from spectui.core.types import Prompt
from spectui.labs.sweep import predict as sweep_costs
from spectui.labs.theory import costs, terms
from spectui.labs.theory import curve as cost_curve
from spectui.labs.theory import formula as theory

T_MS = 10.0  # one target decode step
ALPHA, GAMMA, C = 0.8, 4, 0.3


def V(k: float) -> float:  # the target's verification cost, target steps: linear, as on a CPU
    return 1 + 0.5 * (k - 1)


def R(k: float) -> float:  # the draft's re-evaluation of the verified batch
    return 0.1 * k


class FakeServer:
    """A llama-server's /completion timings from a known cost curve: a prompt cache that reuses the
    longest common prefix (all but the last token where the whole prompt is cached), prompt_ms for the
    tokens processed, predicted_ms for the decode steps, each time off by up to ±1 %."""

    def __init__(self, prompt_ms, step_ms: float, seed: int = 0) -> None:
        self.cached: list[int] = []
        self.prompt_ms, self.step_ms = prompt_ms, step_ms
        self.rng = random.Random(seed)
        self.calls = 0

    def noise(self) -> float:
        return 1 + self.rng.uniform(-0.01, 0.01)

    async def __call__(self, ids: list[int], n_predict: int) -> CompletionTimings:
        self.calls += 1
        common = 0
        while common < min(len(ids), len(self.cached)) and ids[common] == self.cached[common]:
            common += 1
        common = min(common, len(ids) - 1)
        k = len(ids) - common
        self.cached = list(ids)
        return CompletionTimings(
            common, k, self.prompt_ms(k) * self.noise(), n_predict, (n_predict - 1) * self.step_ms * self.noise(), 0
        )


def servers(seed: int = 0):
    target = FakeServer(lambda k: 4.0 + T_MS * V(k), T_MS, seed)  # 4 ms of the request's own overhead
    draft = FakeServer(lambda k: T_MS * R(k), C * T_MS, seed + 1)
    cand = FakeServer(lambda k: 4.0 + T_MS * (V(k) + R(k)), T_MS, seed + 2)
    return target, draft, cand


def measured_curve(ks=range(1, GAMMA + 2), seed: int = 0) -> cost_curve.CostCurve:
    target, draft, cand = servers(seed)
    prefix, continuation = list(range(100, 160)), list(range(500, 540))
    return asyncio.run(
        costs.measure(target, prefix, continuation, ks, draft=draft, candidate=cand, drafting=cost_curve.DRAFT_MODEL)
    )


def synthetic_events(
    alpha=ALPHA,
    gamma=GAMMA,
    c=C,
    steps=3000,
    seed=0,
    early_every=0,
    plain_every=0,
    hidden_fixed=0.0,
    hidden_per_token=0.0,
):
    """Both sides' events for a prompt whose candidate follows the cost model: each step drafts γ (or,
    every `early_every` steps, stops early at a random length: one more draft decode), accepts each
    position with probability α given the ones before, and takes n_dec·c + V(d+1) + R(d+1) target steps,
    plus `hidden_fixed` per step and `hidden_per_token` per drafted token that no measured term holds;
    every `plain_every` steps the draft is empty (c + 1 + R(1))."""
    rng = random.Random(seed)
    cand = [StreamStarted(0, "p"), TokenEvent(0, 1, b"x", 1, "first")]
    n, now, k = 1, 0.0, 0
    for j in range(steps):
        if plain_every and j % plain_every == 0:
            now += T_MS * (c + 1 + R(1) + hidden_fixed)
            cand.append(TokenEvent(n, 1, b"x", int(now * 1e6), "target"))
            n += 1
            continue
        d = gamma if not (early_every and j % early_every == 1) else rng.randint(1, gamma - 1)
        decodes = d if d >= gamma else d + 1
        a = 0
        while a < d and rng.random() < alpha:
            a += 1
        k += 1
        now += T_MS * (decodes * c + V(d + 1) + R(d + 1) + hidden_fixed + hidden_per_token * d)
        cand.append(StepEvent(k, d, a, int(now * 1e6)))
        for i in range(a + 1):
            cand.append(TokenEvent(n, 1, b"x", int(now * 1e6) + 1, "accepted" if i < a else "target", k))
            n += 1
    settings = {"speculative.n_max": gamma, "speculative.types": "none,draft-simple"}
    cand.append(StreamFinished(int(now * 1e6) + 2, "limit", {"predicted_n": n, "predicted_ms": now}, settings=settings))
    base = [StreamStarted(0, "p")]
    for i in range(n):
        base.append(TokenEvent(i, 1, b"x", int(i * T_MS * 1e6) + 1, "first" if i == 0 else "unknown"))
    base.append(StreamFinished(int(n * T_MS * 1e6), "limit", {"predicted_n": n, "predicted_ms": (n - 1) * T_MS}))
    return base, cand


def synthetic_run(**kw) -> PromptResult:
    """synthetic_events through the recorders, as a live stream's would go."""
    recs = [SideRecorder("baseline"), SideRecorder("candidate")]
    for rec, events in zip(recs, synthetic_events(**kw)):
        for ev in events:
            rec.feed(ev)
    return PromptResult(Prompt("p"), *recs)


# -- each term recovered within 2 % -----------------------------------------------------------------------


def test_the_measured_terms_recover_c_and_the_cost_curve_within_2_percent():
    curve = measured_curve()
    assert curve.measured and curve.left_out == 0
    assert curve.step_ms() == pytest.approx(T_MS, rel=0.02)
    tc = curve.terms()
    assert tc.c == pytest.approx(C, rel=0.02)
    for k in range(1, GAMMA + 2):
        assert tc.V(k) == pytest.approx(V(k), rel=0.02), k
        assert tc.R(k) == pytest.approx(R(k), rel=0.02), k
    # the ideal's V(k) = 1 is what the measurement replaces: at γ+1 = 5 it is 3 target steps here
    assert tc.V(GAMMA + 1) == pytest.approx(3.0, rel=0.02)
    assert len(curve.terms_each()) == curve.repeats == 3


def test_a_synthetic_run_is_predicted_within_2_percent_and_alpha_gamma_come_back():
    curve = measured_curve()
    r = synthetic_run()
    chk = terms.check_runs([r], curve.terms(), curve.terms_each())
    assert chk is not None
    assert chk.alpha == pytest.approx(ALPHA, rel=0.02)
    assert chk.gamma == pytest.approx(GAMMA, rel=0.02)
    assert chk.costs.c == pytest.approx(C, rel=0.02)
    assert chk.predicted == pytest.approx(chk.measured, rel=0.02)
    # per-position acceptance from the labels follows α^i
    for i, share in enumerate(chk.by_position, 1):
        assert share == pytest.approx(ALPHA**i, abs=0.03)
    assert chk.step_predicted == pytest.approx(chk.step_measured, rel=0.02)
    # the ideal formula with the measured c overestimates: the verification is not one step here
    names = [t.name for t in chk.terms]
    assert names[0].startswith("ideal") and chk.terms[0].speedup > 2 * chk.predicted


def test_early_stops_and_empty_drafts_are_costed_as_llama_cpp_makes_them():
    curve = measured_curve()
    r = synthetic_run(early_every=3, plain_every=5, seed=3)
    chk = terms.check_runs([r], curve.terms())
    assert chk.predicted == pytest.approx(chk.measured, rel=0.02)
    assert "plain" in chk.terms[-1].measured


def test_repeated_runs_put_the_prediction_inside_the_measured_interval():
    curve = measured_curve()
    runs = [synthetic_run(steps=600, seed=s) for s in range(4)]
    for i, r in enumerate(runs, 1):
        r.run, r.runs = i, 4
    chk = terms.check_runs(runs, curve.terms(), curve.terms_each())
    assert chk.runs == 4 and chk.measured_low is not None
    assert chk.agree is True and chk.miss is None, chk.text()


# -- the term that misses is named, never fitted ----------------------------------------------------------


def test_a_fixed_cost_per_step_the_terms_lack_is_named_with_its_size():
    curve = measured_curve()
    runs = [synthetic_run(steps=600, seed=s, early_every=2, hidden_fixed=0.8) for s in range(3)]
    for i, r in enumerate(runs, 1):
        r.run, r.runs = i, 3
    chk = terms.check_runs(runs, curve.terms(), curve.terms_each())
    assert chk.agree is False
    assert "fixed cost per step" in chk.miss
    fixed = float(chk.miss.split("a fixed ")[1].split(" target steps")[0])
    assert fixed == pytest.approx(0.8, abs=0.05)
    assert chk.costs.c == pytest.approx(C, rel=0.02)  # c stays what was measured


def test_a_per_token_cost_the_terms_miss_is_named_as_such():
    curve = measured_curve()
    runs = [synthetic_run(steps=600, seed=s, early_every=2, hidden_per_token=0.25) for s in range(3)]
    for i, r in enumerate(runs, 1):
        r.run, r.runs = i, 3
    chk = terms.check_runs(runs, curve.terms(), curve.terms_each())
    assert chk.agree is False
    assert "cost per drafted token" in chk.miss
    slope = float(chk.miss.split("grows by ")[1].split(" target steps")[0])
    assert slope == pytest.approx(0.25, abs=0.03)


# -- best γ, break-even, the fallbacks --------------------------------------------------------------------


def test_best_gamma_and_break_even_come_from_the_measured_curve():
    tc = measured_curve(ks=range(1, 10)).terms()
    # S(0.8, γ) = E / (0.3γ + 1 + 0.5γ + 0.1(γ+1)): falls from γ = 1 on
    best = max(range(1, 9), key=lambda g: theory.tokens_per_step(0.8, g) / (0.9 * g + 1.1))
    chk = terms.check_runs([synthetic_run(steps=500)], tc)
    assert chk.best_gamma == best == 1
    # a step of γ = 4 costs 0.3·4 + V(5) + R(5) = 4.7 target steps: only α near 1 yields that many tokens
    be = chk.break_even_alpha
    assert be is not None and be > 0.95 and tc.speedup(be, 4) == pytest.approx(1.0, abs=1e-6)
    assert chk.break_even_c is not None and chk.break_even_c < 0  # no draft cost makes it pay at α 0.8
    never = terms.StepCosts(0.3, tuple(1 + 0.9 * (k - 1) for k in range(1, 10)))
    assert terms._break_even_alpha(never, 4) is None  # (γ+1)/(γc + V(γ+1)) ≤ 1: never pays
    free = terms.StepCosts(0.0, tuple(1.0 for _ in range(9)))
    assert terms._break_even_alpha(free, 4) == 0.0
    cheap = terms.StepCosts(0.05, (1.0, 1.02, 1.04, 1.06, 1.08))
    be = terms._break_even_alpha(cheap, 4)
    assert be is not None and cheap.speedup(be, 4) == pytest.approx(1.0, abs=1e-6)


def test_an_ngram_candidate_has_c_zero_and_says_so():
    target, _, cand = servers()
    curve = asyncio.run(
        costs.measure(
            target, list(range(60)), list(range(500, 520)), range(1, 5), candidate=cand, drafting=cost_curve.NGRAM
        )
    )
    tc = curve.terms()
    assert tc.c == 0.0 and tc.R(5) == 0.0 and not tc.draft_model
    assert tc.step(4, 4) == pytest.approx(V(5), rel=0.02)
    chk = terms.check(terms.RunSteps((4,) * 10, (4,) * 10, 0, 4), tc, 1.5)
    assert any("n-gram" in n for n in chk.notes)


def test_a_server_that_does_not_reuse_the_prefix_gives_no_verification_term():
    class Cold(FakeServer):
        async def __call__(self, ids, n_predict):
            self.cached = []  # a server with the prompt cache off
            return await super().__call__(ids, n_predict)

    target = Cold(lambda k: 4.0 + T_MS * V(k), T_MS)
    curve = asyncio.run(costs.measure(target, list(range(60)), list(range(500, 520)), range(1, 4)))
    assert not curve.measured and curve.left_out > 0
    assert "not reuse" in curve.sources["verify"]
    tc = curve.terms()
    assert tc.V(4) == 1.0 and "ideal" in tc.sources["verify"]


def test_servers_without_prompt_timings_fall_back_to_the_ideal_labelled():
    src = costs.ideal_sources(cost_curve.DRAFT_MODEL, "the baseline (vllm) reports no per-request prompt timings")
    curve = cost_curve.CostCurve(0, 0, None, {}, sources=src)
    tc = curve.terms()
    assert tc.V(9) == 1.0 and tc.R(9) == 0.0
    assert "vllm" in tc.sources["verify"] and "ideal" in tc.sources["verify"]
    assert "c = 0 assumed" in tc.sources["c"]


def test_the_candidate_is_asked_only_one_token_requests_and_two_batch_sizes():
    target, draft, cand = servers()
    seen = []

    async def candidate(ids, n):
        seen.append((len(ids), n))
        return await cand(ids, n)

    asyncio.run(
        costs.measure(target, list(range(60)), list(range(500, 520)), range(1, 6), draft=draft, candidate=candidate)
    )
    assert {n for _, n in seen} == {1}  # the first token comes from the prompt batch: no draft is ever made
    assert {k - 60 for k, _ in seen[1:]} == {1, 5}


# -- the sweep: the collapse, predicted -------------------------------------------------------------------


def test_the_sweep_prediction_at_one_matches_the_single_run_and_falls_where_batches_cost():
    curve = measured_curve(ks=[1, 2, 4, 5, 8, 10, 16, 20])
    e, g = theory.tokens_per_step(ALPHA, GAMMA), GAMMA
    one = sweep_costs.predict_level(curve, 1, e, g, n_max=GAMMA)
    assert one == pytest.approx(e / (GAMMA * C + V(GAMMA + 1) + R(GAMMA + 1)), rel=0.02)

    # memory-bound hardware: a batch costs one step up to 8 tokens, then grows: speculation pays at
    # concurrency 1 and collapses as the batches of n·(γ+1) outgrow what the hardware hides
    def flat(k):
        return 4.0 + T_MS * (1 + max(0.0, k - 8) * 0.5)

    target = FakeServer(flat, T_MS)
    draft = FakeServer(lambda k: T_MS * 0.02 * k, 0.05 * T_MS)
    gpu = asyncio.run(
        costs.measure(target, list(range(60)), list(range(500, 560)), [1, 2, 4, 5, 8, 10, 20], draft=draft)
    )
    s = [sweep_costs.predict_level(gpu, n, e, g, n_max=GAMMA) for n in (1, 2, 4)]
    assert s[0] > 2.0 and s[0] > s[1] > s[2]


# -- the command line -------------------------------------------------------------------------------------


def synthetic_session(path, runs: int = 2) -> None:
    from spectui.core.types import GenerationParams, ServerInfo
    from spectui.core.verdict import judge
    from spectui.store.session_writer import SessionWriter

    w = SessionWriter(path)
    w.servers({s: ServerInfo(url="http://127.0.0.1:9", model="m.gguf", build="b1") for s in ("baseline", "candidate")})
    for i in range(1, runs + 1):
        w.prompt(Prompt("p", raw="x"), GenerationParams(max_tokens=64), "sequential")
        base, cand = synthetic_events(steps=200, seed=i, early_every=2)
        for side, events in (("baseline", base), ("candidate", cand)):
            for ev in events:
                w.event(side, ev, base_ns=0)
        r = synthetic_run(steps=200, seed=i, early_every=2)
        r.verdict, r.run, r.runs = judge(r.baseline, r.candidate, True), i, runs
        w.result(r)
    w.close()


def test_theory_from_a_session_without_measuring_is_the_ideal_labelled_and_names_the_miss(tmp_path, capsys):
    import json

    from spectui.cli.main import main

    path = tmp_path / "s.jsonl"
    synthetic_session(path)
    assert main(["theory", "--from", str(path), "--no-measure", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (p,) = doc["prompts"]
    chk = p["check"]
    assert p["measurement"] is None and chk["runs"] == 2
    assert chk["verification_cost"] == {"1": 1.0} and "ideal" in chk["sources"]["verify"]
    assert chk["alpha_per_position"] == pytest.approx(ALPHA, abs=0.05)
    # the ideal formula promises E; the run's steps cost n_dec·c + V + R: the miss is named, c not fitted
    assert chk["predicted_speedup"] == pytest.approx(chk["tokens_per_step"], rel=0.02)
    assert chk["agree"] is False and "per drafted token" in chk["miss"] and " is above the interval" in chk["miss"]
    assert chk["draft_cost_c"] == 0.0 and chk["measured_speedup"] < chk["predicted_speedup"] / 2
    assert main(["theory", "--from", str(path), "--no-measure"]) == 0
    text = capsys.readouterr().out
    assert "predicted from the ideal formula's terms (none measured)" in text and "ideal (c = 0, V = 1, R = 0)" in text
    assert "the measured terms" not in text  # nothing was measured


@pytest.mark.parametrize(
    "argv,said",
    [
        (["theory", "--from", "s.jsonl", "--alpha", "0.5"], "leave out --alpha"),
        (["theory", "--gamma", "4"], "give --alpha, --gamma and --cost"),
        (
            ["theory", "--alpha", "0.5", "--gamma", "4", "--cost", "0.1", "--no-measure"],
            "--no-measure goes with --from",
        ),
        (["theory", "--from", "/nonexistent/s.jsonl"], "does not exist"),
        (["theory", "--from", "s.jsonl", "--repeats", "0"], "--repeats must be at least 1"),
    ],
)
def test_theory_command_line_errors_are_one_line(argv, said, capsys):
    from spectui.cli.main import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err


def test_typed_numbers_keep_working(capsys):
    from spectui.cli.main import main

    assert main(["theory", "--alpha", "0.8", "--gamma", "4", "--cost", "0.05"]) == 0
    assert "2.80×" in capsys.readouterr().out
