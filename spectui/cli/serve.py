"""`spectui serve`: the same app in a web browser (textual-serve), for its owner only.

Each browser tab runs its own `python -m spectui …` process, which can launch and stop servers, so
the web server does what Jupyter's does before it starts one (spectui/cli/serve_guard.py):

- a random token, generated at start and printed in the URL, is needed for the page, the websocket
  (in its path) and downloads (in an HttpOnly, SameSite=Strict cookie set with the page);
- a request whose Origin is not this server's (a page of another site, or another port of this one)
  is refused unless `--allow-origin` names it; the Host header must name the bound address (a DNS
  rebinding page reaches 127.0.0.1 under its own name);
- at most `--max-apps` app processes run at once (default 4); past that, one clear line.

textual-serve starts each app through a shell; spectui starts it as an argv list (split back with
shlex, never given to a shell), with PR_SET_PDEATHSIG as the launcher gives its llama-servers, so a
`kill -9` of `spectui serve` takes its app processes (and their servers) with it. The web server itself is
spectui/cli/serve_web.py, imported once these checks pass.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys

from spectui.cli.commands import COMMANDS
from spectui.cli.serve_guard import Guard
from spectui.core.errors import InputError


def app_command(app_args: list[str]) -> list[str]:
    args = app_args[1:] if app_args[:1] == ["--"] else list(app_args)
    if args[:1] == ["serve"]:
        raise InputError("spectui serve cannot serve itself", hint="put the TUI's own arguments after --")
    if args[:1] and args[0].startswith("-") and args[0] not in ("-h", "--help", "--version"):
        args = ["tui", *args]  # `spectui serve -- --baseline URL …` serves `spectui tui --baseline URL …`
    return [sys.executable, "-m", "spectui", *args]


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def cmd_serve(args) -> int:
    try:
        import textual_serve  # noqa: F401  # lazy: is it installed? one line if not
    except ImportError:
        raise InputError("textual-serve is not installed", hint="pip install 'spectui[serve]'") from None
    if not 0 <= args.port < 65536:
        raise InputError(f"--port must be 0–65535 (0: a free port), not {args.port}")
    max_apps = getattr(args, "max_apps", 4)
    if max_apps < 1:
        raise InputError(f"--max-apps must be at least 1, not {max_apps}")
    command = app_command(args.app_args)
    guard = Guard(max_apps=max_apps, allowed_origins=getattr(args, "allow_origin", None) or [])
    if not _is_loopback(args.host):
        print(
            f"spectui: warning: serving on {args.host}: anyone who reaches this port and has the URL's token gets "
            "the app, which can launch and stop servers; the token travels unencrypted over http",
            file=sys.stderr,
        )
    logging.basicConfig(level=logging.WARNING, format="spectui serve: %(message)s")
    from spectui.cli.serve_web import serve  # lazy: aiohttp (~277 ms cold): only when serving

    serve(command, guard, args.host, args.port)
    return 0


def register(sub) -> None:
    p = sub.add_parser("serve", help=COMMANDS["serve"].help)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, metavar="N", help="port (default 8000; 0 picks a free one)")
    p.add_argument(
        "--max-apps", type=int, default=4, metavar="N", help="app processes (browser tabs) at once (default 4)"
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        metavar="ORIGIN",
        help="also accept requests from pages of ORIGIN (e.g. http://localhost:3000; * for any); repeatable",
    )
    p.add_argument("app_args", nargs=argparse.REMAINDER, metavar="-- ARGS", help="the app's own arguments, after --")
