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

Redaction lives here too, once: `redact` for messages (URL credentials, key-looking values, registered
secrets), `redact_credentials` for documents and the console (only the exact secrets registered: API
keys read from the environment and the user:password@ of every URL given on the command line, so a
model's output or a field named `…_token` is never altered), and `redacting_stream`, which the CLI puts
over stdout and stderr so no line it prints carries them.
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
        return redact(f"{msg} — {self.hint}" if self.hint else msg)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with every control character escaped (ESC, CR, BEL, backspace, C1, bidirectional overrides):
    a name or path from a file the user was given can never move the cursor, retitle the terminal or hide
    what follows it."""
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)


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
_FIGURE = re.compile(r"[0-9.]+(?:ms|s|%)?")


def _keylike(m: re.Match) -> str:
    # "per token: 15.0 ms" is a figure, not a key; a password or key that is all digits is still hidden (and
    # a registered secret is hidden whatever it looks like, by redact_credentials)
    if m.group("k").lower().startswith("token") and _FIGURE.fullmatch(m.group("v")):
        return m.group(0)
    return m.group("k") + "***"


def register_secret(value: str | None) -> None:
    """A value (an API key read from the environment) that must never appear in anything spectui writes."""
    if value and len(value) >= 4:
        _SECRETS.add(value)


def register_url(url: str | None) -> None:
    """A URL's user:password@, which must never appear in anything spectui writes or prints."""
    m = _USERINFO.match(url.strip()) if isinstance(url, str) else None
    if m:
        _SECRETS.add(m.group(0)[len(m.group("scheme")) :])  # "user:pw@", "@" included: specific even if short


def register_urls_in(argv) -> None:
    """Every command-line value that is a URL with credentials (--baseline, --candidate, a cache URL, …)."""
    for arg in argv or ():
        if isinstance(arg, str) and "@" in arg:
            register_url(arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg)


def redact_credentials(text: str) -> str:
    """Text with the registered secrets (API keys, URLs' user:password@) replaced by '***'; nothing else
    is touched, so a document's data (a model's output, a key named `…_token`) stays as it was."""
    if not text or not _SECRETS:
        return text
    for secret in sorted(_SECRETS, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "***@" if secret.endswith("@") else "***")
    return text


# flags whose value is a secret, of every engine: llama-server --api-key, --api-key-file, -hft/--hf-token
# (llama.cpp tools/server/README.md); vLLM serve --api-key, --hf-token (vLLM docs, "vllm serve" CLI
# reference); SGLang --api-key, --admin-api-key (sglang python/sglang/srt/server_args.py)
SECRET_FLAGS = frozenset({"--api-key", "--api-key-file", "-hft", "--hf-token", "--admin-api-key"})


def redact_argv(argv) -> list[str]:
    """A command line as spectui may write it: each secret flag's value (`--api-key K` or `--api-key=K`) as
    '***' and registered as a secret (so it is hidden wherever else it appears), every registered secret
    hidden in the other arguments."""
    out: list[str] = []
    hide_next = False
    for arg in argv or ():
        arg = str(arg)
        if hide_next:
            register_secret(arg)
            out.append("***")
            hide_next = False
            continue
        flag, eq, value = arg.partition("=")
        if flag in SECRET_FLAGS:
            if eq:
                register_secret(value)
                out.append(f"{flag}=***")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(redact_credentials(arg))
    return out


def redact(text: str) -> str:
    """Text with URL credentials, key-looking values and registered secrets replaced by '***'."""
    if not text:
        return text
    text = redact_credentials(text)
    text = _USERINFO.sub(lambda m: m.group("scheme") + "***@", text)
    return _KEYLIKE.sub(_keylike, text)


class _RedactingStream:
    """A text stream that writes through `redact_credentials`; everything else is the wrapped stream's."""

    def __init__(self, raw) -> None:
        self._raw = raw

    def write(self, text: str) -> int:
        self._raw.write(redact_credentials(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._raw, name)


def redacting_stream(raw):
    """`raw` wrapped so that no registered secret is written through it (once: wrapping twice is a no-op)."""
    return raw if isinstance(raw, _RedactingStream) or raw is None else _RedactingStream(raw)


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
