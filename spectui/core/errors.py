"""The engine's exception tree; the CLI and the TUI turn these into one-line messages.

SpectuiError
├── ServerError            a server could not be used
│   ├── ServerUnreachable  nothing answers at the URL
│   ├── ServerLoading      the server is still loading its model (timed out waiting)
│   ├── ServerHTTPError    the server answered with an HTTP error
│   ├── NotLlamaServer     something answers, but it is not the expected kind of server
│   ├── StreamBroken       the stream stopped or was malformed mid-response
│   └── BadEvent           an event's field has a type spectui cannot read
├── Unsupported            the server cannot do what was asked (a capability it lacks)
├── InputError             a file or option given by the user is wrong
└── SetupError             the llama-server build or the model could not be made ready
"""

from __future__ import annotations

import re


class SpectuiError(Exception):
    """Base of every error spectui reports to the user as one line."""

    hint: str = ""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        if hint:
            self.hint = hint

    def one_line(self) -> str:
        msg = str(self)
        return f"{msg} — {self.hint}" if self.hint else msg


def describe(exc: BaseException) -> str:
    """The one-line message for any exception: ours say what to do, others name their type."""
    if isinstance(exc, SpectuiError):
        return redact(exc.one_line())
    return redact(f"{type(exc).__name__}: {exc}")


_SECRETS: set[str] = set()
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")
_KEYLIKE = re.compile(
    r"(?i)(?P<k>authorization[\"']?\s*[:=]\s*[\"']?(?:bearer|basic)?\s*|"
    r"(?:api[_-]?key|x-api-key|token|password|secret)[\"']?\s*[:=]\s*[\"']?)"
    r"(?P<v>[^\s\"',;}]+)"
)


def register_secret(value: str | None) -> None:
    """A value (an API key read from the environment) that must never appear in anything spectui writes."""
    if value and len(value) >= 4:
        _SECRETS.add(value)


def redact(text: str) -> str:
    """Text with URL credentials, key-looking values and registered secrets replaced by '***'."""
    if not text:
        return text
    for secret in _SECRETS:
        text = text.replace(secret, "***")
    text = _USERINFO.sub(lambda m: m.group("scheme") + "***@", text)
    return _KEYLIKE.sub(lambda m: m.group("k") + "***", text)


class ServerError(SpectuiError):
    pass


class ServerUnreachable(ServerError):
    hint = "check the URL and that the server is running"


class ServerLoading(ServerError):
    hint = "the model is still loading; wait, or raise --ready-timeout"


class ServerHTTPError(ServerError):
    def __init__(self, message: str, status: int, hint: str = "") -> None:
        super().__init__(message, hint)
        self.status = status


class NotLlamaServer(ServerError):
    hint = "point --baseline/--candidate at a llama.cpp llama-server"


class StreamBroken(ServerError):
    hint = "the server stopped mid-answer; see its log"


class Unsupported(SpectuiError):
    pass


class BadEvent(ServerError):
    """A server event whose field has the wrong type: that side fails with this line, the other goes on."""

    hint = "the server's API differs from what spectui reads; check its version, or name --backend"

    def __init__(self, field: str, value: object) -> None:
        super().__init__(f"the server sent an event spectui cannot read: {field} is {type(value).__name__}")


def checked(obj: dict, key: str, kinds: type | tuple, default=None):
    """obj[key] if it has one of `kinds` (bool is never a number here), default when absent or null."""
    v = obj.get(key)
    if v is None:
        return default
    if isinstance(v, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise BadEvent(key, v)
    if not isinstance(v, kinds):
        raise BadEvent(key, v)
    return v


class InputError(SpectuiError):
    pass


class SetupError(SpectuiError):
    pass
