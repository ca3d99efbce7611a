"""A forger with spectui's own tools: a copy of a certificate's folder whose sessions and statements are
edited, the session hashes recomputed, the figures rebuilt with run.prove.certificate.build and the
renderings redrawn with its writer, so the only thing that can give an edit away is what the derivation
itself checks. Rebuilding an unedited copy reproduces the original byte for byte (tested)."""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path

from spectui.core.errors import InputError
from spectui.run.prove import certificate
from spectui.run.prove.derive import normalised


class Forger:
    def __init__(self, src: Path, dst: Path) -> None:
        shutil.copytree(src, dst)
        self.dir = dst
        self.path = dst / certificate.CERT_NAME
        self.doc = {k: v for k, v in certificate.load(self.path).items() if k != "_path"}

    # -- sessions ---------------------------------------------------------------------------------------
    def records(self, name: str = "greedy.jsonl") -> list[dict]:
        return [json.loads(line) for line in (self.dir / name).read_text(encoding="utf-8").splitlines()]

    def write_records(self, recs: list[dict], name: str = "greedy.jsonl") -> None:
        (self.dir / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), "utf-8")

    def edit(self, fn: Callable[[list[dict]], list[dict] | None], name: str = "greedy.jsonl") -> None:
        recs = self.records(name)
        out = fn(recs)  # a new list of records, or None (or anything else): `recs` edited in place
        kept = isinstance(out, list) and all(isinstance(r, dict) for r in out) and out
        self.write_records(out if kept else recs, name)

    # -- the certificate --------------------------------------------------------------------------------
    def rebuild(self, inputs: dict | None = None, measured_on: dict | None = None, after=None) -> Path:
        """The certificate made again from the (edited) sessions by spectui's own build, its hashes and
        renderings fresh; `after` edits the built document before it is written."""
        refs = [certificate.session_ref(self.dir / r["path"], self.dir, r["phase"]) for r in self.doc["sessions"]]
        doc = certificate.build(
            copy.deepcopy(inputs if inputs is not None else self.doc["inputs"]),
            copy.deepcopy(measured_on if measured_on is not None else self.doc["measured_on"]),
            refs,
            self.dir,
            self.doc.get("terms"),
        )
        if after is not None:
            after(doc)
        certificate.write(doc, self.path)
        return self.path

    def write_doc(self, doc: dict) -> Path:
        """An edited document written as it is, its renderings redrawn where they can be."""
        try:
            certificate.write(copy.deepcopy(doc), self.path)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            self.path.write_text(json.dumps(doc), encoding="utf-8")
        return self.path

    def write_text(self, text: str) -> Path:
        self.path.write_text(text, encoding="utf-8")
        return self.path


def refusal(path: Path) -> str | None:
    """verify's first problem (or its one-line refusal to read the file); None where it verifies."""
    try:
        v = certificate.verify(path)
    except InputError as exc:
        return exc.one_line()
    return None if v.ok else v.problems[0]


def events(recs: list[dict], side: str | None = None, n: int | None = None) -> list[dict]:
    return [
        r
        for r in recs
        if r.get("type") == "event" and (side is None or r["side"] == side) and (n is None or r["n"] == n)
    ]


def blocks(recs: list[dict]) -> list[tuple[int, int]]:
    """Each prompt's records as (first, end) index ranges: its prompt record up to the next one."""
    starts = [i for i, r in enumerate(recs) if r.get("type") == "prompt"]
    return [(a, b) for a, b in zip(starts, starts[1:] + [len(recs)])]


def runs_of(recs: list[dict]) -> list[int]:
    return [r.get("run", 1) for r in recs if r.get("type") == "result"]


__all__ = ["Forger", "refusal", "events", "blocks", "normalised"]
