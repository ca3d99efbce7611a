"""The concurrency sweep against real llama-server processes (-np 4), and the theory screen."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from spectui.cli.main import main
from spectui.labs.theory import formula as theory
from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv
from tests.oracles import log_t_interval
from tests.pilot import ready, until


@pytest.fixture(scope="module")
def four_slot_servers(assets_found_module):
    found = assets_found_module
    with Launcher() as launcher:
        base = launcher.add(ServerProcess("baseline", []))
        cand = launcher.add(ServerProcess("candidate", []))
        base.argv = llama_server_argv(found.llama_server, found.model, base.port, slots=4, ctx=4096)
        cand.argv = llama_server_argv(
            found.llama_server,
            found.model,
            cand.port,
            slots=4,
            ctx=4096,
            extra=["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", "8"],
        )
        launcher.start_all()
        yield base.url, cand.url


@pytest.fixture(scope="module")
def assets_found_module():
    from tests.conftest import _need_assets

    return _need_assets()


@pytest.mark.server
def test_sweep_repeat_gives_each_level_its_interval_and_compares_every_run(four_slot_servers, capsys, tmp_path):
    base, cand = four_slot_servers
    svg, nb = tmp_path / "s.svg", tmp_path / "nb.toml"
    code = main(
        [
            "sweep",
            "--baseline",
            base,
            "--candidate",
            cand,
            "--concurrency",
            "1,2",
            "--prompts",
            "quick",
            "--max-tokens",
            "8",  # the interval needs its 3 runs, not long outputs
            "--repeat",
            "3",
            "--json",
            "--svg",
            str(svg),
            "--notebook",
            str(nb),
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == (0 if all(lv["identical"] for lv in doc["levels"]) else 3)
    import tomllib

    for lv in doc["levels"]:
        assert lv["runs"] == 3 and len(lv["per_run_tps"]) == 3
        ratios = [c / b for b, c in lv["per_run_tps"]]
        # the speed-up is the geometric mean of the paired per-run ratios, with a 95 % t-interval on their logs
        mid, low, high = log_t_interval(ratios)
        assert lv["speedup"] == pytest.approx(mid)
        assert (lv["speedup_low"], lv["speedup_high"]) == pytest.approx((low, high))
        assert lv["outputs_compared"] == 3 * lv["concurrency"]  # every run's outputs, not only the first
    ET.fromstring(svg.read_text())
    assert svg.read_text().count('stroke-width="1.5"') == 2  # one error bar per level
    rows = tomllib.loads(nb.read_text())["measurement"]
    assert [r["runs"] for r in rows] == [3, 3] and all("speedup_low" in r for r in rows)


def test_sweep_repeat_zero_is_a_usage_error(capsys):
    assert (
        main(["sweep", "--baseline", "http://127.0.0.1:9", "--candidate", "http://127.0.0.1:9", "--repeat", "0"]) == 2
    )
    assert "--repeat must be at least 1" in capsys.readouterr().err


def test_bad_concurrency_is_a_usage_error(capsys):
    assert main(["sweep", "--baseline", "http://x", "--candidate", "http://y", "--concurrency", "1,zero"]) == 2
    assert "--concurrency" in capsys.readouterr().err


def test_from_measurement_explains_the_gap():
    m = theory.from_measurement(80.0, 24.0, 120, 45, 15)
    # α on the curve is per position (Σ_{i≤8} α^i = 45/15 = 3), not accepted/drafted = 0.375
    assert sum(m["alpha"] ** i for i in range(1, 9)) == pytest.approx(3.0)
    assert m["acceptance_per_drafted_token"] == pytest.approx(0.375) and m["gamma"] == pytest.approx(8.0)
    assert m["measured_speedup"] == pytest.approx(0.3)
    # the cost model T = t(γc + 1) reproduces the measured step time
    t, T = 1 / 80.0, (1 + 45 / 15) / 24.0
    assert T == pytest.approx(t * (m["gamma"] * m["implied_cost"] + 1))
    assert "verification step took" in m["why"]
    assert theory.from_measurement(80.0, 24.0, 0, 0, 0) is None


async def test_theory_screen_shows_the_worked_example():
    from textual.app import App

    from spectui.tui.screens.theory_screen import TheoryScreen

    class A(App):
        def on_mount(self):
            self.push_screen(TheoryScreen(0.8, 4, 0.05))

    app = A()
    async with app.run_test(size=(150, 45)) as pilot:
        # pushed from on_mount: composed, and its on_mount drew the table
        await until(
            pilot,
            lambda: isinstance(app.screen, TheoryScreen) and any(str(w.render()) for w in app.screen.query("#table")),
            10,
            "the theory screen's table",
        )
        table = app.screen.query_one("#table")
        text = str(table.render())
        assert "3.36" in text and "2.80×" in text
        app.screen.query_one("#alpha").value = "1.5"
        # the input's Changed message reaches the screen a few message hops later
        await until(pilot, lambda: str(table.render()) != text, 10, "the table for the new α")
        assert "[0, 1)" in str(app.screen.query_one("#table").render())


@pytest.mark.server
async def test_sweep_screen_fills_every_level(four_slot_servers, monkeypatch):
    from spectui.core.types import GenerationParams
    from spectui.machine.probes import GPUProbe
    from spectui.tui.app import AppConfig, make_app
    from tests.fakes import FakeNVML

    base, cand = four_slot_servers
    app = make_app(
        AppConfig(
            base,
            cand,
            prompt_set="quick",
            params=GenerationParams(max_tokens=8),
            autosave=False,
            gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
        )
    )
    import spectui.labs.sweep.levels as sweep_lab

    seen = []  # the levels the screen drew, to check each row against their outputs' raw bytes
    real_sweep = sweep_lab.sweep

    async def spy(*a, **k):
        levels = await real_sweep(*a, **k)
        seen.extend(levels)
        return levels

    monkeypatch.setattr(sweep_lab, "sweep", spy)
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot, app)
        await pilot.press("alt+s")
        await until(pilot, lambda: app.screen.query("#levels"), 10, "the sweep screen")
        await pilot.press("enter")
        table = app.screen.query_one("#levels")
        await until(  # an upper bound: three levels of real runs on a loaded machine
            pilot, lambda: table.row_count == 3 and "done" in str(app.screen.query_one("#status").render()), timeout=300
        )
        assert [table.get_row_at(i)[0] for i in range(3)] == ["1", "2", "4"]
        assert [lv.concurrency for lv in seen] == [1, 2, 4]
        for i, lv in enumerate(seen):
            pairs = list(zip(lv.baseline.recorders, lv.candidate.recorders))
            # one model on both sides: a pair differs in its bytes or in its token ids (README)
            differ = sum(
                (b.output(), [t.token_id for t in b.tokens]) != (c.output(), [t.token_id for t in c.tokens])
                for b, c in pairs
            )
            want = f"{differ}/{len(pairs)} DIFFER" if differ else f"{len(pairs)}/{len(pairs)} identical"
            assert str(table.get_row_at(i)[6]).startswith(want), (i, table.get_row_at(i)[6])
