"""Who may drive `spectui serve`: the token, the Origin and Host checks and the cap, as aiohttp middleware.

Jupyter's server is the model: a random token printed in the URL at start; requests whose Origin is
not the server's own refused (a page of another site cannot open the websocket, which browsers let
any page do); the Host header checked against the bound address, so a DNS-rebinding page, which
reaches 127.0.0.1 under its own name, is refused too.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import re
import secrets
import socket
from dataclasses import dataclass, field
from typing import Any

PUBLIC_PREFIX = "/static/"  # textual-serve's own scripts and styles: the same for everyone


def cap_message(max_apps: int) -> str:
    return (
        f"spectui serve: {max_apps} app{'s are' if max_apps != 1 else ' is'} already running, the most this server "
        f"starts at once (--max-apps {max_apps}); close a tab running the app, or restart spectui serve with a "
        "higher --max-apps"
    )


def split_host(value: str) -> tuple[str, int | None]:
    """'127.0.0.1:8000' → ('127.0.0.1', 8000); '[::1]:80' → ('::1', 80); a bad port → (host, -1)."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value, -1
        name, rest = value[1:end], value[end + 1 :]
        port_text = rest[1:] if rest.startswith(":") else (None if not rest else "x")
    elif value.count(":") == 1:
        name, port_text = value.split(":")
    else:
        name, port_text = value, None
    if port_text is None:
        return name, None
    return name, int(port_text) if port_text.isdigit() else -1


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclass
class Guard:
    max_apps: int = 4
    allowed_origins: list[str] = field(default_factory=list)
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    host: str = "127.0.0.1"
    port: int = 0

    def bound(self, host: str, port: int) -> None:
        self.host, self.port = host, port

    @property
    def cookie_name(self) -> str:  # cookies ignore the port: one per server, so two do not clash
        return f"spectui_serve_{self.port}"

    def host_allowed(self, header: str | None) -> bool:
        if not header:
            return False
        name, port = split_host(header)
        if port is not None and port != self.port:
            return False
        bound = self.host.lower().strip("[]")
        if bound in ("", "0.0.0.0", "::"):  # every address of this machine: any IP, or its own names
            return _is_ip(name) or name in {"localhost", socket.gethostname().lower(), socket.getfqdn().lower()}
        if name == bound:
            return True
        loopback = bound == "localhost" or (_is_ip(bound) and ipaddress.ip_address(bound).is_loopback)
        return loopback and (name == "localhost" or (_is_ip(name) and ipaddress.ip_address(name).is_loopback))

    def origin_allowed(self, origin: str | None, scheme: str, host: str | None) -> bool:
        if origin is None:  # not a browser's cross-site request (a browser always sends Origin on a websocket)
            return True
        origin = origin.rstrip("/").lower()
        if "*" in self.allowed_origins or origin in (o.rstrip("/").lower() for o in self.allowed_origins):
            return True
        return host is not None and origin == f"{scheme}://{host}".lower()

    def token_given(self, request) -> bool:
        for candidate in (
            request.match_info.get("token"),
            request.query.get("token"),
            request.cookies.get(self.cookie_name),
        ):
            if candidate and hmac.compare_digest(candidate.encode(), self.token.encode()):
                return True
        return False

    def set_cookie(self, response) -> None:
        response.set_cookie(self.cookie_name, self.token, httponly=True, samesite="Strict", path="/")

    @property
    def middleware(self):
        from aiohttp import web  # lazy: aiohttp (~277 ms cold)

        @web.middleware
        async def guard(request, handler):
            host = request.headers.get("Host")
            if not self.host_allowed(host):
                return web.Response(
                    status=403,
                    text=f"spectui serve: Host {host!r} is not this server's address; open the URL spectui printed",
                )
            if not self.origin_allowed(request.headers.get("Origin"), request.scheme, host):
                return web.Response(
                    status=403,
                    text="spectui serve: requests from another origin are refused "
                    "(start spectui serve with --allow-origin ORIGIN to allow one)",
                )
            if not request.path.startswith(PUBLIC_PREFIX) and not self.token_given(request):
                return web.Response(
                    status=403,
                    text="spectui serve: this page needs the token printed by spectui serve: open the URL it printed",
                )
            return await handler(request)

        return guard


# -- bounds once connected ---------------------------------------------------------------
MAX_WIDTH, MAX_HEIGHT = 500, 200  # a terminal larger than any screen shows: an app's memory grows with its size
HEADER_TIMEOUT_S = 10.0  # a connection that has not sent one whole request head by then is closed
MAX_CONNECTIONS = 64  # open connections at once (pages, scripts, websockets of at most --max-apps apps)


def clamp_size(width, height) -> tuple[int, int]:
    """A terminal size from the page (query or resize message) within 1..MAX_WIDTH × 1..MAX_HEIGHT; what is
    not a number is the default 80 × 24 (`["resize", {"width": 100000, …}]` grew one app by 45 MB/s)."""

    def one(v, top: int, default: int) -> int:
        try:
            n = int(v)
        except (TypeError, ValueError, OverflowError):
            return default
        return max(1, min(n, top))

    return one(width, MAX_WIDTH, 80), one(height, MAX_HEIGHT, 24)


def remote_assets_removed(html: str, static_url: str) -> str:
    """The page with no request to another site: textual-serve's template loads Roboto Mono from Google
    Fonts (a machine offline waits for it); the same font ships in its static folder and is used instead."""

    html = re.sub(r"<link\b[^>]*\bhref=\"https?://[^\"]*\"[^>]*>", "", html)
    face = (
        '<style>@font-face { font-family: "Roboto Mono"; '
        f'src: url("{static_url}fonts/RobotoMono-VariableFont_wght.ttf") format("truetype"); }}</style>'
    )
    return html.replace("</head>", face + "\n</head>", 1)


class ConnectionLimits:
    """The listening socket's protocol factory around aiohttp's: at most MAX_CONNECTIONS open at once (past
    that a connection is closed on arrival) and each closed when it has not sent a whole request head within
    HEADER_TIMEOUT_S (800 half-sent requests were held 44 s and more)."""

    def __init__(self, factory, max_connections: int = MAX_CONNECTIONS, header_timeout: float = HEADER_TIMEOUT_S):
        self.factory, self.max_connections, self.header_timeout = factory, max_connections, header_timeout
        self.open = 0
        self.refused = 0  # connections closed on arrival, over the cap
        self.timed_out = 0  # connections closed without a whole request head in time

    def __call__(self):
        limits = self

        class Guarded(asyncio.Protocol):
            def __init__(self) -> None:
                self.inner: Any = None  # aiohttp's RequestHandler, once admitted
                self.timer: asyncio.TimerHandle | None = None

            def connection_made(self, transport) -> None:
                if limits.open >= limits.max_connections:
                    limits.refused += 1
                    transport.abort()
                    return
                limits.open += 1
                self.inner = limits.factory()
                self.timer = asyncio.get_running_loop().call_later(limits.header_timeout, self.check, transport)
                self.inner.connection_made(transport)

            def check(self, transport) -> None:
                # aiohttp's handler counts each request whose head it has parsed (web_protocol.py)
                if getattr(self.inner, "_request_count", 1) == 0:
                    limits.timed_out += 1
                    transport.abort()

            def data_received(self, data: bytes) -> None:
                if self.inner is not None:
                    self.inner.data_received(data)

            def eof_received(self):
                return self.inner.eof_received() if self.inner is not None else None

            def pause_writing(self) -> None:
                if self.inner is not None:
                    self.inner.pause_writing()

            def resume_writing(self) -> None:
                if self.inner is not None:
                    self.inner.resume_writing()

            def connection_lost(self, exc) -> None:
                if self.inner is None:
                    return
                limits.open -= 1
                if self.timer is not None:
                    self.timer.cancel()
                self.inner.connection_lost(exc)

        return Guarded()
