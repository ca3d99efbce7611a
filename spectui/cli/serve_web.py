"""The web server `spectui serve` runs (its checks and the reasons for them: spectui/cli/serve.py):
textual-serve's Server behind the guard (cli.serve_guard), and an AppService that starts each browser tab's
app as an argv list that dies with `spectui serve`. Imported only when `spectui serve` runs: aiohttp and
textual-serve stay out of `spectui serve --help`."""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import signal
import sys

import aiohttp_jinja2
import jinja2
from aiohttp import WSCloseCode, web
from textual_serve import app_service
from textual_serve import server as serve_module

from spectui.cli.serve_guard import ConnectionLimits, Guard, cap_message, clamp_size, remote_assets_removed
from spectui.core.errors import InputError
from spectui.machine.launcher import die_with_parent as pdeathsig

log = logging.getLogger("spectui.serve")
STOP_GRACE_S = 5.0  # an app asked to quit has this long before it is killed


def serve(command: list[str], guard: Guard, host: str, port: int) -> None:
    """The app served at host:port until SIGINT or SIGTERM, each tab's app stopped after."""
    server = GuardedServer(shlex.join(command), guard, host=host, port=port, title="spectui")
    asyncio.run(_run(server, host, port))


def _die_with_parent(parent: int):
    """The launcher's PR_SET_PDEATHSIG, plus the race it leaves: a parent that died before prctl ran."""

    def preexec() -> None:
        pdeathsig()
        if os.getppid() != parent:
            os._exit(1)

    return preexec if sys.platform.startswith("linux") else None


class ExecAppService(app_service.AppService):
    """textual-serve's AppService, starting the app with create_subprocess_exec (no shell), dying with
    `spectui serve`, and killed if it does not quit when asked."""

    async def _open_app_process(self, width: int = 80, height: int = 24):
        width, height = clamp_size(width, height)  # a page may ask for any size
        environment = self._build_environment(width=width, height=height)
        self._process = process = await asyncio.create_subprocess_exec(
            *shlex.split(self.command),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=environment,
            preexec_fn=_die_with_parent(os.getpid()),
        )
        self._stdin = process.stdin
        return process

    async def set_terminal_size(self, width: int, height: int) -> None:
        await super().set_terminal_size(*clamp_size(width, height))

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(super().stop(), STOP_GRACE_S)
        except TimeoutError:
            self.kill()
            await asyncio.wait_for(super().stop(), STOP_GRACE_S)

    def kill(self) -> None:
        if self._process is not None and self._process.returncode is None:
            try:
                self._process.kill()
            except ProcessLookupError:
                pass


class GuardedServer(serve_module.Server):
    """textual-serve's Server with spectui's routes: the websocket under the token, the guard in front,
    the page's URLs taken from the (checked) Host so port 0 works, and a cap on app processes."""

    def __init__(self, command: str, guard: Guard, **kw) -> None:
        super().__init__(command, **kw)
        self.guard = guard
        self.services: set = set()
        self.sockets: set = set()
        self.starting = 0  # app processes admitted and not yet ended (the cap counts these)

    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self.guard.middleware])
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path))
        app.add_routes(
            [
                web.get("/", self.handle_index, name="index"),
                web.get("/ws/{token}", self.handle_websocket, name="websocket"),
                web.get("/download/{key}", self.handle_download, name="download"),
                web.static("/static", self.statics_path, name="static"),
            ]
        )
        app.on_shutdown.append(self.on_shutdown)
        return app

    async def on_shutdown(self, app: web.Application) -> None:
        for ws in list(self.sockets):  # each handler then stops its app (quit, then kill)
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"spectui serve stopped")

    def at_cap(self) -> bool:
        return self.starting >= self.guard.max_apps

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        if self.at_cap():
            return web.Response(status=503, text=cap_message(self.guard.max_apps), content_type="text/plain")
        origin = f"{request.scheme}://{request.host}"
        ws_scheme = "wss" if request.scheme == "https" else "ws"
        context = {
            "font_size": serve_module.to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": f"{ws_scheme}://{request.host}/ws/{self.guard.token}",
            "config": {"static": {"url": f"{origin}/static/"}},
            "application": {"name": self.title},
        }
        response = aiohttp_jinja2.render_template("app_index.html", request, context)
        response.text = remote_assets_removed(response.text or "", f"{origin}/static/")
        self.guard.set_cookie(response)
        return response

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:  # type: ignore[override]
        if self.at_cap():  # refused before the upgrade: no process is started
            return web.Response(status=503, text=cap_message(self.guard.max_apps), content_type="text/plain")
        self.starting += 1
        websocket = web.WebSocketResponse(heartbeat=15)
        width = serve_module.to_int(request.query.get("width", "80"), 80)
        height = serve_module.to_int(request.query.get("height", "24"), 24)
        service = None
        try:
            await websocket.prepare(request)
            self.sockets.add(websocket)
            service = ExecAppService(
                self.command,
                write_bytes=websocket.send_bytes,
                write_str=websocket.send_str,
                close=lambda: _closed(websocket),
                download_manager=self.download_manager,
                debug=self.debug,
            )
            self.services.add(service)
            await service.start(width, height)
            await self._process_messages(websocket, service)
        except asyncio.CancelledError:
            await websocket.close()
        except Exception as error:  # a bad message from the page ends its app, not the server
            log.warning("app session ended: %s", error)
        finally:
            self.sockets.discard(websocket)
            if service is not None:
                try:
                    await service.stop()
                finally:
                    service.kill()
                    self.services.discard(service)
            self.starting -= 1
        return websocket

    def kill_all(self) -> None:
        for service in list(self.services):
            service.kill()


async def _run(server, host: str, port: int) -> None:
    app = await server._make_app()
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=STOP_GRACE_S * 2)
    await runner.setup()
    assert runner.server is not None
    limits = ConnectionLimits(runner.server)  # a connection cap and a header timeout in front of aiohttp's
    try:
        listener = await asyncio.get_running_loop().create_server(limits, host, port)
    except OSError as exc:
        await runner.cleanup()
        raise InputError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="another program holds that port: give --port N (0 picks a free one)",
        ) from None
    bound = listener.sockets[0].getsockname()[1] if listener.sockets else port
    server.guard.bound(host, bound)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else ("[::1]" if host == "::" else host)
    shown = f"[{shown}]" if ":" in shown and not shown.startswith("[") else shown
    print(
        f"spectui: serving the app at http://{shown}:{bound}/?token={server.guard.token} (Ctrl+C to stop)",
        file=sys.stderr,
        flush=True,
    )
    try:
        await stop.wait()
    finally:
        print("spectui: stopping: asking each app to quit", file=sys.stderr, flush=True)
        listener.close()
        try:
            await runner.cleanup()
        finally:
            server.kill_all()


async def _closed(websocket: web.WebSocketResponse) -> None:
    """AppService's close(): the page's websocket closed (aiohttp's close() also says whether it was open)."""
    await websocket.close()
