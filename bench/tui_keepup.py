"""Keep-up: the highest per-pane rate at which the TUI shows every token of both panes with an end lag
under 100 ms and at least 20 redraws a second, as a fraction of spectui's own headless parse-and-label
rate measured in the same run (bench/parse_throughput.py's figure). Goal: at least 1/4 a pane.

A recorded llama-server stream (draft-simple, with its counters) is repeated and replayed into both panes
at once (order: concurrent) through App.run_test(), on a schedule: token k of a side is due at
start + k / rate. The lag is measured against that schedule (the moment the last token was due), not
against when the app's loop got round to reading it, so an app too busy to read its streams in time
shows as lag, as it would behind a real socket. Redraws are the screen updates Textual made (its
compositor's, counted at App._display) while the streams ran.
    python bench/tui_keepup.py [--fractions 1/16,1/8,1/4,3/8,1/2] [--seconds 1.5]
    python bench/tui_keepup.py --rate 2000 --tokens 4000      # one trial at a fixed rate
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spectui.backends.labeller import LlamaCppLabeller  # noqa: E402
from spectui.backends.recorded import ReplayBackend, load_payloads, repeat_stream  # noqa: E402
from spectui.core.events import StreamStarted  # noqa: E402
from spectui.core.types import GenerationParams  # noqa: E402
from spectui.machine.probes import GPUProbe, HostSample  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "llamacpp-b11434-draft-simple-fizzbuzz.sse"
MAX_LAG_MS = 100.0
MIN_REDRAWS = 20.0
GOAL = Fraction(1, 4)


class PacedReplay(ReplayBackend):
    """The recorded payloads on a fixed schedule. While on time it sleeps until each token is due; when
    behind it reads on, yielding to the loop every 64 tokens as a socket read of a full buffer would."""

    first_due_ns: int = 0
    last_due_ns: int = 0
    last_event_ns: int = 0

    async def stream(self, prompt, params):
        lab = LlamaCppLabeller()
        start = time.perf_counter_ns()
        yield StreamStarted(start, prompt)
        interval = 1e9 / self.tokens_per_s
        sent = since_yield = 0
        for obj in self.payloads:
            due = start + int(sent * interval)
            now = time.perf_counter_ns()
            if due > now:
                await asyncio.sleep((due - now) / 1e9)
                since_yield = 0
            elif since_yield >= 64:
                await asyncio.sleep(0)
                since_yield = 0
            n = len(obj.get("tokens") or [])
            for ev in lab.feed(obj, time.perf_counter_ns()):
                yield ev
            if n:
                self.last_due_ns = due
            sent += n
            since_yield += n
        self.last_event_ns = time.perf_counter_ns()


def _no_nvml() -> GPUProbe:
    class NoNVML:
        def nvmlInit(self):
            raise RuntimeError("no NVML in the benchmark")

    return GPUProbe(NoNVML())


async def trial(rate: float, tokens: int, quiet: bool = False) -> dict:
    """Both panes fed `tokens` tokens at `rate` tokens/s each; the figures of that one run."""
    from spectui.tui.app import AppConfig, make_app

    payloads = repeat_stream(load_payloads(DATA), tokens)
    total = sum(len(p.get("tokens") or []) for p in payloads)
    backends: dict[str, PacedReplay] = {}

    def factory(url, client):
        backends[url] = PacedReplay(url, payloads, tokens_per_s=rate)
        return backends[url]

    config = AppConfig(
        "replay://baseline",
        "replay://candidate",
        order="concurrent",
        params=GenerationParams(max_tokens=total),
        backend_factory=factory,
        gpu_probe=_no_nvml(),
        host_probe=lambda: HostSample(2, 0.0, 1, 2),
        autosave=False,
        initial_prompt="keep up",
    )
    app = make_app(config)
    redraws = [0]
    display = app._display

    def counted(screen, renderable) -> None:
        if renderable is not None:
            redraws[0] += 1
        display(screen, renderable)

    app._display = counted  # type: ignore[method-assign]
    # the trial's CPU time and the screen's layouts: what the panes cost, less swayed by a loaded machine than
    # the lag and the redraws (a figure drawn each frame must not lay the screen out each frame)
    from textual.screen import Screen

    layouts = [0]
    relayout = Screen._refresh_layout

    def counted_layout(screen, *a, **kw):
        layouts[0] += 1
        return relayout(screen, *a, **kw)

    Screen._refresh_layout = counted_layout  # type: ignore[method-assign]
    cpu0 = time.process_time()
    async with app.run_test(size=(160, 50)) as pilot:
        while any(app.pane(s).state != "ready" for s in ("baseline", "candidate")):
            await pilot.pause(0.01)
        t0 = time.perf_counter_ns()
        app.action_run()
        shown_at: dict[str, int] = {}
        redraws_at_end = None
        while len(shown_at) < 2:
            await asyncio.sleep(0.002)
            for side in ("baseline", "candidate"):
                if side not in shown_at and len(app.pane(side).view.tokens) >= total:
                    shown_at[side] = time.perf_counter_ns()
            if redraws_at_end is None and backends and all(b.last_event_ns for b in backends.values()):
                redraws_at_end = redraws[0]
            if time.perf_counter_ns() - t0 > 120e9:
                raise SystemExit("gave up after 120 s")
        await app.run_done.wait()
        if redraws_at_end is None:
            redraws_at_end = redraws[0]
        t_end = max(b.last_event_ns for b in backends.values())
        streaming_s = (t_end - t0) / 1e9
        out = {"rate": rate, "tokens": total, "stream_s": streaming_s, "ideal_s": total / rate}
        out["redraws_per_s"] = redraws_at_end / streaming_s
        out["lag_ms"] = {}
        out["shown"] = {}
        for side, url in (("baseline", config.baseline_url), ("candidate", config.candidate_url)):
            out["lag_ms"][side] = max(0.0, (shown_at[side] - backends[url].last_due_ns) / 1e6)
            out["shown"][side] = len(app.pane(side).view.tokens)
        out["identical"] = app.runs.comparer.identical
        out["cpu_s"], out["layouts"] = time.process_time() - cpu0, layouts[0]
        Screen._refresh_layout = relayout  # type: ignore[method-assign]
        out["ok"] = (
            all(v == total for v in out["shown"].values())
            and all(v < MAX_LAG_MS for v in out["lag_ms"].values())
            and out["redraws_per_s"] >= MIN_REDRAWS
        )
    if not quiet:
        lag = out["lag_ms"]
        print(
            f"  {rate:>9,.0f} tokens/s a pane, {total} tokens each: shown {out['shown']['baseline']}+"
            f"{out['shown']['candidate']}, lag at end {lag['baseline']:.0f} / {lag['candidate']:.0f} ms, "
            f"{out['redraws_per_s']:.0f} redraws/s, stream {streaming_s:.2f} s (schedule {total / rate:.2f} s)"
            f" → {'keeps up' if out['ok'] else 'falls behind'} · CPU {out['cpu_s']:.2f} s, {out['layouts']} screen layouts",
            flush=True,
        )
    return out


def engine_rate(tokens: int, repeats: int) -> float:
    """spectui's headless parse-and-label rate, measured now (bench/parse_throughput.py's engine figure)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import parse_throughput

    return asyncio.run(parse_throughput.engine_rate(tokens, repeats))


def main(fractions: list[Fraction], seconds: float, engine_tokens: int) -> int:
    engine = engine_rate(engine_tokens, 3)
    print(f"spectui headless parse + label: {engine:,.0f} tokens/s (best of 3, {engine_tokens} tokens, this run)")
    print(
        f"keep-up: both panes at once; each must show every token, lag < {MAX_LAG_MS:.0f} ms at the end, "
        f"≥ {MIN_REDRAWS:.0f} redraws/s"
    )
    best = Fraction(0)
    for frac in sorted(fractions):
        rate = float(engine * frac)
        r = asyncio.run(trial(rate, max(2000, int(rate * seconds))))
        if r["ok"]:
            best = max(best, frac)
    met = best >= GOAL
    print(
        f"goal 1 keep-up: highest per-pane rate that keeps up = {best} of the engine's rate "
        f"({float(best * Fraction(engine)):,.0f} of {engine:,.0f} tokens/s); goal ≥ {GOAL} → "
        f"{'met' if met else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--fractions", default="1/16,1/8,1/4,3/8,1/2", help="per-pane rates to try, of the engine's")
    ap.add_argument("--seconds", type=float, default=1.5, help="length of each trial's stream at its rate")
    ap.add_argument("--engine-tokens", type=int, default=50_000)
    ap.add_argument("--rate", type=float, help="one trial at this per-pane rate (tokens/s) instead of the search")
    ap.add_argument("--tokens", type=int, default=4000, help="tokens per pane for --rate")
    a = ap.parse_args()
    if a.rate:
        asyncio.run(trial(a.rate, a.tokens))
        raise SystemExit(0)
    raise SystemExit(main([Fraction(f) for f in a.fractions.split(",")], a.seconds, a.engine_tokens))
