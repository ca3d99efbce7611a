"""A scripted misbehaving server (asyncio, raw HTTP/1.1) for the fault suite: it answers identity
requests like llama-server b11434 and then misbehaves on /completion in the way its mode names."""

from __future__ import annotations

import asyncio
import json
import threading

PROPS = {
    "default_generation_settings": {"n_ctx": 2048, "params": {}},
    "build_info": "b11434-fault",
    "model_path": "/m/SmolLM2-135M-Instruct.Q4_1.gguf",
    "total_slots": 1,
    "chat_template": "x",
}


class FaultServer:
    """Modes: keepalive (SSE comments forever), silent (accepts, never answers), html (every path an
    HTML page), bad-event (`content` is a number), echo-auth (a 500 whose body echoes the request headers)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.requests: list[tuple[str, str]] = []  # (method, path) of each request, in arrival order

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self._thread.start()
        assert self._ready.wait(60), "the fault server's thread did not start"
        return self

    def __exit__(self, *exc):
        async def shutdown():
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop)
        self._thread.join(10)

    def _run(self):
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _handle(self, reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                n = int(headers.get("content-length", 0))
                if n:
                    await reader.readexactly(n)
                self.requests.append((method, path.split("?")[0]))
                if not await self._answer(method, path.split("?")[0], headers, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _answer(self, method, path, headers, writer) -> bool:
        def send(status, body, ctype="application/json"):
            data = body.encode() if isinstance(body, str) else body
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data
            )

        if self.mode == "silent":
            await asyncio.sleep(3600)
            return False
        if self.mode == "html":
            send("200 OK", "<html><body>It works!</body></html>", "text/html")
            return True
        if path == "/health":
            send("200 OK", '{"status":"ok"}')
        elif path == "/props":
            send("200 OK", json.dumps(PROPS))
        elif path in ("/slots", "/metrics"):
            send("404 Not Found", '{"error":{"message":"not here"}}')
        elif path == "/apply-template":
            send("200 OK", json.dumps({"prompt": "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"}))
        elif path == "/v1/models" and self.mode == "echo-auth":
            send("200 OK", json.dumps({"data": [{"id": "smollm2"}]}))
        elif path in ("/completion", "/v1/completions") and self.mode == "echo-auth":
            send(
                "500 Internal Server Error", json.dumps({"error": {"message": f"bad request, headers were {headers}"}})
            )
        elif path == "/completion":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")

            def chunk(text: str):
                data = text.encode()
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

            if self.mode == "bad-event":
                chunk('data: {"content": "ok", "tokens": [1], "tokens_predicted": 1}\n\n')
                chunk('data: {"content": 5, "tokens": [2], "tokens_predicted": 2}\n\n')
                await writer.drain()
                await asyncio.sleep(3600)
            while self.mode == "keepalive":
                chunk(": keep-alive\n\n")
                await writer.drain()
                await asyncio.sleep(0.05)
            return False
        else:
            send("404 Not Found", '{"error":{"message":"no such path"}}')
        await writer.drain()
        return True
