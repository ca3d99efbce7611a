"""A scripted llama-server that answers /completion with a recorded stream (tests/data), for tests that
must drive the real CLI, TUI and sweep through HTTP on streams chosen to differ in one known way.

It answers the identity requests as llama-server b11434 does (/health, /props, /apply-template) and has
no /metrics or /slots (404), like a server started without --metrics. Every /completion replays the
payloads it was given, as SSE in HTTP chunks, one event per chunk.
"""

from __future__ import annotations

import asyncio
import json
import threading

MODEL = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"


class RecordedServer:
    def __init__(
        self,
        payloads: list[dict],
        build: str = "b11434-recorded",
        model_path: str = MODEL,
        cut_after: int | None = None,
    ) -> None:
        self.payloads = payloads
        # drop the connection after this many events of every /completion (0: before the first token),
        # as a server killed mid-stream does
        self.cut_after = cut_after
        self.props = {
            "default_generation_settings": {"n_ctx": 2048, "params": {}},
            "build_info": build,
            "model_path": model_path,
            "total_slots": 1,
            "chat_template": "chatml",
        }
        self.port = 0
        self.requests = 0  # /completion requests answered
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> RecordedServer:
        self._thread.start()
        if not self._ready.wait(60):  # an upper bound: a loaded machine may take seconds to start the thread
            raise RuntimeError("the recorded server did not start")
        return self

    def __exit__(self, *exc) -> None:
        async def shutdown():
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]  # the OS picked the port: no race
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _handle(self, reader, writer) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                n = int(headers.get("content-length", 0))
                if n:
                    await reader.readexactly(n)
                await self._answer(path.split("?")[0], writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _answer(self, path: str, writer) -> None:
        def send(status: str, body: str) -> None:
            data = body.encode()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
                + data
            )

        if path == "/health":
            send("200 OK", '{"status":"ok"}')
        elif path == "/props":
            send("200 OK", json.dumps(self.props))
        elif path == "/apply-template":
            send("200 OK", json.dumps({"prompt": "<|im_start|>user\nfizzbuzz<|im_end|>\n<|im_start|>assistant\n"}))
        elif path == "/completion":
            self.requests += 1
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for i, p in enumerate(self.payloads):
                if self.cut_after is not None and i >= self.cut_after:
                    await writer.drain()
                    writer.transport.abort()  # no final chunk: the stream ends mid-response
                    return
                data = f"data: {json.dumps(p)}\n\n".encode()
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                await writer.drain()
            writer.write(b"0\r\n\r\n")
        else:
            send("404 Not Found", '{"error":{"message":"no such path"}}')
        await writer.drain()
