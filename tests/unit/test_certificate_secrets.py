"""Secrets in a file made to be shared: a candidate started with every engine's secret-bearing
flags (llama-server --api-key, --api-key-file, -hft/--hf-token; vLLM --hf-token=…; SGLang --admin-api-key)
and a value registered as a secret: none of the planted values appears in any file the certificate run
writes (sessions, JSON, Markdown, HTML), on the console (the text rendering, verify's output) or in the
notebook; each flag's value is shown as ***."""

from __future__ import annotations

import asyncio

from spectui.backends.recorded import ReplayBackend
from spectui.cli.main import main
from spectui.core.errors import register_secret
from spectui.core.types import GenerationParams
from spectui.run.prove.prove import ProveOptions, Prover
from spectui.run.prove.render import render_text
from spectui.store import notebook
from tests.recordings import BASELINE, DRAFT, INFO, payloads
from tests.unit.test_certificate import prompts

PLANTED = {
    "key": "sk-planted-api-key-1",
    "keyfile": "/tmp/planted-key-file-2",
    "hft": "hf_planted_token_3",
    "hft_eq": "hf_planted_token_4",
    "admin": "planted-admin-key-5",
    "registered": "planted-registered-6",
}


def test_no_planted_secret_in_any_file_console_or_notebook(tmp_path, capsys):
    register_secret(PLANTED["registered"])  # as --api-key-env registers the key it reads
    argv = ["llama-server", "-m", "model.gguf", "--api-key", PLANTED["key"], "--api-key-file", PLANTED["keyfile"]]
    argv += ["-hft", PLANTED["hft"], f"--hf-token={PLANTED['hft_eq']}", "--admin-api-key", PLANTED["admin"]]
    argv += ["--alias", f"name-{PLANTED['registered']}"]
    out = tmp_path / "c"
    b = ReplayBackend("replay://b", payloads(BASELINE), INFO, virtual_ms_per_event=12.5)
    c = ReplayBackend("replay://c", payloads(DRAFT), INFO, virtual_ms_per_event=12.5)
    options = ProveOptions(runs=1, triage=False, hash_files=False, sampled=1, samples=2)
    prover = Prover(
        b,
        c,
        GenerationParams(max_tokens=64),
        prompts(2),
        "default",
        out,
        options,
        argvs={"baseline": ["llama-server", "--api-key", PLANTED["key"]], "candidate": argv},
    )
    doc = asyncio.run(prover.run())
    book = tmp_path / "nb.toml"
    notebook.append(book, [notebook.certificate_entry(doc)])
    print(render_text(doc))
    assert main(["verify", str(out)]) == 0
    console = capsys.readouterr()
    written = {p.name: p.read_text(encoding="utf-8") for p in [*out.iterdir(), book]}
    assert {"certificate.json", "certificate.md", "certificate.html", "greedy.jsonl", "sampled.jsonl"} <= set(written)
    for where, text in {**written, "console": console.out + console.err}.items():
        for name, value in PLANTED.items():
            assert value not in text, f"{name} in {where}"
    shown = doc["measured_on"]["servers"]["candidate"]["launch_argv"]
    assert shown[shown.index("--api-key") + 1] == "***" and "--hf-token=***" in shown
    assert shown[shown.index("-hft") + 1] == "***" and shown[shown.index("--admin-api-key") + 1] == "***"
    assert (
        "--api-key ***" in written["certificate.md"].replace("\\", "")
        and "--api-key ***" in written["certificate.html"]
    )
