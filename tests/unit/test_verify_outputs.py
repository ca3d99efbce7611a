"""V(k) and B(n) with every position's outputs added (labs.theory.outputs, machine.verify_probe),
and the draft server started with the candidate's own threads and offload (backends.launchspec,
machine.drafter). Figures here are made up; each expected value is computed by hand beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from spectui.backends.launchspec import LaunchSpec
from spectui.core.errors import InputError
from spectui.labs.sweep.predict import predict_level
from spectui.labs.theory.curve import CostCurve, Samples
from spectui.labs.theory.outputs import probe_settings
from spectui.machine.drafter import drafter_argv
from spectui.machine.verify_probe import parse, probe_argv


def s(*v: float) -> Samples:
    return Samples(tuple(v))


def curve(extra: bool) -> CostCurve:
    return CostCurve(
        context=100,
        repeats=1,
        target_step=s(10.0),
        target_batch={1: s(12.0), 3: s(20.0), 5: s(30.0)},
        output_extra={1: s(0.0), 3: s(4.0), 5: s(8.0)} if extra else None,
    )


def test_verify_cost_adds_every_positions_outputs():
    last, every = curve(False).terms(), curve(True).terms()
    # prompt batch: 1 + (30 - 12)/10 = 2.8; with the outputs: 1 + (30 + 8 - 12)/10 = 3.6
    assert abs(last.V(5) - 2.8) < 1e-9 and abs(every.V(5) - 3.6) < 1e-9
    # between measured k, both interpolate: k = 4 → prompt 25, outputs 6 → 1 + (31 - 12)/10 = 2.9
    assert abs(every.V(4) - 2.9) < 1e-9
    assert every.V(1) == 1.0


def test_the_sweeps_batch_cost_uses_the_same_outputs():
    # n = 1 … with one drafted token per round and E = 2: B(1) = 1, candidate round = V(2) (no draft model
    # measured: c = None → nothing added); V(2) = 1 + (16 + 2 - 12)/10 = 1.6 with outputs, 1.4 without
    assert abs(predict_level(curve(True), 1, 2.0, 1.0) - 2 / 1.6) < 1e-9
    assert abs(predict_level(curve(False), 1, 2.0, 1.0) - 2 / 1.4) < 1e-9


def test_round_trip_and_older_records_without_outputs_still_load():
    c = curve(True)
    again = CostCurve.from_json(c.to_json())
    assert again.output_extra is not None and again.terms().V(5) == c.terms().V(5)
    old = curve(False).to_json()
    del old["output_extra"]  # terms recorded before outputs were timed
    assert CostCurve.from_json(old).output_extra is None


def test_a_negative_output_extra_is_a_measured_difference_and_loads():
    """output_extra is every position's outputs less the last's, two measured times: noise on a busy machine
    makes it negative (seen: -0.86 and -10.3 ms at k 2 and 5), and a record that says so must load and verify;
    a negative time itself (a step, a batch) is still refused."""
    c = curve(True)
    c.output_extra = {1: s(0.0), 3: s(-0.86), 5: s(-10.3)}
    again = CostCurve.from_json(c.to_json())
    assert again.output_extra is not None and again.output_extra[5].median == -10.3
    bad = curve(True).to_json()
    bad["target_batch"]["3"]["ms"] = [-1.0]
    with pytest.raises(InputError, match="target_batch"):
        CostCurve.from_json(bad)


def test_parse_reads_the_probes_lines_and_the_extra_per_repeat():
    got = parse(
        '{"k":3,"mode":"last","outputs":1,"ms":20.0}\n{"k":3,"mode":"all","outputs":3,"ms":26.5}\n'
        '{"k":3,"mode":"last","outputs":1,"ms":21.0}\n{"k":3,"mode":"all","outputs":3,"ms":25.0}\n'
    )
    assert got.outputs == {(3, "last"): 1, (3, "all"): 3}
    assert got.extra() == {3: [6.5, 4.0]}


def test_probe_argv_and_settings_from_the_baselines_command_line():
    spec = LaunchSpec.from_argv(["llama-server", "-m", "t.gguf", "-t", "4", "-tb", "6", "-ngl", "99"])
    assert probe_settings(spec)[:3] == (4, 6, 99)
    assert probe_settings(LaunchSpec())[:3] == (1, 1, 0)
    argv = probe_argv(Path("/p"), Path("/m.gguf"), [5, 1, 3, 3], 2, 4, 6, 99, 200)
    assert argv == ["/p", "/m.gguf", "4", "6", "99", "200", "2", "1,3,5"]


def test_a_candidate_at_t_2_has_its_draft_timed_at_t_2():
    spec = LaunchSpec.from_argv(
        ["llama-server", "-m", "t.gguf", "-md", "d.gguf", "-t", "2", "-ngld", "5", "-c", "4096"]
    )
    argv = drafter_argv(Path("/bin/llama-server"), Path("d.gguf"), spec.draft_server_args())
    # llama.cpp takes the last of a repeated flag: the candidate's own come after the defaults
    last = {flag: argv[len(argv) - 1 - argv[::-1].index(flag) + 1] for flag in ("-t", "-ngl", "-c")}
    assert last == {"-t": "2", "-ngl": "5", "-c": "4096"}
    # -td names the draft's own threads (common/arg.cpp --spec-draft-threads)
    own = LaunchSpec.from_argv(["llama-server", "-t", "8", "-td", "3"]).draft_server_args()
    assert own[:2] == ["-t", "3"]
    assert LaunchSpec().draft_server_args() == []


def test_c_is_the_draft_decode_as_the_candidate_runs_it_where_the_probe_timed_it():
    c = curve(False)
    c.draft_step = s(20.0)  # on the draft's own llama-server, its loop included
    assert c.c() == 2.0
    c.draft_decode = s(5.0)  # on the probe: decode and sampling only
    assert c.c() == 0.5 and CostCurve.from_json(c.to_json()).c() == 0.5


def test_a_candidate_at_t_2_has_its_draft_decode_probed_at_t_2(monkeypatch, tmp_path):
    import asyncio

    from spectui.labs.theory import outputs
    from spectui.machine import verify_probe

    model = tmp_path / "d.gguf"
    model.write_bytes(b"GGUF")
    seen = {}

    async def fake_measure(binary, m, prefix, ks, repeats, threads, threads_batch, ngl):
        seen.update(model=m, ks=ks, threads=threads, threads_batch=threads_batch, ngl=ngl)
        got = verify_probe.OutputTimes()
        got.all[1] = [4.0, 6.0, 5.0]
        return got

    monkeypatch.setattr(verify_probe, "find_or_build", lambda: (Path("/probe"), ""))
    monkeypatch.setattr(verify_probe, "measure", fake_measure)
    c = curve(False)
    c.draft_step, c.sources["c"] = s(20.0), "measured: on its server"
    spec = LaunchSpec.from_argv(["llama-server", "-md", str(model), "-t", "2", "-ngld", "3"])
    asyncio.run(outputs.add_draft_decode(c, str(model), spec, [1, 2, 3], 3))
    assert seen == {"model": model, "ks": [1], "threads": 2, "threads_batch": 2, "ngl": 3}
    assert c.c() == 0.5 and "-t 2, -ngl 3: no server loop" in c.sources["c"]
