"""A scripted llama-server for the CLI's promises (tests/README.md: scripted, in the test process): it
answers /health, /props, /apply-template and /completion as llama-server b11434 does, replaying given
payloads, keeps every request body it got, and can serve a /metrics text and pause before streaming.

The OS picks its port (bound to 127.0.0.1:0 and read back), so no two tests can race for one.
"""

from __future__ import annotations

import asyncio
import json
import threading

MODEL = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"


class ScriptedLlama:
    def __init__(
        self,
        payloads: list[dict] | list[list[dict]],
        model_path: str = MODEL,
        build: str = "b11434-scripted",
        metrics=None,
        stall_s: float = 0.0,
        speculative: dict | None = None,
    ) -> None:
        # one stream for every request, or one per request in turn (the last one repeated)
        self.streams = payloads if payloads and isinstance(payloads[0], list) else [payloads]
        # a /metrics text, or a function of the number of requests answered so far; None: 404, like a
        # server started without --metrics
        self.metrics = metrics
        self.stall_s = stall_s  # wait this long before the first event (a server that is slow to answer)
        params = {"speculative": speculative} if speculative else {}
        self.props = {
            "default_generation_settings": {"n_ctx": 2048, "params": params},
            "build_info": build,
            "model_path": model_path,
            "total_slots": 1,
            "chat_template": "chatml",
        }
        self.bodies: list[dict] = []  # every /completion request body, in order
        self.paths: list[str] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ScriptedLlama:
        self._thread.start()
        if not self._ready.wait(60):  # an upper bound: a loaded machine may take seconds to start the thread
            raise RuntimeError("the scripted server did not start")
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
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _handle(self, reader, writer) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                _method, path, _ = lines[0].split(" ", 2)
                headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                n = int(headers.get("content-length", 0))
                body = await reader.readexactly(n) if n else b""
                await self._answer(path.split("?")[0], body, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _answer(self, path: str, body: bytes, writer) -> None:
        def send(status: str, text: str, kind: str = "application/json") -> None:
            data = text.encode()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data
            )

        self.paths.append(path)
        if path == "/health":
            send("200 OK", '{"status":"ok"}')
        elif path == "/props":
            send("200 OK", json.dumps(self.props))
        elif path == "/apply-template":
            msgs = json.loads(body or b"{}").get("messages", [])
            text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs)
            send("200 OK", json.dumps({"prompt": text + "<|im_start|>assistant\n"}))
        elif path == "/metrics" and self.metrics is not None:
            text = self.metrics(len(self.bodies)) if callable(self.metrics) else self.metrics
            send("200 OK", text, "text/plain; version=0.0.4")
        elif path == "/completion":
            stream = self.streams[min(len(self.bodies), len(self.streams) - 1)]
            self.bodies.append(json.loads(body or b"{}"))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            await writer.drain()
            if self.stall_s:
                await asyncio.sleep(self.stall_s)
            for p in stream:
                data = f"data: {json.dumps(p)}\n\n".encode()
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                await writer.drain()
            writer.write(b"0\r\n\r\n")
        else:
            send("404 Not Found", '{"error":{"code":404,"message":"File Not Found"}}')
        await writer.drain()
