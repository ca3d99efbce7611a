"""tests/contract is server-free: every test here fails if it starts a server (tests/serverfree.py)."""

from __future__ import annotations

import pytest

from tests.serverfree import check_fixtures, no_servers  # noqa: F401  (the fixture, used below)


def pytest_runtest_setup(item):
    check_fixtures(item)  # before any fixture runs: a session fixture would start servers first


@pytest.fixture(autouse=True)
def _server_free(no_servers):  # noqa: F811
    yield
