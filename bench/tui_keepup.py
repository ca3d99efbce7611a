"""Does the two-pane TUI keep up? Both panes fed 2,000 tokens/s each for 4,000 tokens, headless.

A recorded llama-server stream (draft-simple, with its counters) is repeated to N tokens and replayed
at the chosen rate into both panes at once (order: concurrent) through App.run_test(). Prints, per
side, the lag between the stream's last event and the pane showing every token, the tokens shown,
and the frames (batched redraws) per second while streaming.
    python bench/tui_keepup.py [--rate 2000] [--tokens 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spectui.backends.recorded import ReplayBackend, load_payloads, repeat_stream  # noqa: E402
from spectui.core.types import GenerationParams  # noqa: E402
from spectui.machine.probes import GPUProbe, HostSample  # noqa: E402
from spectui.tui.app import AppConfig, make_app  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "llamacpp-b11434-draft-simple-fizzbuzz.sse"


class TimedReplay(ReplayBackend):
    last_event_ns: int = 0

    async def stream(self, prompt, params):
        async for ev in super().stream(prompt, params):
            yield ev
            self.last_event_ns = time.perf_counter_ns()


async def main(rate: float, tokens: int) -> int:
    payloads = repeat_stream(load_payloads(DATA), tokens)
    backends = {}

    def factory(url, client):
        backends[url] = TimedReplay(url, payloads, tokens_per_s=rate)
        return backends[url]

    class NoNVML:
        def nvmlInit(self):
            raise RuntimeError("no NVML in the benchmark")

    config = AppConfig(
        "replay://baseline",
        "replay://candidate",
        order="concurrent",
        params=GenerationParams(max_tokens=tokens),
        backend_factory=factory,
        gpu_probe=GPUProbe(NoNVML()),
        host_probe=lambda: HostSample(2, 0.0, 1, 2),
        autosave=False,
        initial_prompt="keep up",
    )
    app = make_app(config)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        t0 = time.perf_counter_ns()
        app.action_run()
        shown_at = {}
        while len(shown_at) < 2:
            await asyncio.sleep(0.002)
            for side in ("baseline", "candidate"):
                if side not in shown_at and len(app.pane(side).view.tokens) >= tokens:
                    shown_at[side] = time.perf_counter_ns()
            if time.perf_counter_ns() - t0 > 120e9:
                print("gave up after 120 s")
                return 1
        await app.run_done.wait()
        t_end = max(b.last_event_ns for b in backends.values())
        streaming_s = (t_end - t0) / 1e9
        print(f"{tokens} tokens per pane at {rate:.0f} tokens/s each, both panes at once")
        for side, url in (("baseline", config.baseline_url), ("candidate", config.candidate_url)):
            lag_ms = (shown_at[side] - backends[url].last_event_ns) / 1e6
            print(
                f"  {side:<9}: tokens shown {len(app.pane(side).view.tokens)}/{tokens}, "
                f"display lag at stream end {max(lag_ms, 0):.1f} ms"
            )
        print(
            f"  stream time {streaming_s:.2f} s (ideal {tokens / rate:.2f} s), "
            f"frames {app.frames} → {app.frames / streaming_s:.0f} redraws/s across both panes"
        )
        print(f"  comparison: {'identical' if app.comparer.identical else app.comparer.divergence}")
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--tokens", type=int, default=4000)
    a = ap.parse_args()
    raise SystemExit(asyncio.run(main(a.rate, a.tokens)))
