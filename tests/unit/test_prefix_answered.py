"""Prefix caching answered as its own question: the demo keeps each server's cache setting and runs the cache
lab (cold vs warm turns), and `spectui prefix` refuses one server on both sides."""

from __future__ import annotations

import pytest

from spectui.cli.demo import demo_overrides
from spectui.cli.main import main
from spectui.labs.prefix import same_server


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/"),
        ("http://localhost:8080", "http://127.0.0.1:8080/v1"),
    ],
)
def test_the_same_server_on_both_sides_is_refused_with_why(a, b, capsys):
    assert "the same server" in (same_server(a, b) or "")
    assert main(["prefix", "--baseline", a, "--candidate", b]) == 2
    err = capsys.readouterr().err
    assert "cold request would fill the cache" in err and "Traceback" not in err


def test_two_ports_are_two_servers():
    assert same_server("http://127.0.0.1:8080", "http://127.0.0.1:8081") is None


def test_the_prefix_demo_does_not_force_the_cache_off_and_opens_the_cache_lab():
    o = demo_overrides("prefix")
    assert o["params"].cache_prompt is None  # each server's own: --no-cache-prompt / --cache-prompt as launched
    assert o["autorun_lab"] == "prefix_lab" and o["autorun"] is False
    assert demo_overrides("draft") == {}
