"""`spectui serve`: the same app in a web browser (textual-serve), bound to 127.0.0.1 unless told otherwise.

Each browser tab runs its own `python -m spectui …` process. textual-serve starts it through a shell;
spectui starts it as an argv list instead (the command line is split back with shlex, never given to a
shell), as it starts every process.
"""

from __future__ import annotations

import asyncio
import ipaddress
import shlex
import sys

from spectui.core.errors import InputError


def _exec_service():
    """textual-serve's AppService, starting the app with create_subprocess_exec instead of a shell."""
    from textual_serve import app_service

    class ExecAppService(app_service.AppService):
        async def _open_app_process(self, width: int = 80, height: int = 24):
            environment = self._build_environment(width=width, height=height)
            self._process = process = await asyncio.create_subprocess_exec(
                *shlex.split(self.command),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=environment,
            )
            self._stdin = process.stdin
            return process

    return ExecAppService


def app_command(app_args: list[str]) -> list[str]:
    args = app_args[1:] if app_args[:1] == ["--"] else list(app_args)
    if args[:1] == ["serve"]:
        raise InputError("spectui serve cannot serve itself", hint="put the TUI's own arguments after --")
    if args[:1] and args[0].startswith("-") and args[0] not in ("-h", "--help", "--version"):
        args = ["tui", *args]  # `spectui serve -- --baseline URL …` serves `spectui tui --baseline URL …`
    return [sys.executable, "-m", "spectui", *args]


def cmd_serve(args) -> int:
    try:
        from textual_serve import server as serve_module
    except ImportError:
        raise InputError("textual-serve is not installed", hint="pip install 'spectui[serve]'") from None
    if not 0 < args.port < 65536:
        raise InputError(f"--port must be 1–65535, not {args.port}")
    command = app_command(args.app_args)
    try:
        loopback = ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = args.host == "localhost"
    if not loopback:
        print(
            f"spectui: warning: serving on {args.host}: anyone who reaches this port gets the app, "
            "which can launch and stop servers",
            file=sys.stderr,
        )
    serve_module.AppService = _exec_service()  # every tab's app process: an argv list, no shell
    server = serve_module.Server(shlex.join(command), host=args.host, port=args.port, title="spectui")
    print(f"spectui: serving the app at http://{args.host}:{args.port}/ (Ctrl+C to stop)", file=sys.stderr, flush=True)
    server.serve()
    return 0
