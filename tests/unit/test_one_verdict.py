"""One run, one verdict: the same pair of recorded streams through every view says the same thing.

Four pairs made from one recorded llama-server stream (tests/data): identical; the same text with one
other token id; the same text with one more token generated than sent; and a byte divergence at an
offset computed here from the raw payloads. Each pair goes through `compare` (CLI, over HTTP from
scripted servers replaying the streams), `replay --no-tui --json`, `report` (md, json, html), the
notebook entry, `sweep`, the TUI live and the TUI replaying the session: every one must say the verdict
and reason the run made. The oracles are computed from the payloads, not by spectui's comparison.
"""

from __future__ import annotations

import copy
import json
import tomllib

import pytest

from spectui.cli.main import main
from tests.recorded_server import RecordedServer
from tests.recordings import BASELINE, payloads

BASE = payloads(BASELINE)


def _tokens_before(stream: list[dict], k: int) -> int:
    return sum(len(p.get("tokens") or []) for p in stream[:k])


def _pair(kind: str) -> tuple[list[dict], dict]:
    """The candidate stream for `kind`, and what the verdict must be, worked out from the payloads."""
    cand = copy.deepcopy(BASE)
    if kind == "identical":
        return cand, {"status": "identical", "kind": None}
    if kind == "ids":
        k = 9  # one event, one token: the same text under another id
        cand[k]["tokens"] = [cand[k]["tokens"][0] + 1]
        i = _tokens_before(BASE, k)
        return cand, {"status": "differs", "kind": "ids", "reason": f"same text, different token ids from token {i}"}
    if kind == "count":
        final = cand[-1]
        n = final["tokens_predicted"]
        final["tokens_predicted"] = n + 1
        reason = f"same text, but {n} vs {n + 1} tokens generated (tokens at the end were never sent as text)"
        return cand, {"status": "differs", "kind": "count", "reason": reason}
    assert kind == "bytes"
    k = 12
    old = cand[k]["content"]
    cand[k]["content"] = old[:1] + "Z" + old[2:] if len(old) > 1 else "Z"
    a = "".join(p.get("content", "") for p in BASE).encode()
    b = "".join(p.get("content", "") for p in cand).encode()
    at = next(i for i in range(min(len(a), len(b))) if a[i] != b[i])  # by hand, from the raw bytes
    return cand, {"status": "differs", "kind": "bytes", "byte": at}


def _check(v: dict, want: dict, where: str) -> None:
    assert v["status"] == want["status"], where
    if want["status"] == "differs":
        assert v["divergence"]["kind"] == want["kind"], where
        if "reason" in want:
            assert v["reason"] == want["reason"], where
        if "byte" in want:
            assert v["divergence"]["byte"] == want["byte"], where
    else:
        assert v["divergence"] is None and v["compared"] == "text+ids", where


@pytest.fixture(params=["identical", "ids", "count", "bytes"])
def pair(request, tmp_path):
    cand, want = _pair(request.param)
    with RecordedServer(BASE) as b, RecordedServer(cand) as c:
        yield request.param, b, c, want


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_headless_view_says_the_runs_verdict(pair, tmp_path, capsys):
    kind, b, c, want = pair
    session, nb = tmp_path / "run.jsonl", tmp_path / "notebook.toml"
    common = ["--baseline", b.url, "--candidate", c.url, "--backend", "llama.cpp"]
    code, out, _ = _cli(
        capsys, "compare", *common, "--prompt", "fizzbuzz", "--json", "--save", str(session), "--notebook", str(nb)
    )
    assert code == (0 if want["status"] == "identical" else 3)
    live = json.loads(out)["prompts"][0]["verdict"]
    _check(live, want, "compare --json")

    code, out, err = _cli(capsys, "replay", str(session), "--no-tui", "--json")
    assert code == (0 if want["status"] == "identical" else 3)
    assert json.loads(out)["prompts"][0]["verdict"] == live  # the run's verdict, whole
    assert "judged again" not in err  # and judging the recorded events again agrees

    code, out, _ = _cli(capsys, "report", str(session), "--format", "json")
    assert json.loads(out)["prompts"][0]["verdict"] == live
    for fmt in ("md", "html"):
        code, out, _ = _cli(capsys, "report", str(session), "--format", fmt)
        if want["status"] == "identical":
            assert "DIFFERS" not in out and "identical" in out, fmt
        else:
            assert f"DIFFERS at byte {live['divergence']['byte']}" in out, fmt
            if want["kind"] != "bytes":
                assert want["reason"] in out, fmt

    entry = tomllib.loads(nb.read_text())["measurement"][0]
    assert entry["verdict"] == want["status"]
    assert entry.get("verdict_reason", "") == live["reason"]
    assert entry["identical"] is (want["status"] == "identical")

    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"messages": [{"role": "user", "content": "fizzbuzz"}]}) + "\n")
    code, out, _ = _cli(capsys, "sweep", *common, "--prompts", str(prompts), "--concurrency", "1", "--json")
    level = json.loads(out)["levels"][0]
    _check(level["verdicts"][0], want, "sweep")
    assert level["identical"] is (want["status"] == "identical")
    assert code == (0 if want["status"] == "identical" else 3)


async def test_the_tui_live_and_replaying_shows_the_runs_verdict(pair, tmp_path):
    from spectui.core.types import GenerationParams
    from spectui.machine.probes import GPUProbe
    from spectui.store.replay import ReplayControl, SessionBackend
    from spectui.store.session import load_session
    from spectui.tui.app import AppConfig, make_app
    from tests.fakes import FakeNVML
    from tests.pilot import until

    kind, b, c, want = pair
    cfg = AppConfig(
        b.url,
        c.url,
        params=GenerationParams(max_tokens=64),
        gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
        initial_prompt="fizzbuzz",
        autorun=True,
        autosave=True,
        session_dir=tmp_path,
        backend_kind="llama.cpp",
        triage=False,
    )
    app = make_app(cfg)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: len(app.results) == 1 and app.run_done.is_set(), timeout=120)
        await pilot.pause()
        live = app.results[0].verdict.to_json()
        banner = str(app.q("#banner").render())
    _check(live, want, "TUI")
    if want["status"] == "identical":
        assert "IDENTICAL" in banner and "DIVERGED" not in banner
    else:
        assert "DIVERGED" in banner and "IDENTICAL" not in banner
        assert f"at byte {live['divergence']['byte']}" in banner
        if want["kind"] != "bytes":
            assert want["reason"] in banner

    session = load_session(next(tmp_path.glob("*.jsonl")))
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
        await until(pilot, lambda: len(app.results) == 1 and app.run_done.is_set(), timeout=120)
        await pilot.pause()
        assert app.results[0].verdict.to_json() == live
        replay_banner = str(app.q("#banner").render())
    assert ("IDENTICAL" in replay_banner) is (want["status"] == "identical")


def test_replay_shows_the_recorded_verdict_and_says_when_the_events_disagree(tmp_path, capsys):
    """A session whose recorded verdict differs from what its events give (an older spectui judged bytes
    only): replay shows the run's verdict and warns, naming both."""
    from tests.recordings import write_session

    path = write_session(tmp_path / "run.jsonl", BASE, copy.deepcopy(BASE))
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if rec.get("type") == "result":
            rec["verdict"] = {
                "status": "differs",
                "compared": "text+ids",
                "reason": "same text, different token ids from token 3",
                "divergence": {
                    "kind": "ids",
                    "detail": "same text, different token ids from token 3",
                    "byte": 7,
                    "baseline_token": 3,
                    "candidate_token": 3,
                    "baseline_excerpt": "x",
                    "candidate_excerpt": "x",
                    "excerpt_start": 0,
                },
            }
            lines[i] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    code, out, err = _cli(capsys, "replay", str(path), "--no-tui", "--json")
    assert code == 3 and json.loads(out)["prompts"][0]["verdict"]["status"] == "differs"
    assert "the run recorded DIFFERS" in err and "judged again from the recorded events: IDENTICAL" in err


def test_one_at_a_time_alternates_whole_phases_and_shares_adjacent_launches():
    from spectui.run.phased import phases

    def plan(n):
        return [(p.side[0].upper(), p.runs) for p in phases(n)]

    assert plan(1) == [("B", [1]), ("C", [1])]
    assert plan(2) == [("B", [1]), ("C", [1, 2]), ("B", [2])]  # B C | C B
    assert plan(3) == [("B", [1]), ("C", [1, 2]), ("B", [2, 3]), ("C", [3])]
