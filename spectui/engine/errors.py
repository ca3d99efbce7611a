"""The engine's exception tree; the CLI and the TUI turn these into one-line messages.

    SpectuiError
    ├── ServerError            a server could not be used
    │   ├── ServerUnreachable  nothing answers at the URL
    │   ├── ServerLoading      the server is still loading its model (timed out waiting)
    │   ├── ServerHTTPError    the server answered with an HTTP error
    │   ├── NotLlamaServer     something answers, but it is not the expected kind of server
    │   └── StreamBroken       the stream stopped or was malformed mid-response
    ├── InputError             a file or option given by the user is wrong
    └── SetupError             the llama-server build or the model could not be made ready
"""

from __future__ import annotations


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
        return exc.one_line()
    return f"{type(exc).__name__}: {exc}"


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


class InputError(SpectuiError):
    pass


class SetupError(SpectuiError):
    pass
