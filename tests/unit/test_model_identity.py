"""How a certificate identifies the model it was measured on: a file by its sha256, a Hugging Face folder
(vLLM, SGLang) by the sha256 of its manifest — each file's path and sha256 — so the same files anywhere give
the same identity and any changed byte changes it."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from spectui.run.prove.provenance import file_identity
from spectui.run.prove.render import _file


def make_folder(root, weights: bytes = b"\x00\x01weights"):
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"hidden_size": 8}), encoding="utf-8")
    (root / "model.safetensors").write_bytes(weights)
    (root / "sub").mkdir()
    (root / "sub" / "tokenizer.json").write_text("{}", encoding="utf-8")
    (root / ".cache").mkdir()
    (root / ".cache" / "lock").write_text("download tool state", encoding="utf-8")
    return root


def test_a_folder_is_identified_by_its_files_content_wherever_it_lies(tmp_path):
    a = file_identity(make_folder(tmp_path / "a"))
    b = file_identity(make_folder(tmp_path / "elsewhere" / "b"))
    assert a["sha256"] == b["sha256"] and a["files"] == 3  # the hidden .cache is not the model
    # the manifest by hand: sorted relative paths, each with its file's sha256
    by_hand = {
        "config.json": hashlib.sha256(json.dumps({"hidden_size": 8}).encode()).hexdigest(),
        "model.safetensors": hashlib.sha256(b"\x00\x01weights").hexdigest(),
        "sub/tokenizer.json": hashlib.sha256(b"{}").hexdigest(),
    }
    assert a["file_sha256"] == by_hand
    manifest = "".join(f"{k}\0{v}\n" for k, v in sorted(by_hand.items()))
    assert a["sha256"] == hashlib.sha256(manifest.encode()).hexdigest()
    assert a["bytes"] == sum(len(x) for x in (json.dumps({"hidden_size": 8}).encode(), b"\x00\x01weights", b"{}"))


@pytest.mark.parametrize("change", ["a weight byte", "a file renamed", "a file added"])
def test_any_change_to_the_folder_changes_its_identity(tmp_path, change):
    before = file_identity(make_folder(tmp_path / "m"))["sha256"]
    m = tmp_path / "m"
    if change == "a weight byte":
        (m / "model.safetensors").write_bytes(b"\x00\x02weights")
    elif change == "a file renamed":
        shutil.move(m / "sub" / "tokenizer.json", m / "tokenizer.json")
    else:
        (m / "generation_config.json").write_text("{}", encoding="utf-8")
    assert file_identity(m)["sha256"] != before


def test_the_certificate_says_what_identifies_a_folder(tmp_path):
    ident = file_identity(make_folder(tmp_path / "m"))
    line = _file(ident)
    assert line.startswith(f"{tmp_path / 'm'} sha256 {ident['sha256']}") and "a folder of 3 files" in line
    quick = file_identity(tmp_path / "m", hash_files=False)
    assert "sha256" not in quick and "not hashed" in quick["identity"]
    assert "modified None" not in _file(quick) and "a folder of 3 files" in _file(quick)
    assert file_identity(tmp_path / "absent")["identity"].startswith("reported path only")


def _counting(monkeypatch, age_ns: int):
    """Count the digests model_sha256 computes, with the clock `age_ns` after the file's last stamp."""
    import os

    from spectui.run.prove import provenance

    made = []
    real = provenance.hashlib.sha256

    class Hashlib:
        @staticmethod
        def sha256(*a):
            made.append(1)
            return real(*a)

    stamps = {}
    real_fstat = os.fstat

    def fstat(fd):
        st = real_fstat(fd)
        stamps["last"] = max(st.st_mtime_ns, st.st_ctime_ns)
        return st

    monkeypatch.setattr(provenance, "hashlib", Hashlib)
    monkeypatch.setattr(provenance.os, "fstat", fstat)
    monkeypatch.setattr(provenance.time, "time_ns", lambda: stamps["last"] + age_ns)
    monkeypatch.setattr(provenance, "_MODEL_HASHES", {})
    return made


def test_a_model_file_unchanged_for_a_while_is_read_once_per_process(tmp_path, monkeypatch):
    made = _counting(monkeypatch, age_ns=10**10)  # last written 10 s ago
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF" + bytes(range(256)) * 50)
    want = hashlib.sha256(f.read_bytes()).hexdigest()
    assert file_identity(f)["sha256"] == file_identity(f)["sha256"] == want
    assert len(made) == 1


def test_a_file_written_just_now_is_read_every_time(tmp_path, monkeypatch):
    made = _counting(monkeypatch, age_ns=10**6)  # 1 ms ago: its stamps could still be those of a later write
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF one")
    assert file_identity(f)["sha256"] == file_identity(f)["sha256"] == hashlib.sha256(b"GGUF one").hexdigest()
    assert len(made) == 2


def test_a_changed_model_file_is_hashed_again(tmp_path, monkeypatch):
    import os

    made = _counting(monkeypatch, age_ns=10**10)
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF one")
    os.utime(f, ns=(10**18, 10**18))
    first = file_identity(f)["sha256"]
    f.write_bytes(b"GGUF two")
    os.utime(f, ns=(2 * 10**18, 2 * 10**18))
    assert first != file_identity(f)["sha256"] == hashlib.sha256(b"GGUF two").hexdigest()
    assert len(made) == 2
