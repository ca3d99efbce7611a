"""merge: an output that is, or whose .md/.html would replace, an input certificate, its
renderings or a session it references is refused before anything is written; a missing output folder is
created (the shards' sessions copied into it, so verify reads only files inside it); shards measured on
different machines are named in the verdict line with each machine's speed-up."""

from __future__ import annotations

import asyncio

import pytest

from spectui.backends.recorded import ReplayBackend
from spectui.cli.main import main
from spectui.core.types import GenerationParams
from spectui.machine.probes import GPUSample
from spectui.run.prove import certificate
from spectui.run.prove.prove import ProveOptions, Prover
from spectui.run.prove.shard import Shard
from tests.recordings import BASELINE, DRAFT, INFO, payloads
from tests.unit.test_certificate import prompts


class FakeGPU:
    """A GPU probe that sees one H200 (the other shard's machine)."""

    error = None

    def sample(self):
        return [GPUSample(0, "NVIDIA H200", 0, 150_000_000_000, 0)]


def shard(out, i: int, gpu=None) -> str:
    b = ReplayBackend("replay://b", payloads(BASELINE), INFO, virtual_ms_per_event=12.5)
    c = ReplayBackend("replay://c", payloads(DRAFT), INFO, virtual_ms_per_event=12.5)
    options = ProveOptions(runs=2, triage=False, hash_files=False, sampled=0, shard=Shard(i, 2))
    prover = Prover(b, c, GenerationParams(max_tokens=64), prompts(4), "default", out, options, gpu_probe=gpu)
    return asyncio.run(prover.run())["_path"]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    root = tmp_path_factory.mktemp("merge")
    return root, [shard(root / "s1", 1), shard(root / "s2", 2, FakeGPU())]


@pytest.mark.parametrize(
    "target", ["s1/greedy.jsonl", "s1/certificate.json", "s2/certificate.html", "s1/certificate.txt"]
)
def test_an_output_that_would_replace_an_input_is_refused(shards, capsys, target):
    root, paths = shards
    before = {p: p.read_bytes() for d in ("s1", "s2") for p in (root / d).iterdir()}
    assert main(["merge", *paths, "-o", str(root / target)]) == 2
    err = capsys.readouterr().err
    # refused by merge itself, or before it (cli.outputs: a file spectui did not write is left untouched)
    assert ("writing it would replace" in err or "left untouched" in err) and len(err.strip().splitlines()) == 1, err
    assert {p: p.read_bytes() for d in ("s1", "s2") for p in (root / d).iterdir()} == before


def test_merge_into_a_new_folder_names_every_machine(shards, capsys):
    root, paths = shards
    out = root / "elsewhere" / "new" / "merged.json"
    assert main(["merge", *paths, "-o", str(out)]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("IDENTICAL on 4/4")
    cpu = certificate.load(paths[0])["measured_on"]["hardware"]["cpu"]
    assert f"(on 2 machines: CPU {cpu}; NVIDIA H200)" in line, line
    assert "speed-up per machine: CPU" in line and "; NVIDIA H200 " in line
    doc = certificate.load(out)
    assert all(not r["path"].startswith("..") for r in doc["sessions"])
    per = doc["derived"]["speedup"]["by_machine"]
    assert [(m["shards"], m["prompts"]) for m in per] == [([1], 2), ([2], 2)]
    for m, d in zip(per, paths):  # each machine's speed-up is its own shard's
        assert m["speedup"] == certificate.load(d)["derived"]["speedup"]["overall"]
    assert main(["verify", str(out)]) == 0
    capsys.readouterr()
