"""Forgeries of a REAL certificate: `spectui prove` run once on a plain llama-server against a draft-simple
candidate (SmolLM2, 1 thread each, --metrics: per-position counters), the quick set, 16 tokens, 2 runs.
The original verifies (so the cross-checks hold on live timings, arrivals and /metrics counts on a loaded
machine) and rebuilds byte for byte; each forgery made with spectui's own build (tests/unit/forger.py) is
refused in one line."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from spectui.cli.main import main
from spectui.machine.launcher import Launcher
from spectui.run.prove import certificate
from tests.conftest import _need_assets, server_spec
from tests.unit import test_certificate_forgery_fresh as fresh
from tests.unit.forger import Forger, events, refusal


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    found = _need_assets()
    out = tmp_path_factory.mktemp("real-forgery") / "c"
    launcher = Launcher()
    servers = {name: launcher.add(server_spec(name, found)) for name in ("baseline", "draft")}
    for s in servers.values():
        s.argv[s.argv.index("--port") + 1] = str(s.port)
    try:
        launcher.start_all(timeout=120)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            code = main(
                ["prove", "--baseline", servers["baseline"].url, "--candidate", servers["draft"].url]
                + ["--prompts", "quick", "--max-tokens", "16", "--runs", "2", "--sampled", "0", "--no-terms"]
                + ["-o", str(out), "--no-notebook"]
            )
    finally:
        launcher.stop_all()
    for s in servers.values():
        assert s.exited() is not None, f"{s.name} still running"
    assert code == 0, buf.getvalue()
    return out


def test_the_real_original_verifies_and_rebuilds_byte_for_byte(real, tmp_path):
    assert refusal(real / certificate.CERT_NAME) is None
    f = Forger(real, tmp_path / "f")
    f.rebuild()
    for name in (certificate.CERT_NAME, certificate.MD_NAME, certificate.HTML_NAME):
        assert (f.dir / name).read_bytes() == (real / name).read_bytes(), name
    recs = f.records()
    result = next(r for r in recs if r.get("type") == "result")
    assert result["candidate"]["metrics_drafted"] is not None  # the /metrics cross-checks had counts to check
    # how far the live timings lie from the arrivals (the tolerance is ×/÷1.5 ± 50 ms): printed for the record
    for n in sorted({r["n"] for r in events(recs)}):
        for side in ("baseline", "candidate"):
            toks = [r["t"] for r in events(recs, side, n) if r["ev"] == "token"]
            fin = next(r for r in events(recs, side, n) if r["ev"] == "finish")
            span = (toks[-1] - toks[0]) / 1e6
            print(f"prompt {n} {side}: predicted_ms {fin['timings']['predicted_ms']:.1f}, arrivals span {span:.1f} ms")


def _finishes(recs, side="candidate"):
    return [r for r in events(recs, side) if r["ev"] == "finish"]


def decode_time_divided_by_five(recs):
    """The decode time cut to a fifth, its rate recomputed to match: only the arrivals give it away."""
    for f in _finishes(recs):
        t = f["timings"]
        t["predicted_ms"] /= 5
        t["predicted_per_second"] = (t["predicted_n"] - 1) / t["predicted_ms"] * 1000.0


def per_position_fifty(recs):
    for r in recs:
        if r.get("type") == "result":
            r["candidate"]["accepted_per_position"] = [50, 50, 50, 50]


def metrics_all_accepted(recs):
    for r in recs:
        if r.get("type") == "result":
            r["candidate"]["metrics_accepted"] = r["candidate"]["metrics_drafted"]


def cut_four_tokens_short(recs):
    drop = set()
    for side in ("baseline", "candidate"):
        for n in {r["n"] for r in events(recs)}:
            toks = [r for r in events(recs, side, n) if r["ev"] == "token"]
            drop |= {id(r) for r in toks[-4:]}
    return [r for r in recs if id(r) not in drop]


def sides_swapped(recs):
    for r in recs:
        if r.get("type") == "event":
            r["side"] = {"baseline": "candidate", "candidate": "baseline"}[r["side"]]
        elif r.get("type") == "result":
            r["baseline"], r["candidate"] = r["candidate"], r["baseline"]


EDITS = [
    ("predicted_ms divided by 5", decode_time_divided_by_five),
    ("accepted_per_position [50, 50, 50, 50]", per_position_fifty),
    ("metrics_accepted = metrics_drafted", metrics_all_accepted),
    ("both outputs cut 4 tokens short", cut_four_tokens_short),
    ("baseline and candidate swapped", sides_swapped),
    ("runs 1 and 2 relabelled", fresh.run_labels_swapped),
    ("run 1 copied over run 2, moved in time", fresh.run_copied_and_moved),
    ("target tokens relabelled accepted", fresh.accepted_labels_inflated),
    ("predicted_per_second 1e9", fresh.predicted_per_second_inflated),
]


@pytest.mark.parametrize("what,edit", EDITS, ids=[e[0] for e in EDITS])
def test_a_forgery_of_a_real_certificate_is_refused(real, tmp_path, what, edit):
    f = Forger(real, tmp_path / "f")
    before = f.records()
    f.edit(edit)
    assert f.records() != before, what
    why = refusal(f.rebuild())
    assert why is not None and "\n" not in why, f"{what}: verified"
    print(f"{what}: {why}")


def test_a_duplicate_key_in_a_real_certificate_is_one_line(real, tmp_path, capsys):
    f = Forger(real, tmp_path / "f")
    text = f.path.read_text(encoding="utf-8")
    f.write_text(text.replace('"verdict": {', '"verdict": {"status": "identical", ', 1))
    assert main(["verify", str(f.path)]) == 2
    err = capsys.readouterr().err
    assert "given twice" in err and len(err.strip().splitlines()) == 1
    assert json.loads(text)  # the original is plain JSON
