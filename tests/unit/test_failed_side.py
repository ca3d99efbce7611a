"""A failed side is never recorded as a measurement: the candidate's stream is cut
before its first token, in the middle, and after its last token but before the final event; compare's
JSON and text, replay, the reports, the notebook, the sweep and the TUI then give no speed-up, no
acceptance and no rate for it anywhere, and say why."""

from __future__ import annotations

import json
import tomllib

import pytest

from spectui.cli.main import main
from tests.recorded_server import RecordedServer
from tests.recordings import BASELINE, DRAFT, payloads

BASE, CAND = payloads(BASELINE), payloads(DRAFT)
UNMEASURED = ("decode_tps", "observed_tps", "server_decode_tps", "drafted", "accepted", "acceptance_rate",
              "mean_accepted_length", "steps")  # fmt: skip
NOT_IN_NOTEBOOK = (
    "speedup",
    "acceptance_rate",
    "candidate_tokens_per_s",
    "drafted",
    "accepted",
    "mean_accepted_length",
)


@pytest.fixture(params=["before-first-token", "mid-stream", "after-last-token"])
def cut(request):
    at = {"before-first-token": 0, "mid-stream": len(CAND) // 2, "after-last-token": len(CAND) - 1}[request.param]
    with RecordedServer(BASE) as b, RecordedServer(CAND, cut_after=at) as c:
        yield b, c


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _no_figures(doc: dict, where: str) -> None:
    p = doc["prompts"][0]
    assert p["speedup"] is None and p["acceptance_rate"] is None, where
    assert p["verdict"]["status"] == "failed" and "candidate failed" in p["verdict"]["reason"], where
    for key in UNMEASURED:
        assert p["candidate"][key] is None, (where, key)
    assert p["baseline"]["decode_tps"] is not None, where  # the side that finished keeps its figures


def test_no_view_records_a_figure_for_the_failed_side(cut, tmp_path, capsys):
    b, c = cut
    session, nb = tmp_path / "run.jsonl", tmp_path / "nb.toml"
    pair = ["--baseline", b.url, "--candidate", c.url, "--backend", "llama.cpp"]
    code, out, err = _cli(capsys, "compare", *pair, "--prompt", "fizzbuzz", "--json", "--save", str(session),
                          "--notebook", str(nb))  # fmt: skip
    assert code == 1 and "candidate failed" in err
    _no_figures(json.loads(out), "compare --json")

    code, out, _ = _cli(capsys, "compare", *pair, "--prompt", "fizzbuzz")
    assert code == 1 and "speed-up  —" in out and "not compared (a side failed)" in out

    code, out, _ = _cli(capsys, "replay", str(session), "--no-tui", "--json")
    _no_figures(json.loads(out), "replay")
    code, out, _ = _cli(capsys, "report", str(session), "--format", "json")
    _no_figures(json.loads(out), "report json")
    code, out, _ = _cli(capsys, "report", str(session), "--format", "md")
    row = next(line for line in out.splitlines() if line.startswith("| prompt |") and "not compared" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:5] == ["—", "—", "—"], row  # candidate tok/s, speed-up, mean accepted length
    code, out, _ = _cli(capsys, "report", str(session), "--format", "html")
    assert "speed-up —" in out and "<svg" not in out.split("<h2>", 1)[-1]  # no point placed on the curve

    entry = tomllib.loads(nb.read_text())["measurement"][0]
    assert entry["verdict"] == "failed" and "candidate failed" in entry["verdict_reason"]
    for key in NOT_IN_NOTEBOOK:
        assert key not in entry, key
    assert entry["baseline_tokens_per_s"] > 0

    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"messages": [{"role": "user", "content": "fizzbuzz"}]}) + "\n")
    code, out, _ = _cli(capsys, "sweep", *pair, "--prompts", str(prompts), "--concurrency", "1", "--json",
                        "--notebook", str(nb))  # fmt: skip
    assert code == 1
    level = json.loads(out)["levels"][0]
    assert level["speedup"] is None and level["acceptance_rate"] is None
    cand = level["candidate"]
    assert cand["aggregate_tps"] is None and cand["per_request_tps"] is None and cand["acceptance_rate"] is None
    assert level["verdicts"][0]["status"] == "failed" and "not compared" in level["outputs"]
    swept = tomllib.loads(nb.read_text())["measurement"][-1]
    for key in ("speedup", "acceptance_rate", "candidate_tokens_per_s"):
        assert key not in swept, key


async def test_the_tui_shows_no_speed_up_for_a_failed_side(cut, tmp_path):
    from spectui.machine.probes import GPUProbe
    from spectui.tui.app import AppConfig, make_app
    from tests.fakes import FakeNVML
    from tests.pilot import until

    b, c = cut
    nb = tmp_path / "nb.toml"
    cfg = AppConfig(b.url, c.url, gpu_probe=GPUProbe(FakeNVML(fail_init=True)), initial_prompt="fizzbuzz",
                    autorun=True, autosave=False, backend_kind="llama.cpp", triage=False, notebook=str(nb),
                    auto_notebook=True)  # fmt: skip
    app = make_app(cfg)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: len(app.results) == 1 and app.run_done.is_set(), timeout=120)
        await pilot.pause()
        r = app.results[0]
        assert r.speedup is None and r.verdict.status == "failed"
        banner = str(app.q("#banner").render())
        shown = app.pane("candidate").figures_text()
    assert "not compared" in banner and "speed-up" not in shown
    entry = tomllib.loads(nb.read_text())["measurement"][0]
    for key in NOT_IN_NOTEBOOK:
        assert key not in entry, key
