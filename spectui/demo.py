"""`spectui demo`, the embedded default: launch a bundled pair of llama-servers and compare them."""

from __future__ import annotations

import asyncio
import signal
import sys

from spectui.engine import assets
from spectui.engine.launcher import Launcher, ServerProcess, llama_server_argv

# the cpu-demo pairs: one thread each, so the two servers do not fight over a 2-core machine
CANDIDATES = {
    "draft": ("draft-model speculation (Q2_K draft, up to 8 drafts a step)",
              ["--spec-type", "draft-simple", "--spec-draft-n-max", "8"]),
    "ngram": ("n-gram speculation (ngram-simple 3/8)",
              ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", "8"]),
    "kvq4": ("q4_0 KV cache (lossy: expect a difference)", ["-ctk", "q4_0", "-ctv", "q4_0", "-fa", "on"]),
}
DEMO_PROMPT = "Write a Python function fizzbuzz(n) that returns a list of strings for 1..n. Keep it short."


def demo_servers(kind: str, found: assets.Assets) -> tuple[ServerProcess, ServerProcess]:
    _, extra = CANDIDATES[kind]
    if kind == "draft":
        extra = ["-md", str(found.draft_model), *extra]
    base = ServerProcess("baseline", llama_server_argv(found.llama_server, found.model, 0))
    cand = ServerProcess("candidate", llama_server_argv(found.llama_server, found.model, 0, extra=extra))
    return base, cand


def _set_port(s: ServerProcess) -> None:
    s.argv[s.argv.index("--port") + 1] = str(s.port)


def run_demo(args) -> int:
    found = assets.ensure_all(progress=lambda m: print(f"spectui demo: {m}", file=sys.stderr))
    desc, _ = CANDIDATES[args.candidate]
    launcher = Launcher()
    base, cand = demo_servers(args.candidate, found)
    for s in (base, cand):
        launcher.add(s)
        _set_port(s)

    def on_term(signum, frame):  # a `kill` of spectui still stops the servers it started
        raise SystemExit(128 + signum)

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        print(f"spectui demo: starting baseline and candidate [{desc}] on 127.0.0.1 ports "
              f"{base.port} and {cand.port}", file=sys.stderr)
        launcher.start_all(timeout=120)
        if args.headless:
            from spectui.cli import main as cli_main

            return cli_main(["compare", "--baseline", base.url, "--candidate", cand.url, "--prompt", DEMO_PROMPT,
                             "--max-tokens", "96"])
        from spectui.engine.llamacpp import GenerationParams
        from spectui.tui.app import AppConfig, make_app

        config = AppConfig(base.url, cand.url, params=GenerationParams(max_tokens=96, cache_prompt=False),
                           pids={"baseline": base.pid, "candidate": cand.pid}, initial_prompt=DEMO_PROMPT,
                           autorun=True)
        make_app(config).run()
        return 0
    finally:
        launcher.stop_all()
        signal.signal(signal.SIGTERM, old)
