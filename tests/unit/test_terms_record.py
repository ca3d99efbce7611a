"""The formula's measured terms kept after the servers are gone: in the certificate (prove's
"terms", checked again by verify, kept by merge, rendered as one table) and beside a session (`theory
--from S --save`, shown by `spectui report` and `replay --no-tui`). The times come from test_costs' fake
llama-servers with a known cost curve (c 0.3, V(k) = 1 + 0.5(k − 1), R(k) = 0.1k); the runs from recorded
llama-server streams (the certificate) or test_costs' synthetic stream (the session)."""

from __future__ import annotations

import asyncio
import html
import json
import shutil
from pathlib import Path

import pytest

from spectui.cli.main import main
from spectui.core import terms_table
from spectui.labs.theory import record as terms_record
from spectui.labs.theory.terms import check_runs
from spectui.run.prove import certificate
from spectui.run.prove.shard import Shard
from spectui.store.session import load_session
from tests.unit.test_certificate import prompts, prove, valid
from tests.unit.test_costs import C, measured_curve, synthetic_session


def measured_record(runs: dict[str, list]) -> dict:
    """Each prompt's check made from the fake servers' times and its runs, as prove and theory --save make it."""
    curve = measured_curve()
    entries = [
        terms_record.entry(pid, check_runs(rs, curve.terms(), curve.terms_each()), curve) for pid, rs in runs.items()
    ]
    return terms_record.record(entries, curve.repeats, None)


def with_terms(out: Path, doc: dict) -> dict:
    """The certificate at `out` with measured terms for each of its greedy prompts, written again."""
    greedy = [load_session(out / r["path"]) for r in doc["sessions"] if r["phase"] == "greedy"]
    doc = {k: v for k, v in doc.items() if k != "_path"}
    doc["terms"] = measured_record(terms_record.runs_by_prompt(greedy))
    certificate.write(doc, out / certificate.CERT_NAME)
    return certificate.load(out / certificate.CERT_NAME)


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    out = tmp_path_factory.mktemp("terms") / "c"
    return out, with_terms(out, prove(out, items=prompts(2)))


def test_the_certificate_carries_the_terms_table_and_verify_derives_each_check_again(cert, capsys):
    out, doc = cert
    valid(doc)
    t = doc["terms"]
    assert [e["id"] for e in t["prompts"]] == [p.id for p in prompts(2)]
    chk = t["prompts"][0]["check"]
    assert chk["draft_cost_c"] == pytest.approx(C, rel=0.02) and chk["verification_cost"]["1"] == 1.0
    assert chk["verification_cost"]["5"] == pytest.approx(3.0, rel=0.02)  # V(γ+1), γ = 4
    assert main(["verify", str(out / "certificate.json")]) == 0
    said = capsys.readouterr().out
    assert said.startswith("VERIFIED") and "terms: the check of 2 prompt(s) re-derived" in said
    # one table, the same in the three renderings
    md = (out / "certificate.md").read_text(encoding="utf-8")
    page = html.unescape((out / "certificate.html").read_text(encoding="utf-8"))
    text = certificate_text(doc)
    for rendering in (md, page, text):
        assert terms_table.TITLE in rendering and "α per position" in rendering
        assert f"{chk['draft_cost_c']:.3f}" in rendering and f"{chk['alpha_per_position']:.3f}" in rendering
    section = md.split(terms_table.TITLE, 1)[1].splitlines()
    row = next(line for line in section if line.startswith(f"| {prompts(2)[0].id} |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert len(cells) == len(terms_table.HEADER)
    assert cells[2].split()[0] == "1.00" and cells[8].startswith(f"{chk['measured_speedup']:.2f}×")


def certificate_text(doc: dict) -> str:
    from spectui.run.prove.render import render_text

    return render_text(doc)


def test_verify_names_an_edited_measured_time_and_an_edited_check(cert, tmp_path, capsys):
    out, _ = cert
    for edit, said in (
        (lambda t: t["prompts"][0]["check"].__setitem__("predicted_speedup", 9.99), "check.predicted_speedup"),
        # a time changed: the check its times give is no longer the one written
        (lambda t: t["prompts"][1]["measurement"]["draft_step"]["ms"].__setitem__(0, 1.0), "check.predicted_range"),
    ):
        c = tmp_path / f"copy{len(list(tmp_path.iterdir()))}"
        shutil.copytree(out, c)
        path = c / "certificate.json"
        doc = json.loads(path.read_text(encoding="utf-8"))
        edit(doc["terms"])
        path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
        assert main(["verify", str(path)]) == 1
        text = capsys.readouterr().out
        assert said in text and "terms." in text, text


def test_a_certificate_without_a_measurement_says_why_and_one_from_a_replay_is_ideal_labelled(tmp_path):
    from spectui.run.prove.terms import SKIPPED_FLAG, add_terms

    out = tmp_path / "c"
    doc = prove(out, items=prompts(1))
    skipped = asyncio.run(add_terms(certificate.load(out / "certificate.json"), None, None, None, skip=SKIPPED_FLAG))
    valid(skipped)
    assert "not measured: --no-terms" in (out / "certificate.md").read_text(encoding="utf-8")
    # replayed servers give no per-request timings: the ideal stands in for each term, and says so
    b, c = replay_pair()
    got = asyncio.run(add_terms(certificate.load(out / "certificate.json"), None, b, c))
    valid(got)
    (e,) = got["terms"]["prompts"]
    assert e["check"]["verification_cost"] == {"1": 1.0} and "not measured" in e["check"]["sources"]["verify"]
    assert "(ideal, not measured)" in (out / "certificate.md").read_text(encoding="utf-8")
    assert certificate.verify(out / "certificate.json").ok
    assert doc["derived"] == got["derived"]


def replay_pair():
    from spectui.backends.recorded import ReplayBackend
    from tests.recordings import BASELINE, DRAFT, INFO, payloads

    return (
        ReplayBackend("replay://b", payloads(BASELINE), INFO, virtual_ms_per_event=12.5),
        ReplayBackend("replay://c", payloads(DRAFT), INFO, virtual_ms_per_event=12.5),
    )


def test_merge_keeps_each_prompts_terms_from_its_shard(tmp_path, capsys):
    items = prompts(3)
    paths = []
    for i in (1, 2):
        out = tmp_path / f"s{i}"
        doc = prove(out, items=items, sampled=0, shard=Shard(i, 2))
        if i == 1:
            with_terms(out, doc)
        paths.append(str(out / "certificate.json"))
    assert main(["merge", *paths, "-o", str(tmp_path / "merged.json")]) == 0
    capsys.readouterr()
    merged = certificate.load(tmp_path / "merged.json")
    valid(merged)
    first = certificate.load(paths[0])
    assert merged["terms"]["prompts"] == first["terms"]["prompts"]  # kept as measured, not averaged
    assert "1 of 2 shards" in merged["terms"]["merged"]
    assert main(["verify", str(tmp_path / "merged.json")]) == 0


def test_terms_kept_beside_the_session_are_still_shown_by_report(tmp_path, capsys):
    path = tmp_path / "s.jsonl"
    synthetic_session(path)
    session = load_session(path)
    rec = measured_record(terms_record.runs_by_prompt([session]))
    side = terms_record.save_beside(path, rec)  # as an older `theory --save` kept them
    assert side.name == "s.jsonl.terms.json" and load_session(path).prompts  # the session file is untouched
    want = rec["prompts"][0]["check"]
    for fmt in ("md", "html", "json"):
        assert main(["report", str(path), "--format", fmt]) == 0
        got = capsys.readouterr()
        assert got.err == ""
        if fmt == "json":
            assert json.loads(got.out)["terms"]["prompts"][0]["check"] == want  # derived again: equal
        else:
            assert terms_table.TITLE in html.unescape(got.out) and f"{want['draft_cost_c']:.3f}" in got.out
    assert main(["replay", str(path), "--no-tui"]) == 0
    text = capsys.readouterr().out
    assert terms_table.TITLE in text and "α/pos" in text
    # the session recorded to since: shown, with a warning; a damaged side file: a warning, no table
    with path.open("a", encoding="utf-8") as f:
        f.write("\n")
    assert main(["report", str(path)]) == 0
    got = capsys.readouterr()
    assert "changed after the terms were measured" in got.err and terms_table.TITLE in got.out
    side.write_text("{", encoding="utf-8")
    assert main(["report", str(path)]) == 0
    got = capsys.readouterr()
    assert got.err.count("\n") == 1 and "no measured terms shown" in got.err and terms_table.TITLE not in got.out


def test_theory_save_appends_the_terms_to_the_session_and_report_shows_them(tmp_path, capsys):
    path = tmp_path / "s.jsonl"
    synthetic_session(path)
    before = load_session(path)
    assert before.terms is None  # a session without terms loads as before
    rec = measured_record(terms_record.runs_by_prompt([before]))
    assert terms_record.save(path, rec) == path and not terms_record.side_path(path).exists()
    after = load_session(path)
    assert after.terms == rec and not after.warnings
    assert len(after.prompts) == len(before.prompts) and after.prompts[0].result == before.prompts[0].result
    want = rec["prompts"][0]["check"]
    assert main(["report", str(path), "--format", "json"]) == 0
    got = capsys.readouterr()
    assert got.err == "" and json.loads(got.out)["terms"]["prompts"][0]["check"] == want
    assert main(["report", str(path), "--format", "html"]) == 0
    assert terms_table.TITLE in html.unescape(capsys.readouterr().out)


def test_a_certified_or_cut_session_keeps_its_bytes_and_gets_the_side_file(tmp_path):
    path = tmp_path / "greedy.jsonl"
    synthetic_session(path)
    rec = measured_record(terms_record.runs_by_prompt([load_session(path)]))
    (tmp_path / "certificate.json").write_text(json.dumps({"sessions": [{"path": "greedy.jsonl"}]}))
    data = path.read_bytes()
    assert terms_record.save(path, rec) == terms_record.side_path(path)
    assert path.read_bytes() == data  # its sha256 in the certificate still holds
    cut = tmp_path / "cut" / "s.jsonl"
    cut.parent.mkdir()
    cut.write_bytes(data + b'{"type": "ev')  # the last line cut mid-write
    assert terms_record.save(cut, rec) == terms_record.side_path(cut)
    assert cut.read_bytes() == data + b'{"type": "ev'


def test_theory_save_refuses_no_measure_in_one_line(tmp_path, capsys):
    path = tmp_path / "s.jsonl"
    synthetic_session(path)
    assert main(["theory", "--from", str(path), "--no-measure", "--save"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--save" in err
    assert not terms_record.side_path(path).exists()


def test_the_ngram_row_says_c_is_zero_and_an_undrafted_prompt_says_so():
    chk = {
        "draft_cost_c": 0.0,
        "verification_cost": {"1": 1.0, "2": 1.5},
        "draft_reevaluation_cost": None,
        "sources": {
            "c": "n-gram drafting: no draft model, a lookup in the token history (c = 0, not measured)",
            "verify": "measured: the baseline's prompt_ms",
            "reeval": "n-gram drafting: no model re-evaluates the batch (R = 0)",
        },
        "alpha_per_position": 1.0,
        "gamma": 3.85,
        "tokens_per_step": 4.85,
        "predicted_speedup": 1.39,
        "predicted_range": [0.54, 1.88],
        "measured_speedup": 1.49,
        "measured_low": 0.99,
        "measured_high": 2.12,
        "runs": 5,
        "agree": True,
        "agreement": "the prediction is inside the measured interval",
        "miss": None,
        "terms": [],
    }
    rows = terms_table.rows([{"id": "copy", "check": chk}, {"id": "q", "check": None, "why_none": "drafted nothing"}])
    assert rows[1][1] == "0 (n-gram: no draft model)" and rows[1][2] == "1.00 1.50" and rows[1][9] == "agrees"
    assert rows[1][3] == "0 (n-gram: no model re-evaluates)"
    assert rows[1][8] == "1.49× [0.99–2.12] (5 runs)" and rows[2][-1] == "drafted nothing"
    lines = terms_table.lines([{"id": "copy", "check": chk}])
    assert any("c — n-gram drafting" in x for x in lines)


def test_the_text_and_markdown_reports_carry_alpha_per_position_beside_acceptance_per_drafted_token():
    """α per position (Σ α^i = accepted/steps) beside accepted/drafted, in both tables."""
    from spectui.core.figures import per_position_alpha
    from spectui.core.report import markdown_report, text_report
    from spectui.core.types import GenerationParams, ServerInfo
    from spectui.core.verdict import judge
    from tests.unit.test_costs import ALPHA, synthetic_run

    r = synthetic_run(steps=400, seed=3)
    r.verdict = judge(r.baseline, r.candidate, True)
    f = r.candidate.figures
    alpha = per_position_alpha(f.accepted, f.drafted, f.metrics_steps or f.steps)
    assert alpha == pytest.approx(ALPHA, abs=0.03) and abs(alpha - f.acceptance_rate) > 0.1  # two numbers
    infos = {s: ServerInfo(url="http://127.0.0.1:9", model="m", build="b1") for s in ("baseline", "candidate")}
    text = text_report(infos, [r], GenerationParams(), "sequential")
    head = next(line for line in text.splitlines() if line.startswith("prompt"))
    row = next(line for line in text.splitlines() if line[19:29].strip() == "candidate")
    assert head.split()[-1] == "α/pos" and row.split()[-1] == f"{alpha:.2f}"
    assert f"{f.acceptance_rate:.0%} ({f.accepted}/{f.drafted})" in row
    base_row = next(line for line in text.splitlines() if line[19:29].strip() == "baseline")
    assert base_row.split()[-1] == "—"  # the baseline drafts nothing: no α
    assert "α/pos: per position" in text
    md = markdown_report(infos, [r], GenerationParams(), "sequential")
    header = next(line for line in md.splitlines() if line.startswith("| prompt |"))
    cells = [c.strip() for c in header.strip("|").split("|")]
    row = next(line for line in md.splitlines() if line.startswith("| p |"))
    values = [c.strip() for c in row.strip("|").split("|")]
    assert values[cells.index("α per position")] == f"{alpha:.2f}"
    assert f"{f.acceptance_rate:.0%}" in values[cells.index("speed-up (acceptance per drafted token)")]


def test_theory_from_a_session_whose_servers_are_gone_shows_the_kept_terms(tmp_path, capsys):
    # the synthetic session's servers were at http://127.0.0.1:9, where nothing listens
    path = tmp_path / "s.jsonl"
    synthetic_session(path)
    assert main(["theory", "--from", str(path)]) == 2  # nothing kept yet: one line offering --no-measure
    err = capsys.readouterr().err
    assert err.count("spectui: error") == 1 and "keeps no measured terms" in err and "--no-measure" in err
    rec = measured_record(terms_record.runs_by_prompt([load_session(path)]))
    terms_record.save(path, rec)
    assert main(["theory", "--from", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["terms_from"].startswith("kept in the session")
    (p,) = doc["prompts"]
    want = rec["prompts"][0]
    assert p["check"] == want["check"] and p["measurement"] == want["measurement"]
    assert main(["theory", "--from", str(path)]) == 0
    got = capsys.readouterr()
    assert "servers are not up" in got.err and "terms kept in the session" in got.err
    assert "measured after the run" in got.out and "predicted from the measured terms" in got.out


def test_a_prediction_outside_its_repeats_range_is_labelled_and_explained():
    """The point takes each term's median apart, the range each repeat's terms together: the point can
    fall outside (1.09× beside 1.10–1.26×), and the table then labels the range and says why."""
    assert terms_table.predicted_words(1.0913, None) == "1.09×"
    assert terms_table.predicted_words(1.0913, (1.1049, 1.2571)) == "1.09× (each repeat's terms: 1.10–1.26×)"
    note = terms_table.outside_note(1.0913, (1.1049, 1.2571))
    assert note is not None and note.startswith("the prediction 1.09× takes each term's median")
    assert "each repeat's terms alone predict 1.10–1.26×" in note
    assert terms_table.outside_note(1.27, (1.10, 1.26)) is not None  # above the range too
    assert terms_table.outside_note(1.26, (1.10, 1.26)) is None  # on its edge: inside
    assert terms_table.outside_note(1.1049, (1.1000, 1.2)) is None  # 1.10 as printed, inside 1.10–1.20
    assert terms_table.outside_note(1.0951, (1.1000, 1.2)) is None  # printed 1.10: not said to be outside 1.10
    assert terms_table.outside_note(1.0949, (1.1000, 1.2)) is not None  # printed 1.09: outside
    assert terms_table.outside_note(1.2, None) is None
    chk = {
        "draft_cost_c": 0.0,
        "verification_cost": {"1": 1.0},
        "draft_reevaluation_cost": None,
        "sources": {"c": "measured: c", "verify": "measured: v", "reeval": "measured: r"},
        "alpha_per_position": 0.5,
        "gamma": 2.0,
        "tokens_per_step": 1.75,
        "predicted_speedup": 1.0913,
        "predicted_range": [1.1049, 1.2571],
        "measured_speedup": 1.15,
        "measured_low": 1.05,
        "measured_high": 1.30,
        "runs": 5,
        "agree": True,
        "agreement": "the prediction is inside the measured interval",
        "miss": None,
        "terms": [],
    }
    assert terms_table.rows([{"id": "p", "check": chk}])[1][7] == "1.09× (each repeat's terms: 1.10–1.26×)"
    assert f"p: {note}" in terms_table.lines([{"id": "p", "check": chk}])
    chk["predicted_speedup"] = 1.2
    assert not any("takes each term's median" in x for x in terms_table.lines([{"id": "p", "check": chk}]))
