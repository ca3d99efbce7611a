"""`spectui sampling`'s options (README "Exact under sampling"), through the real CLI and HTTP against
scripted llama-servers: the seeds each side is asked for, --save and --notebook."""

from __future__ import annotations

import json
import tomllib

from spectui.cli.main import main
from tests.recordings import BASELINE, DRAFT, payloads
from tests.scripted_llama import ScriptedLlama


def test_seed_base_save_and_notebook(capsys, tmp_path):
    session, nb = tmp_path / "s.jsonl", tmp_path / "nb.toml"
    with ScriptedLlama(payloads(BASELINE)) as b, ScriptedLlama(payloads(DRAFT)) as c:
        code = main(
            [
                "sampling",
                "--baseline",
                b.url,
                "--candidate",
                c.url,
                "--prompt",
                "Name a colour.",
                "--samples",
                "3",
                "--seed-base",
                "500",
                "--save",
                str(session),
                "--notebook",
                str(nb),
                "--json",
            ]
        )
    [p] = json.loads(capsys.readouterr().out)["prompts"]
    for server in (b, c):  # seeds S, S+1, … on both sides, at the default temperature and length
        assert [x["seed"] for x in server.bodies] == [500, 501, 502]
        assert {x["temperature"] for x in server.bodies} == {0.8} and {x["n_predict"] for x in server.bodies} == {16}
        assert {x.get("cache_prompt") for x in server.bodies} == {False}
    # the recordings agree byte for byte, so every seed matched; the bytes are promised for this drafter
    assert p["samples"] == 3 and p["seeded_identical"] == 3 and code == 0
    records = [json.loads(line) for line in session.read_text().splitlines()]
    assert [r["params"]["seed"] for r in records if r.get("type") == "prompt"] == [500, 501, 502]  # every sample
    [row] = tomllib.loads(nb.read_text())["measurement"]
    assert row["kind"] == "sampling" and row["samples"] == 3 and row["seeded_identical"] == 3
    assert row["verdict"] == p["verdict"]


def test_a_seed_whose_bytes_differ_is_counted(capsys):
    other = [dict(p) for p in payloads(DRAFT)]
    other[5] = dict(other[5], content=" something else")
    with ScriptedLlama(payloads(BASELINE)) as b, ScriptedLlama([payloads(DRAFT), other, payloads(DRAFT)]) as c:
        main(["sampling", "--baseline", b.url, "--candidate", c.url, "--prompt", "x", "--samples", "3", "--json"])
    [p] = json.loads(capsys.readouterr().out)["prompts"]
    assert p["seeded_identical"] == 2 and p["divergent_seeds"] == [1001]  # the second seed of 1000, 1001, 1002
