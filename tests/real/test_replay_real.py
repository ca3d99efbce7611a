"""Replay of a session recorded from real llama-servers: the same labels and figures as the live run
(the verdict through every view, on pairs that differ, is tests/unit/test_one_verdict.py)."""

from __future__ import annotations

import json

import pytest

from spectui.cli.main import main
from spectui.store.session import load_session
from tests.pilot import until

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def recorded(llama_servers, tmp_path_factory):
    """A live run against real servers, saved; the compare JSON kept to check the replay against."""
    import contextlib
    import io

    path = tmp_path_factory.mktemp("s") / "run.jsonl"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(
            [
                "compare",
                "--baseline",
                llama_servers["baseline"],
                "--candidate",
                llama_servers["draft"],
                "--prompts",
                "quick",
                "--max-tokens",
                "48",
                "--save",
                str(path),
                "--json",
            ]
        )
    assert code == 0
    return path, json.loads(out.getvalue())


def test_replay_gives_the_same_labels_figures_and_verdict(recorded, capsys):
    path, live = recorded
    assert main(["replay", str(path), "--no-tui", "--json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    for a, b in zip(live["prompts"], replayed["prompts"], strict=True):
        assert a["identical"] == b["identical"] and a["first_divergence"] == b["first_divergence"]
        for side in ("baseline", "candidate"):
            for key in (
                "tokens",
                "label_counts",
                "drafted",
                "accepted",
                "steps",
                "ttft_ms",
                "decode_tps",
                "acceptance_rate",
                "mean_accepted_length",
                "output",
                "metrics_check",
            ):
                assert a[side][key] == b[side][key], (side, key)
        assert a["speedup"] == b["speedup"]
    assert replayed["candidate"]["build"] == live["candidate"]["build"]


@pytest.mark.server
async def test_replay_in_the_tui_matches_the_live_run(recorded):
    """Replay is another event source for the same UI: same labels, figures and verdict as the live run."""
    from spectui.machine.probes import GPUProbe
    from spectui.store.replay import ReplayControl, SessionBackend
    from spectui.tui.app import AppConfig, make_app
    from tests.fakes import FakeNVML

    path, live = recorded
    session = load_session(path)
    control = ReplayControl(None)
    cfg = AppConfig(
        session.infos["baseline"].url,
        session.infos["candidate"].url,
        prompts=[p.prompt for p in session.prompts],
        backends={s: SessionBackend(s, session, None, control) for s in ("baseline", "candidate")},
        replay_control=control,
        autorun_all=True,
        gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
        autosave=False,
    )
    app = make_app(cfg)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: len(app.results) == len(live["prompts"]) and app.run_done.is_set(), timeout=120)
        assert len(app.results) == len(live["prompts"])
        for r, want in zip(app.results, live["prompts"]):
            assert r.identical == want["identical"]
            for side in ("baseline", "candidate"):
                f = getattr(r, side).figures
                assert f.label_counts == want[side]["label_counts"]
                assert (f.tokens, f.drafted, f.accepted, f.steps) == tuple(
                    want[side][k] for k in ("tokens", "drafted", "accepted", "steps")
                )
                assert f.ttft_ms == pytest.approx(want[side]["ttft_ms"]) and f.decode_tps == pytest.approx(
                    want[side]["decode_tps"]
                )
        banner = str(app.q("#banner").render())
        assert "IDENTICAL" in banner
