"""A kept report carries replay's disagreement: a session whose recorded verdict says identical
while its recorded events differ (token ids and bytes) gives, beside that prompt, "judged again from the
recorded events: DIFFERS …" in the Markdown, HTML and JSON reports, not only a warning on stderr."""

from __future__ import annotations

import json

from spectui.cli.main import main
from tests.recordings import BASELINE, changed, payloads, write_session


def test_every_report_says_the_re_judgement_beside_the_prompt(tmp_path, capsys):
    stream = payloads(BASELINE)
    k = next(i for i, p in enumerate(stream) if p.get("content"))
    path = write_session(tmp_path / "run.jsonl", stream, changed(stream, k, "\u00a7"), n_prompts=2)
    lines = path.read_text(encoding="utf-8").splitlines()
    first = True
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if rec.get("type") == "result" and first:  # the first prompt's run recorded as identical
            assert rec["verdict"]["status"] == "differs"
            rec["verdict"] = {
                "status": "identical",
                "compared": rec["verdict"]["compared"],
                "reason": "",
                "divergence": None,
            }
            rec["identical"], rec["first_divergence"] = True, None
            lines[i] = json.dumps(rec)
            first = False
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for fmt in ("md", "html", "json"):
        out = tmp_path / f"report.{fmt}"
        assert main(["report", str(path), "--format", fmt, "-o", str(out)]) == 0
        assert "judged again from the recorded events: DIFFERS" in capsys.readouterr().err
        text = out.read_text(encoding="utf-8")
        if fmt == "json":
            p0, p1 = json.loads(text)["prompts"]
            assert (
                p0["verdict"]["status"] == "identical"
                and "judged again from the recorded events: DIFFERS" in p0["rejudged"]
            )
            assert "rejudged" not in p1  # the second prompt's recorded verdict agrees with its events
        else:
            rows = [x for x in text.splitlines() if "judged again from the recorded events: DIFFERS" in x]
            # beside the first prompt's verdict (its table row; in HTML its heading too), nowhere else
            assert rows and len(rows) == (2 if fmt == "html" else 1), rows
            assert all("identical ⚠ the run recorded IDENTICAL" in x for x in rows), rows
