"""The caching lab against real llama-server processes: prefix reuse, saved slot caches, quantised KV."""

from __future__ import annotations

import json

import pytest

from spectui.cli.main import main
from spectui.core.types import GenerationParams
from spectui.labs.memory.kv import kv_bytes, model_dims
from spectui.machine.launcher import Launcher, ServerProcess, llama_server_argv
from tests.pilot import ready, until

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def slot_servers(tmp_path_factory):
    from tests.conftest import _need_assets

    found = _need_assets()
    slots = tmp_path_factory.mktemp("slots")
    with Launcher() as launcher:
        cold = launcher.add(ServerProcess("baseline", []))
        warm = launcher.add(ServerProcess("candidate", []))
        for s in (cold, warm):
            s.argv = llama_server_argv(
                found.llama_server, found.model, s.port, ctx=4096, extra=["--slot-save-path", str(slots)]
            )
        launcher.start_all()
        yield cold.url, warm.url, slots


def test_warm_turns_reuse_tokens_and_start_sooner(slot_servers, capsys):
    cold, warm, _ = slot_servers
    code = main(["prefix", "--baseline", cold, "--candidate", warm, "--turns", "3", "--max-tokens", "32", "--json"])
    doc = json.loads(capsys.readouterr().out)
    # a cache hit may change bytes on this server; it is reported (exit 3), not hidden
    assert code == (0 if all(t["identical"] for t in doc["turns"]) else 3)
    t1, t2, t3 = doc["turns"]
    assert t1["candidate"]["prompt_tokens_reused"] == 0
    for t in (t2, t3):
        b, c = t["baseline"], t["candidate"]
        assert b["prompt_tokens_reused"] == 0  # cache_prompt: false recomputes everything
        assert c["prompt_tokens_reused"] > 0
        assert c["prompt_tokens_processed"] + c["prompt_tokens_reused"] == b["prompt_tokens_processed"]
        assert c["metrics_prompt_tokens_cached"] == c["prompt_tokens_reused"]  # the server's own counter agrees
        assert t["identical"] is (t["first_divergence"] is None)
    assert doc["cleared"]["candidate"] == "slot 0 erased"


def test_restore_check_reuses_the_restored_conversation(slot_servers, capsys):
    """Save, erase, restore (labs.prefix.restore_experiment, through `spectui prefix --restore-check`): the
    file on disk is the size the server said, and the next turn reuses the restored tokens."""
    cold, warm, slots = slot_servers
    code = main(
        [
            "prefix",
            "--baseline",
            cold,
            "--candidate",
            warm,
            "--turns",
            "1",
            "--max-tokens",
            "24",
            "--restore-check",
            "--json",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == (0 if all(t["identical"] for t in doc["turns"]) else 3)
    r = doc["restore_check"]
    assert r["tokens_saved"] > 0 and r["tokens_restored"] == r["tokens_saved"] and r["file_bytes"] > 0
    assert (slots / "spectui-restore-check.bin").stat().st_size == r["file_bytes"]
    assert r["recomputed"]["prompt_tokens_reused"] == 0 and r["restored"]["prompt_tokens_reused"] > 0
    assert r["restored"]["prompt_tokens_processed"] < r["recomputed"]["prompt_tokens_processed"]


def test_cache_cli_and_a_server_without_slot_save_path(slot_servers, llama_servers, capsys):
    _, warm, slots = slot_servers
    assert main(["cache", "save", warm, "--file", "cli.bin"]) == 0
    out = capsys.readouterr().out
    assert "saved slot 0" in out and "MB" in out and "ms" in out and (slots / "cli.bin").exists()
    assert main(["cache", "restore", warm, "--file", "cli.bin"]) == 0
    assert main(["cache", "save", llama_servers["baseline"], "--file", "x.bin"]) == 1
    err = capsys.readouterr().err
    assert "--slot-save-path" in err and err.count("\n") == 1
    assert main(["cache", "save", warm]) == 2  # --file missing


def test_kv_memory_from_the_model_dimensions(assets_found, capsys):
    dims = model_dims(assets_found.model)
    assert (dims["layers"], dims["kv_heads"], dims["head_k"]) == (30, 3, 64)
    f16 = kv_bytes(dims, 2048, "f16")
    assert f16 == 2 * 30 * 2048 * 3 * 64 * 2
    assert kv_bytes(dims, 2048, "q4_0") / f16 == pytest.approx(18 / 32 / 2)
    assert main(["kv", "--ctx", "2048"]) == 0
    out = capsys.readouterr().out
    assert "45.0 MiB" in out and "not lossless" in out


async def test_prefix_screen_runs_turns_and_saves_the_slot(slot_servers):
    from spectui.machine.probes import GPUProbe
    from spectui.tui.app import AppConfig, make_app
    from tests.fakes import FakeNVML

    cold, warm, slots = slot_servers
    app = make_app(
        AppConfig(
            cold,
            warm,
            params=GenerationParams(max_tokens=24),
            autosave=False,
            gpu_probe=GPUProbe(FakeNVML(fail_init=True)),
        )
    )
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot, app)
        await pilot.press("ctrl+f")
        await until(pilot, lambda: app.screen.query("#turns"), 10, "the cache lab screen")
        await pilot.press("enter")
        table = app.screen.query_one("#turns")
        await until(  # an upper bound: three turns of real runs on a loaded machine
            pilot, lambda: table.row_count == 3 and "done" in str(app.screen.query_one("#status").render()), timeout=240
        )
        assert table.row_count == 3
        reused = table.get_row_at(1)[4]
        assert reused not in ("—", "0")
        assert "MiB" in str(app.screen.query_one("#kv").render())
        await pilot.press("s")
        status = app.screen.query_one("#status")
        await until(pilot, lambda: "save:" in str(status.render()), 120, "the save")
        assert "MB" in str(app.screen.query_one("#status").render())
        assert (slots / "spectui-conversation.bin").exists()


def test_cache_erase_takes_a_slot(slot_servers, capsys):
    _, warm, _ = slot_servers
    assert main(["cache", "erase", warm, "--slot", "0"]) == 0
    assert "slot 0" in capsys.readouterr().out
    assert main(["cache", "erase", warm, "--slot", "3"]) == 2  # the server has one slot: bad input
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "there is no slot 3" in err
