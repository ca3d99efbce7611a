"""tests/unit is server-free: every test here fails if it starts a server (tests/serverfree.py)."""

from __future__ import annotations

import pytest

from tests.serverfree import check_fixtures, no_servers  # noqa: F401  (the fixture, used below)


def pytest_runtest_setup(item):
    check_fixtures(item)  # before any fixture runs: a session fixture would start servers first


@pytest.fixture(autouse=True)
def _server_free(no_servers):  # noqa: F811
    yield


@pytest.fixture
def stand_in_assets(tmp_path, monkeypatch):
    """A llama-server and models that exist but are never started (tests here are server-free): a test that
    plans or describes a launch needs paths to write into argv, not a build, so the fast tests need nothing
    built (a fresh clone before `spectui setup`)."""
    server = tmp_path / "llama-server"
    server.write_text("#!/bin/sh\nexit 1\n")
    server.chmod(0o755)
    for name, env in (("model.gguf", "SPECTUI_MODEL"), ("draft.gguf", "SPECTUI_DRAFT_MODEL")):
        (tmp_path / name).write_bytes(b"GGUF")
        monkeypatch.setenv(env, str(tmp_path / name))
    monkeypatch.setenv("SPECTUI_LLAMA_SERVER", str(server))
    return server
