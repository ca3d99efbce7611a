"""`prove` one server at a time, on recorded llama-server streams (no servers): each side is "started"
alone through an opener that refuses a second open side, the greedy runs and the sampled pass alternate
whole phases, and the certificate is the side-by-side one's in every verdict and count, says the two sides
were measured one after the other, and verifies. Expected values come from the side-by-side run of the
same recordings."""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from pathlib import Path

import jsonschema
import pytest

from spectui.backends.recorded import ReplayBackend
from spectui.cli.main import main
from spectui.core.types import GenerationParams
from spectui.run.prove import certificate
from spectui.run.prove.prove import OneAtATime, ProveOptions, Prover
from spectui.store import prompts as prompt_sets
from tests.recordings import BASELINE, DRAFT, INFO, changed, payloads

PARAMS = GenerationParams(max_tokens=64, cache_prompt=False)


def backend(side: str, stream: list[dict]) -> ReplayBackend:
    return ReplayBackend(f"replay://{side}", stream, INFO, virtual_ms_per_event=2.0)


class Opener:
    """run.phased's open_side over replayed servers; it records each launch and fails the run if a
    second side is opened while one is up."""

    def __init__(self, streams: dict[str, list[dict]]) -> None:
        self.streams = streams
        self.up: set[str] = set()
        self.launches: list[str] = []

    def __call__(self, side: str):
        @asynccontextmanager
        async def opened():
            assert not self.up, f"{side} opened while {self.up} was up"
            self.up.add(side)
            self.launches.append(side)
            try:
                yield backend(side, self.streams[side])
            finally:
                self.up.discard(side)

        return opened()


def prove(out: Path, candidate: list[dict] | None = None, alone: bool = True, **opts) -> tuple[dict, Opener]:
    streams = {"baseline": payloads(BASELINE), "candidate": candidate or payloads(DRAFT)}
    opener = Opener(streams)
    options = ProveOptions(**{"runs": 2, "triage": True, "hash_files": False, **opts})
    items = prompt_sets.load_set("default")[1][:2]
    b, c = (None, None) if alone else (backend(s, streams[s]) for s in ("baseline", "candidate"))
    one = OneAtATime(opener, "asked for (--one-at-a-time)") if alone else None
    prover = Prover(b, c, PARAMS, items, "default", out, options, one_at_a_time=one)
    return asyncio.run(prover.run()), opener


def test_one_at_a_time_gives_the_side_by_side_certificate_and_says_how_it_was_measured(tmp_path, capsys):
    doc, opener = prove(tmp_path / "alone", sampled=1, samples=3)
    together, _ = prove(tmp_path / "together", alone=False, sampled=1, samples=3)
    # greedy runs 1, 2 then the sampled pass: B | C C | B B | C, never two up (the opener asserts it)
    assert opener.launches == ["baseline", "candidate", "baseline", "candidate"]
    assert doc["verdict"]["line"].split(" · ")[0] == together["verdict"]["line"].split(" · ")[0]
    assert doc["verdict"]["line"].startswith("IDENTICAL on 2/2 (greedy) and 1/1 (sampled")
    d, t = doc["derived"], together["derived"]
    assert [p["verdicts"] for p in d["greedy"]["per_prompt"]] == [p["verdicts"] for p in t["greedy"]["per_prompt"]]
    for key in ("drafted", "accepted", "steps"):
        assert d["acceptance"][key] == t["acceptance"][key], key
    assert d["sampled"]["counts"] == t["sampled"]["counts"]
    seeds = [json.loads(x) for x in (tmp_path / "alone" / "sampled.jsonl").read_text().splitlines()]
    assert sorted(r["params"]["seed"] for r in seeds if r.get("type") == "prompt") == [1000, 1001, 1002]
    # the certificate says so: inputs, the derived field (from the sessions' recorded order), the renderings
    assert doc["inputs"]["params"]["order"] == "one-at-a-time"
    assert doc["inputs"]["one_at_a_time"]["why"] == "asked for (--one-at-a-time)"
    assert "measured one after the other" in d["one_at_a_time"]["line"]
    assert "one_at_a_time" not in t and "one_at_a_time" not in together["inputs"]
    md = (tmp_path / "alone" / "certificate.md").read_text(encoding="utf-8")
    assert (
        "one server at a time (asked for (--one-at-a-time)): the baseline and the candidate were measured one after the other"
        in md
    )
    assert "measured one after the other" in (tmp_path / "alone" / "certificate.html").read_text(encoding="utf-8")
    schema = json.loads(certificate.SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validate({k: v for k, v in doc.items() if k != "_path"}, schema)
    assert main(["verify", str(tmp_path / "alone")]) == 0
    assert capsys.readouterr().out.startswith("VERIFIED")


def test_a_difference_found_one_at_a_time_says_why_it_was_not_triaged(tmp_path, capsys):
    stream = payloads(BASELINE)
    k = next(i for i, p in enumerate(stream) if p.get("content"))
    doc, _ = prove(tmp_path / "d", candidate=changed(stream, k, "\u00a7"), sampled=0)
    assert doc["verdict"]["line"].startswith("DIFFERENT on 2/2 (greedy; cause: not triaged, one server at a time)")
    for x in doc["derived"]["differences"]:
        assert x["cause"] is None and x["cause_summary"].startswith("triage skipped: triage reruns")
    assert "triage skipped" in (tmp_path / "d" / "certificate.md").read_text(encoding="utf-8")
    assert main(["verify", str(tmp_path / "d")]) == 0
    capsys.readouterr()


def test_verify_names_a_certificate_that_claims_one_at_a_time_its_sessions_do_not_show(tmp_path, capsys):
    doc, _ = prove(tmp_path / "t", alone=False, sampled=0)
    path = tmp_path / "t" / "certificate.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["derived"]["one_at_a_time"] = {"servers": "one at a time", "line": "measured one after the other"}
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    assert main(["verify", str(path)]) == 1
    assert "derived.one_at_a_time: the certificate says" in capsys.readouterr().out


def test_one_at_a_time_needs_servers_spectui_can_start(capsys):
    code = main(["prove", "--baseline", "http://127.0.0.1:1", "--candidate", "http://127.0.0.1:2",
                 "--one-at-a-time", "--no-notebook"])  # fmt: skip
    assert code == 2 and "give it with --launch" in capsys.readouterr().err


def test_the_sweeps_one_at_a_time_schedule_is_run_phased_s():
    """labs sits below run, so the sweep spells the schedule itself: it must stay run.phased's."""
    from spectui.labs.sweep.levels import alone_schedule
    from spectui.run.phased import phases

    for n in range(1, 6):
        assert alone_schedule(n) == [(p.side, p.runs) for p in phases(n)]


def test_sweep_one_at_a_time_pairs_each_level_run_by_run_and_never_opens_both():
    from spectui.labs.sweep.levels import sweep_alone

    opener = Opener({"baseline": payloads(BASELINE), "candidate": payloads(DRAFT)})
    items = prompt_sets.load_set("default")[1][:2]
    levels, infos = asyncio.run(sweep_alone(opener, items, [1, 2], PARAMS, repeat=2))
    assert opener.launches == ["baseline", "candidate", "baseline"]  # B | C C | B
    assert [lv.concurrency for lv in levels] == [1, 2]
    for lv in levels:
        assert len(lv.runs) == 2 and all(b and c for b, c in lv.runs)  # both runs paired, both rates
        assert lv.compared == 2 * lv.concurrency and lv.identical is True
        assert lv.predicted is None and "both servers up" in (lv.predicted_note or "")
    assert set(infos) == {"baseline", "candidate"}


def test_sweep_one_at_a_time_fails_the_levels_of_a_side_that_will_not_start():
    from spectui.labs.sweep.levels import sweep_alone

    class Refusing(Opener):
        def __call__(self, side):
            if side == "candidate":

                @asynccontextmanager
                async def refused():
                    raise OSError("port in use")
                    yield  # pragma: no cover

                return refused()
            return super().__call__(side)

    opener = Refusing({"baseline": payloads(BASELINE), "candidate": payloads(DRAFT)})
    items = prompt_sets.load_set("default")[1][:1]
    levels, _ = asyncio.run(sweep_alone(opener, items, [1], PARAMS))
    lv = levels[0]
    assert lv.identical is None and lv.speedup is None and lv.failed_runs == [1]
    assert lv.candidate.failed[0].startswith("candidate server:") and "port in use" in lv.candidate.failed[0]


@pytest.mark.usefixtures("stand_in_assets")
def test_prove_runs_one_at_a_time_where_the_memory_plan_says_so_and_refuses_a_pair_too_big(monkeypatch):
    """On a track's 24 GiB GPU (the profile's floor, all free: no NVML is asked) the plan says one at a
    time for an 8B target and a draft; prove takes it by itself and says why. Nothing is launched here."""
    import argparse

    import pytest

    from spectui.cli.prove import pair_from
    from spectui.core.errors import InputError
    from spectui.labs.memory import plan as memplan

    monkeypatch.setattr(memplan, "gpu_for", lambda profile, gpu=None, probe=None: memplan.floor_gpu(profile))

    def launch(profile, comparison, one=False):
        pair = pair_from(argparse.Namespace(profile=profile, launch=None, comparison=comparison, one_at_a_time=one))
        return pair.name, pair.servers["baseline"], pair.servers["candidate"], pair.alone and pair.alone.why

    what, base, cand, alone = launch("s-nvidia", "llama-draft")
    assert what.startswith("s-nvidia/llama-draft") and alone.startswith("the memory plan: ")
    assert "one server at a time" in alone and base.memory_share.alone and cand.memory_share.alone
    assert launch("cpu-demo", "draft")[3] is None  # no GPU plan: both up, as before
    assert launch("cpu-demo", "draft", one=True)[3] == "asked for (--one-at-a-time)"
    with pytest.raises(InputError, match=r"does not fit even alone: candidate needs 26\.6 GiB"):
        launch("n-nvidia", "sglang-standalone")
