"""Tampering: every field of a certificate edited one at a time, and pairs of fields with the
session hashes fixed, each written back with fresh renderings (as someone editing it would), and `verify`
must either catch the edit or the field must be one the certificate labels "stated, not derivable"
(run.prove.conditions.STATED). Malformed documents and session references are one line, never a traceback.
The certificate is built from recorded llama-server streams, with the machine probed around each prompt."""

from __future__ import annotations

import asyncio
import copy
import fnmatch
import json
import re
import shutil
from pathlib import Path

import pytest

from spectui.backends.recorded import ReplayBackend
from spectui.cli.compare import machine_sampler
from spectui.cli.main import main
from spectui.core.errors import InputError
from spectui.core.types import GenerationParams
from spectui.run.prove import certificate
from spectui.run.prove.conditions import STATED
from spectui.run.prove.prove import ProveOptions, Prover
from tests.recordings import BASELINE, DRAFT, INFO, payloads
from tests.unit.test_certificate import prompts

HEX = re.compile(r"^[0-9a-f]{64}$")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    out = tmp_path_factory.mktemp("tamper") / "c"
    b = ReplayBackend("replay://b", payloads(BASELINE), INFO, virtual_ms_per_event=12.5)
    c = ReplayBackend("replay://c", payloads(DRAFT), INFO, virtual_ms_per_event=12.5)
    options = ProveOptions(runs=2, triage=False, hash_files=False, sampled=1, samples=3)
    params = GenerationParams(max_tokens=64, cache_prompt=False)
    prover = Prover(b, c, params, prompts(), "default", out, options, machine=machine_sampler())
    doc = asyncio.run(prover.run())
    return out, {k: v for k, v in doc.items() if k != "_path"}


def leaves(v, path=""):
    """(path, value) of every leaf, empty containers included."""
    if isinstance(v, dict) and v:
        for k, x in v.items():
            yield from leaves(x, f"{path}.{k}" if path else k)
    elif isinstance(v, list) and v:
        for i, x in enumerate(v):
            yield from leaves(x, f"{path}[{i}]")
    else:
        yield path, v


def pattern(path: str) -> str:
    return re.sub(r"\[\d+\]", "[*]", path)


def changed(path: str, v):
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 1
    if isinstance(v, float):
        return v * 1.5 + 0.25
    if isinstance(v, str) and re.match(r"^\d{4}-\d\d-\d\dT", v):  # a date: three days later, still a date
        import datetime as dt

        return (dt.datetime.fromisoformat(v) + dt.timedelta(days=3)).isoformat(timespec="seconds")
    if isinstance(v, str):
        return (v[:-1] + ("0" if v[-1] != "0" else "1")) if HEX.match(v) else v + "x"
    if v is None:
        return 7
    if isinstance(v, list):
        return [{"index": 0, "name": "NVIDIA H200", "memory_total": 1}] if path.endswith("gpus") else ["x"]
    return {"x": 1}


def put(doc: dict, path: str, value) -> None:
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    cur = doc
    for p in parts[:-1]:
        cur = cur[int(p[1:-1])] if p.startswith("[") else cur[p]
    last = parts[-1]
    if last.startswith("["):
        cur[int(last[1:-1])] = value
    else:
        cur[last] = value


def caught(folder: Path, doc: dict) -> bool:
    """Written back with fresh renderings, as an editor would: does verify refuse it?"""
    path = folder / certificate.CERT_NAME
    try:
        certificate.write(copy.deepcopy(doc), path)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        path.write_text(json.dumps(doc), encoding="utf-8")  # it cannot be rendered: the renderings go stale
    try:
        return not certificate.verify(path).ok
    except InputError:
        return True  # refused on load: one line


def stated(path: str) -> bool:
    p = pattern(path)
    return any(fnmatch.fnmatchcase(p, s) or fnmatch.fnmatchcase(p, s + ".*") for s in STATED)


def test_every_field_edited_is_caught_or_labelled_stated(made, tmp_path, capsys):
    out, doc = made
    work = tmp_path / "w"
    shutil.copytree(out, work)
    seen: set[str] = set()
    tried = hit = labelled = 0
    missed = []
    for path, value in leaves(doc):
        if pattern(path) in seen:
            continue
        seen.add(pattern(path))
        edited = copy.deepcopy(doc)
        put(edited, path, changed(path, value))
        tried += 1
        if caught(work, edited):
            hit += 1
        elif stated(path):
            labelled += 1
        else:
            missed.append(path)
    # pairs of fields that say the same thing, edited together, the session hashes as they are
    pairs = [
        ("inputs.prompt_set.sha256", "measured_on.prompt_set.sha256"),
        ("inputs.prompt_set.count", "measured_on.prompt_set.count"),
        ("verdict.line", "derived.verdict.line"),
        ("verdict.status", "derived.verdict.status"),
        ("inputs.runs", "derived.greedy.per_prompt[0].runs"),
        ("inputs.sampled.seed_base", "derived.sampled.prompts[0].divergent_seeds"),
        ("inputs.params.max_tokens", "inputs.sampled.max_tokens"),
        ("measured_on.spectui", "measured_on.date"),
        ("measured_on.hardware.gpus", "measured_on.hardware.cores_logical"),
        ("sessions[0].path", "sessions[1].path"),
    ]
    for a, b in pairs:
        edited = copy.deepcopy(doc)
        va = changed(a, dict(leaves(doc)).get(a))
        put(edited, a, va)
        put(edited, b, va if a.split(".")[-1] == b.split(".")[-1] else changed(b, dict(leaves(doc)).get(b)))
        tried += 1
        if caught(work, edited):
            hit += 1
        else:
            missed.append(f"{a} + {b}")
    with capsys.disabled():
        print(f"\ntamper: {tried} fields and pairs tried, {hit} caught by verify, {labelled} labelled stated")
    assert not missed, f"edited, verified, and not labelled stated: {missed}"
    assert hit + labelled == tried


SESSION_EDITS = [
    ("greedy.jsonl", "header spectui version", lambda r: {**r, "spectui": "9.9.9"} if "format" in r else r),
    ("greedy.jsonl", "header date", lambda r: {**r, "created": "2020-01-01T00:00:00+00:00"} if "format" in r else r),
    (
        "greedy.jsonl",
        "every prompt's max_tokens",
        lambda r: {**r, "params": {**r["params"], "max_tokens": 4096}} if r.get("type") == "prompt" else r,
    ),
    (
        "sampled.jsonl",
        "every sampled prompt's temperature",
        lambda r: {**r, "params": {**r["params"], "temperature": 0.3}} if r.get("type") == "prompt" else r,
    ),
    (
        "greedy.jsonl",
        "the probes' GPUs",
        lambda r: {**r, "gpus": [{"index": 0, "name": "NVIDIA H200"}]} if r.get("type") == "probe" else r,
    ),
]


@pytest.mark.parametrize("name,what,edit", SESSION_EDITS, ids=[e[1] for e in SESSION_EDITS])
def test_a_session_edited_with_its_hash_fixed_does_not_verify(made, tmp_path, name, what, edit):
    out, doc = made
    work = tmp_path / "w"
    shutil.copytree(out, work)
    recs = [json.loads(x) for x in (work / name).read_text(encoding="utf-8").splitlines()]
    new = [edit(r) for r in recs]
    assert new != recs, f"{what}: nothing to edit"
    (work / name).write_text("".join(json.dumps(r) + "\n" for r in new), encoding="utf-8")
    edited = copy.deepcopy(doc)
    for ref in edited["sessions"]:
        if ref["path"] == name:
            ref["sha256"] = certificate.sha256_of(work / name)
            ref["bytes"] = (work / name).stat().st_size
    assert caught(work, edited), what


def malformed(doc: dict) -> list[tuple[str, object]]:
    ref = {k: v for k, v in doc["sessions"][0].items() if k != "phase"}
    out: list[tuple[str, object]] = [
        ("sessions: [1]", {**doc, "sessions": [1]}),
        ("a ref without phase", {**doc, "sessions": [ref]}),
        ("derived: {}", {**doc, "derived": {}}),
        ('hardware: "x"', {**doc, "measured_on": {**doc["measured_on"], "hardware": "x"}}),
        ("version 0", {**doc, "version": 0}),
        ("version 1.5", {**doc, "version": 1.5}),
        ("version true", {**doc, "version": True}),
        ("inputs: []", {**doc, "inputs": []}),
        ("per_prompt: null", json.loads(json.dumps(doc).replace('"per_prompt": [', '"per_prompt": null, "x": ['))),
        ("runs: -1", {**doc, "inputs": {**doc["inputs"], "runs": -1}}),
        ("a list", [doc]),
    ]
    return out


def test_malformed_certificates_are_one_line_never_a_traceback(made, tmp_path, capsys):
    out, doc = made
    cases = malformed(doc)
    deep = "[" * 100_000 + "]" * 100_000
    for i, (what, d) in enumerate([*cases, ("100k-deep JSON", None)]):
        folder = tmp_path / f"m{i}"
        shutil.copytree(out, folder)
        text = deep if d is None else json.dumps(d)
        (folder / certificate.CERT_NAME).write_text(text, encoding="utf-8")
        code = main(["verify", str(folder)])
        said = capsys.readouterr()
        assert code in (1, 2), what
        assert "Traceback" not in said.out + said.err, what
        if code == 2:
            assert len(said.err.strip().splitlines()) == 1, (what, said.err)


def test_a_session_ref_outside_the_folder_is_not_read(made, tmp_path, capsys):
    import hashlib

    out, doc = made
    secret = tmp_path / "secret.txt"
    secret.write_text("a file the certificate must not be able to confirm\n", encoding="utf-8")
    digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    for i, path in enumerate(["../secret.txt", str(secret), "link.jsonl", "sub"]):
        folder = tmp_path / f"r{i}" / "c"
        shutil.copytree(out, folder)
        (folder / "link.jsonl").symlink_to(secret)
        (folder / "sub").mkdir()
        edited = copy.deepcopy(doc)
        edited["sessions"][0] = {**edited["sessions"][0], "path": path, "sha256": digest}
        certificate.write(edited, folder / certificate.CERT_NAME)
        assert main(["verify", str(folder)]) == 1
        said = capsys.readouterr().out
        assert "sha256 ok" not in said.split("✓")[0] and f"session {path}: sha256 ok" not in said, path
        assert f"session {path}: " in said and "not read" in said, (path, said)


def test_every_rendering_labels_what_the_sessions_cannot_show(made):
    out, _ = made
    for name in ("certificate.md", "certificate.html"):
        text = (out / name).read_text(encoding="utf-8")
        assert "stated, not derivable from the sessions (verify cannot check them): the URLs" in text, name
        assert "model file: — (stated, not derivable)" in text.replace("\\", ""), name
