"""A registered secret (an API key read from the environment) never reaches a message, whatever header
name a server's error echoes it under, and a URL's user:password never reaches the console."""

from __future__ import annotations

import httpx

from spectui.backends.sse import error_text
from spectui.core.errors import ServerError, describe, redact, redact_credentials, register_secret, register_url

KEY = "sk-live-4f9a2b7c1d"  # registered below: every test here sees it as a secret


def setup_module():
    register_secret(KEY)


def test_a_registered_key_is_redacted_under_any_header_name():
    # "x-key" is not a key-looking name: only the registration catches it
    assert redact(f"x-key: {KEY}") == "x-key: ***"
    assert redact_credentials(f"echo {KEY} and {KEY}") == "echo *** and ***"
    assert KEY not in describe(ServerError(f"the gateway said: x-key: {KEY}"))


def test_a_servers_error_body_echoing_the_key_is_redacted():
    echoed = httpx.Response(500, json={"error": {"message": f"bad request headers: x-key: {KEY}; accept: */*"}})
    assert error_text(echoed) == "bad request headers: x-key: ***; accept: */*"


def test_key_looking_values_are_redacted_even_unregistered():
    assert redact("authorization: Bearer abc123xyz") == "authorization: Bearer ***"
    assert redact('{"api_key": "k-1", "x": 1}') == '{"api_key": "***", "x": 1}'
    assert redact("token=t0k; next") == "token=***; next"
    assert redact("password: 1234") == "password: ***" and redact("api_key=42") == "api_key=***"


def test_a_figure_per_token_is_not_taken_for_a_key():
    # a Markdown cell "time per token: 15.0 ms" once came out as "time per token: ***"
    assert redact("time per token: 15.0 ms; draft token=0.6") == "time per token: 15.0 ms; draft token=0.6"
    assert redact("per token: 12.5%") == "per token: 12.5%"
    assert redact("token: 15.0abc") == "token: ***"  # not a figure: hidden as before


def test_url_credentials_are_redacted():
    register_url("http://alice:s3cret@127.0.0.1:8080")
    assert redact_credentials("GET http://alice:s3cret@127.0.0.1:8080/props") == "GET http://***@127.0.0.1:8080/props"
    assert redact("see https://bob:pw@host/x") == "see https://***@host/x"


def test_short_or_empty_values_are_not_secrets():
    register_secret("ab")  # under 4 characters: it would blank out ordinary text
    register_secret(None)
    assert redact_credentials("ab abc") == "ab abc"
    assert redact("") == "" and redact_credentials("") == ""
