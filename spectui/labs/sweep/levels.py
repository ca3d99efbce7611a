"""The concurrency sweep: where speculation's payoff collapses as requests share the server.

At each concurrency level L, L requests (the prompt set, cycled) go to the baseline at once, then the
same L to the candidate. Per side: aggregate tokens/s (all tokens / wall time from the first request
sent to the last token), mean per-request tokens/s and TTFT, and the candidate's acceptance rate. Every
candidate output is compared byte for byte with the baseline's for the same request at the same level.
The formula's assumption — verifying γ+1 tokens costs one target step — fails as the batch fills, so
the speed-up falls with L; the sweep measures where.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from spectui.backends.base import Backend
from spectui.backends.sse import READ_LAG
from spectui.core.compare import Divergence
from spectui.core.errors import InputError, describe
from spectui.core.events import StreamFailed
from spectui.core.figures import SideRecorder
from spectui.core.report import fmt
from spectui.core.runner import bounded, counters_or_none, render_prompt, same_tokenizer
from spectui.core.stats import quantile, ratio_interval
from spectui.core.types import SIDES, GenerationParams, Prompt
from spectui.core.verdict import Verdict, judge
from spectui.labs.sweep import predict as sweep_predict

if TYPE_CHECKING:
    from spectui.labs.theory.curve import CostCurve


@dataclass
class SideLevel:
    recorders: list[SideRecorder]
    wall_s: float
    metrics_drafted: float | None = None
    metrics_accepted: float | None = None
    read_lag_ns: list[int] = field(default_factory=list)  # per kernel-stamped chunk: arrival to read

    @cached_property
    def read_lag_ms(self) -> tuple[float, float] | None:
        """(p50, p99) of how long events waited between arriving and spectui reading them."""
        if not self.read_lag_ns:
            return None
        v = sorted(float(x) for x in self.read_lag_ns)
        return quantile(v, 0.5) / 1e6, quantile(v, 0.99) / 1e6

    @property
    def client_behind(self) -> bool | None:
        """The client read events later than half the gap between a stream's tokens (p99): then a read
        can hold two tokens of one stream, whose gaps merge, and the client may be the limit. None where
        unmeasured (no kernel stamps, or no stream decoded)."""
        lag, tps = self.read_lag_ms, self.per_request_tps
        return lag[1] > 0.5 * 1000 / tps if lag and tps else None

    @property
    def tokens(self) -> int:
        return sum(r.figures.tokens for r in self.recorders)

    @property
    def aggregate_tps(self) -> float | None:
        return self.tokens / self.wall_s if self.wall_s > 0 else None

    @property
    def per_request_tps(self) -> float | None:
        v = [r.figures.decode_tps for r in self.recorders if r.figures.decode_tps]
        return sum(v) / len(v) if v else None

    @property
    def ttft_ms(self) -> float | None:
        v = [r.figures.ttft_ms for r in self.recorders if r.figures.ttft_ms is not None]
        return sum(v) / len(v) if v else None

    @property
    def counts_from_server(self) -> bool:
        """The streams gave no per-request counts (labels inferred from chunking): use the server's counters."""
        return any(r.counts_from_metrics for r in self.recorders) and self.metrics_drafted is not None

    @property
    def drafted(self) -> int:
        if self.counts_from_server:
            return int(self.metrics_drafted or 0)
        return sum(r.figures.drafted for r in self.recorders)

    @property
    def accepted(self) -> int:
        if self.counts_from_server:
            return int(self.metrics_accepted or 0)
        return sum(r.figures.accepted for r in self.recorders)

    @property
    def metrics_check(self) -> str:
        """As compare does: the level's drafted/accepted against the server's counter deltas."""
        if self.metrics_drafted is None or self.metrics_accepted is None:
            return "unavailable: no speculation counters"
        if self.counts_from_server:
            return "ok (counts from the server's counters; labels inferred from chunking)"
        own = (sum(r.figures.drafted for r in self.recorders), sum(r.figures.accepted for r in self.recorders))
        server = (int(self.metrics_drafted), int(self.metrics_accepted))
        return (
            "ok" if own == server else f"mismatch: drafted/accepted {own[0]}/{own[1]} vs server {server[0]}/{server[1]}"
        )

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None

    @property
    def failed(self) -> list[str]:
        return [r.failed.message for r in self.recorders if r.failed is not None]

    def to_json(self) -> dict:
        measured = not self.failed  # a side in which a request failed measured no rate and no acceptance
        return {
            "aggregate_tps": self.aggregate_tps if measured else None,
            "per_request_tps": self.per_request_tps if measured else None,
            "ttft_ms": self.ttft_ms,
            "tokens": self.tokens,
            "wall_s": self.wall_s,
            "drafted": self.drafted if measured else None,
            "accepted": self.accepted if measured else None,
            "acceptance_rate": self.acceptance_rate if measured else None,
            "metrics_drafted": self.metrics_drafted,
            "metrics_accepted": self.metrics_accepted,
            "metrics_check": self.metrics_check,
            "failed": self.failed,
            "client_read_lag_ms": (
                {"p50": self.read_lag_ms[0], "p99": self.read_lag_ms[1], "reads": len(self.read_lag_ns)}
                if self.read_lag_ms
                else None
            ),
            "client_behind": self.client_behind,
        }


@dataclass
class Level:
    concurrency: int
    baseline: SideLevel
    candidate: SideLevel
    # THE verdict (core.verdict.judge) of every pair of outputs, failed pairs included, in request order
    verdicts: list[Verdict] = field(default_factory=list)
    # with --repeat: each run's (baseline, candidate) aggregate tokens/s (None for a side in which a
    # request failed: it measured no rate); for each verdict, the run and request it came
    # from; the runs in which a side failed
    runs: list[tuple[float | None, float | None]] = field(default_factory=list)
    divergence_at: list[tuple[int, int]] = field(default_factory=list)
    failed_runs: list[int] = field(default_factory=list)
    # the speed-up predicted from the batch times measured after the sweep (labs.sweep.predict.predict_levels),
    # or None with the reason; the first level also holds the measurement
    predicted: float | None = None
    predicted_note: str | None = None
    cost_terms: CostCurve | None = None

    @property
    def ratios(self) -> list[float]:
        return [c / b for b, c in self.runs if b and c]

    @cached_property
    def spread(self):
        """The speed-up as the geometric mean of the runs' paired ratios, with its 95 % t-interval on their
        logs (core.stats: coverage holds from 2 runs; computed once: the level is complete when anything reads it)."""
        return ratio_interval(self.ratios) if len(self.ratios) > 1 else None

    @property
    def decode_ratio(self) -> float | None:
        """The candidate's mean per-request decode rate over the baseline's (server-timed, first run):
        the decode-only speed-up the predicted one models, without each request's prefill."""
        b, c = self.baseline.per_request_tps, self.candidate.per_request_tps
        return c / b if b and c and not (self.baseline.failed or self.candidate.failed) else None

    def throughput(self, side: str) -> float | None:
        """A side's aggregate tokens/s: the median over the runs where the level was repeated; None where
        a request of that side failed in every run."""
        k = 0 if side == "baseline" else 1
        vals = [v for r in self.runs if (v := r[k])]
        if not vals:
            return None
        return statistics.median(vals) if len(vals) > 1 else vals[0]

    @property
    def speedup(self) -> float | None:
        """None where no run of the level finished on both sides: a failed side measured nothing."""
        if len(self.ratios) > 1:
            return self.spread.median if self.spread is not None else None  # the geometric mean (core.stats)
        return self.ratios[0] if self.ratios else None

    @property
    def divergences(self) -> list[Divergence | None]:
        """Each compared pair's divergence (None: identical), from its verdict."""
        return [v.divergence for v in self.verdicts if v.identical is not None]

    @property
    def compared(self) -> int:
        return sum(1 for v in self.verdicts if v.identical is not None)

    @property
    def differing(self) -> int:
        return sum(1 for v in self.verdicts if v.status == "differs")

    @property
    def not_compared(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.identical is None]

    @property
    def identical(self) -> bool | None:
        """False where any pair differs; None where none differs but a pair failed; else True."""
        if self.differing:
            return False
        if self.not_compared or self.failed_runs:
            return None
        return True

    def outputs_text(self) -> str:
        """`4/4 identical`, `1/4 DIFFER (same text, different token ids from token 3)`, `… 2 failed: …`."""
        if self.differing:
            first = next(v for v in self.verdicts if v.status == "differs")
            text = f"{self.differing}/{self.compared} DIFFER ({first.reason})"
        elif self.compared:
            text = f"{self.compared}/{self.compared} identical"
        else:
            text = "not compared"
        if self.not_compared:
            text += f"; {len(self.not_compared)} not compared: {self.not_compared[0].reason}"
        return text

    def to_json(self) -> dict:
        spread = self.spread
        return {
            "concurrency": self.concurrency,
            "baseline": self.baseline.to_json(),
            "candidate": self.candidate.to_json(),
            "speedup": self.speedup,
            "speedup_low": spread.low if spread else None,
            "speedup_high": spread.high if spread else None,
            "runs": max(1, len(self.runs)),
            "per_run_tps": [list(r) for r in self.runs] if len(self.runs) > 1 else None,
            "divergent_runs": sorted(
                {run for (run, _), v in zip(self.divergence_at, self.verdicts) if v.status == "differs"}
            )
            or None,
            "failed_runs": self.failed_runs or None,
            "acceptance_rate": self.candidate.acceptance_rate if not self.candidate.failed else None,
            "identical": self.identical,
            "outputs_compared": self.compared,
            "outputs": self.outputs_text(),
            "verdicts": [v.to_json() for v in self.verdicts],
            "differing_requests": [
                req for (_, req), v in zip(self.divergence_at, self.verdicts) if v.status == "differs"
            ],
            "first_divergences": [v.divergence.to_json() if v.divergence else None for v in self.verdicts],
            "predicted_speedup": self.predicted,
            "decode_ratio": self.decode_ratio,
            "predicted_note": self.predicted_note,
            "cost_terms": self.cost_terms.to_json() if self.cost_terms is not None else None,
        }


async def _run_side(backend: Backend, texts: list[str], params: GenerationParams, name: str) -> SideLevel:
    before = await counters_or_none(backend)
    recs = [SideRecorder(f"{name}#{i}") for i in range(len(texts))]

    async def one(i: int) -> None:
        async for ev in bounded(backend.stream(texts[i], params), params):  # max_tokens + a margin at most
            recs[i].feed(ev)

    # everything alive before the level moves out of the collector's way: a full collection over the
    # earlier levels' recorders stalled every stream for milliseconds at a time (bench/loadgen.py)
    gc.collect()
    gc.freeze()
    lags: list[int] = []
    token = READ_LAG.set(lags)  # the streams' tasks inherit it
    try:
        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(len(texts))))
        wall = time.perf_counter() - t0
    finally:
        READ_LAG.reset(token)
        gc.unfreeze()
    after = await counters_or_none(backend)
    lvl = SideLevel(recs, wall, read_lag_ns=lags)
    if before is not None and after is not None:
        d = after.minus(before)
        lvl.metrics_drafted, lvl.metrics_accepted = d.drafted, d.accepted
    return lvl


async def sweep(
    baseline: Backend,
    candidate: Backend,
    prompts: list[Prompt],
    levels: list[int],
    params: GenerationParams,
    on_level=None,
    repeat: int = 1,
    predict: bool = True,
) -> list[Level]:
    """Each level `repeat` times, interleaved (baseline first, then candidate first, …) so that drift on
    a shared machine falls on both sides alike; every run's outputs are compared, not only the first.
    With `predict`, after the last level the batch times each level needs are measured (labs.theory.costs) and
    every level gets the speed-up they predict beside the measured one."""
    out = []
    rendered: dict[str, dict[str, str]] = {"baseline": {}, "candidate": {}}
    for side, b in (("baseline", baseline), ("candidate", candidate)):
        for p in prompts:
            rendered[side][p.id] = await render_prompt(b, p)
    for n in levels:
        chosen = [prompts[i % len(prompts)] for i in range(n)]
        level = None
        for k in range(1, repeat + 1):
            texts_b = [rendered["baseline"][p.id] for p in chosen]
            texts_c = [rendered["candidate"][p.id] for p in chosen]
            if k % 2:
                base = await _run_side(baseline, texts_b, params, "baseline")
                cand = await _run_side(candidate, texts_c, params, "candidate")
            else:
                cand = await _run_side(candidate, texts_c, params, "candidate")
                base = await _run_side(baseline, texts_b, params, "baseline")
            level = _add_run(level, n, k, base, cand, same_tokenizer(baseline.info, candidate.info))
        assert level is not None  # repeat >= 1: the first run made it
        out.append(level)
        if on_level:
            on_level(level)
    if predict and out:
        await sweep_predict.predict_levels(out, baseline, candidate, rendered["baseline"][prompts[0].id])
    return out


def _add_run(level: Level | None, n: int, k: int, base: SideLevel, cand: SideLevel, ids: bool) -> Level:
    """Run k of level n, paired: every output judged, the run's aggregate rates (None for a side in
    which a request failed: no rate, so no speed-up from that run)."""
    if level is None:  # the first run's recorders stand for the level; every run is compared
        level = Level(n, base, cand, [])
    for j, (rb, rc) in enumerate(zip(base.recorders, cand.recorders)):
        level.verdicts.append(judge(rb, rc, ids))  # the one verdict, as compare makes it
        level.divergence_at.append((k, j))
    if base.failed or cand.failed:
        level.failed_runs.append(k)
    level.runs.append((None if base.failed else base.aggregate_tps, None if cand.failed else cand.aggregate_tps))
    return level


def alone_schedule(repeat: int) -> list[tuple[str, list[int]]]:
    """Whole phases B C | C B | …, adjacent phases of one side merged into one launch: run.phased's
    schedule (labs sits below run, so it is spelled here; a unit test holds the two equal)."""
    out: list[tuple[str, list[int]]] = []
    for k in range(1, repeat + 1):
        for side in SIDES if k % 2 else SIDES[::-1]:
            if out and out[-1][0] == side:
                out[-1][1].append(k)
            else:
                out.append((side, [k]))
    return out


async def sweep_alone(
    open_side, prompts: list[Prompt], levels: list[int], params: GenerationParams, repeat: int = 1, say=None
) -> tuple[list[Level], dict]:
    """One server at a time (a GPU that cannot hold both): each side, started alone by `open_side(side)`
    (an async context that stops it after), runs every level of its runs; the phases alternate B C | C B.
    Each level's speed-up is still paired run by run and every output judged against the other side's of
    the same run and request. The batch-time prediction needs both servers up: not made. Returns the
    levels and each side's ServerInfo."""
    say = say or (lambda line: None)
    done: dict[tuple[str, int, int], SideLevel] = {}
    infos: dict = {}
    for side, runs in alone_schedule(repeat):
        say(f"{side}: starting it alone (run{'s' if len(runs) > 1 else ''} {', '.join(map(str, runs))})")
        try:
            async with open_side(side) as backend:
                infos[side] = backend.info
                texts = {p.id: await render_prompt(backend, p) for p in prompts}
                for k in runs:
                    for n in levels:
                        say(f"{side} alone: concurrency {n} (run {k})")
                        chosen = [texts[prompts[i % len(prompts)].id] for i in range(n)]
                        done[(side, k, n)] = await _run_side(backend, chosen, params, side)
        except Exception as exc:  # a side that would not start (or went away) fails the levels it had left
            why = f"{side} server: {describe(exc)}"
            for k in runs:
                for n in levels:
                    if (side, k, n) not in done:
                        recs = [SideRecorder(f"{side}#{i}") for i in range(n)]
                        for r in recs:
                            r.feed(StreamFailed(0, why))
                        done[(side, k, n)] = SideLevel(recs, 0.0)
        say(f"{side}: stopped")
    ids = same_tokenizer(infos.get("baseline"), infos.get("candidate"))
    out = []
    for n in levels:
        level = None
        for k in range(1, repeat + 1):
            level = _add_run(level, n, k, done[("baseline", k, n)], done[("candidate", k, n)], ids)
        assert level is not None
        level.predicted_note = "not predicted: the batch times are measured with both servers up"
        out.append(level)
    return out, infos


def parse_levels(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--concurrency must be a list of integers like 1,2,4,8, not {text!r}") from None
    if not levels or any(n < 1 for n in levels):
        raise InputError("--concurrency levels must be integers >= 1")
    return levels


def text_table(levels: list[Level]) -> str:
    """The sweep as a table, a level a row; the prediction beside the measured where made, the levels where
    the client fell behind, and which figures are medians over repeated runs."""
    head = (
        f"{'conc':>4} {'base agg tok/s':>14} {'cand agg tok/s':>14} {'base req tok/s':>14} {'cand req tok/s':>14} "
        f"{'TTFT ms b/c':>13}  {'speed-up (acceptance)':<28} outputs"
    )
    lines = [head, "-" * len(head), *(_level_row(lv) for lv in levels)]
    if any(lv.predicted is not None or lv.predicted_note for lv in levels):
        lines += _predicted_lines(levels)
    lines += _client_behind_lines(levels)
    repeated = max((len(lv.runs) for lv in levels), default=1)
    if repeated > 1:
        lines.append(f"aggregate tok/s: the median of {repeated} runs; per-request tok/s and TTFT: the first run's")
    return "\n".join(lines)


def _level_row(lv: Level) -> str:
    acc = lv.candidate.acceptance_rate
    spread = lv.spread
    if spread:
        value = f"{spread.median:.2f}× [{spread.low:.2f}–{spread.high:.2f}] ({spread.n} runs)"
    else:
        value = f"{lv.speedup:.2f}×" if lv.speedup else ""
    sp = (
        f"{value} at {acc:.0%} accepted"
        if lv.speedup and acc is not None
        else (f"{value} (no drafts)" if lv.speedup else "—")
    )
    return (
        f"{lv.concurrency:>4} {fmt(lv.throughput('baseline')):>14} {fmt(lv.throughput('candidate')):>14} "
        f"{fmt(lv.baseline.per_request_tps):>14} {fmt(lv.candidate.per_request_tps):>14} "
        f"{fmt(lv.baseline.ttft_ms, '.0f') + '/' + fmt(lv.candidate.ttft_ms, '.0f'):>13}  {sp:<28} {lv.outputs_text()}"
    )


def _predicted_lines(levels: list[Level]) -> list[str]:
    lines = [
        "predicted from the batch times measured after the sweep (labs.theory.costs; decode rounds only, while the "
        "measured aggregate also holds each request's prefill), beside the measured:"
    ]
    for lv in levels:
        pred = f"{lv.predicted:.2f}×" if lv.predicted is not None else "—"
        meas = f"{lv.speedup:.2f}×" if lv.speedup else "—"
        dec = f"{lv.decode_ratio:.2f}×" if lv.decode_ratio else "—"
        lines.append(
            f"{lv.concurrency:>4} predicted {pred:>7}  measured {meas:>7}  decode only {dec:>7}  "
            f"({lv.predicted_note or ''})"
        )
    return lines


def _client_behind_lines(levels: list[Level]) -> list[str]:
    """The levels where spectui read the packets late: the aggregate may be the client's limit."""
    lines = []
    for lv in levels:
        for name, side in (("baseline", lv.baseline), ("candidate", lv.candidate)):
            lags, tps = side.read_lag_ms, side.per_request_tps
            if side.client_behind and lags is not None and tps:
                lag = lags[1]
                lines.append(
                    f"client behind at {lv.concurrency} ({name}): reads lagged their packets by {lag:.0f} ms (p99), "
                    f"over half the {1000 / tps:.0f} ms between a stream's tokens: some inter-token "
                    "gaps merged, and the aggregate tok/s may be spectui's limit rather than the server's"
                )
    return lines


W, H, L, R, T, B = 640, 360, 60, 60, 40, 50  # the sweep chart: width, height, left, right, top, bottom margins


@dataclass(frozen=True)
class _Chart:
    """The sweep chart's coordinates: level i across, a value against its axis' top (vmax) up."""

    n: int  # the last level's index (at least 1)

    def px(self, i: int) -> float:
        return L + (W - L - R) * (i / self.n)

    def py(self, v: float, vmax: float) -> float:
        return H - B - (H - T - B) * (v / vmax)

    def path(self, vals: list, vmax: float) -> str:
        """A line through the values; a missing value (a side failed at that level) is a gap, never a 0."""
        out, pen_down = [], False
        for i, v in enumerate(vals):
            if v is None:
                pen_down = False
                continue
            out.append(f"{'L' if pen_down else 'M'}{self.px(i):.1f},{self.py(v, vmax):.1f}")
            pen_down = True
        return " ".join(out) or "M0,0"


def svg_chart(levels: list[Level], title: str = "spectui sweep") -> str:
    """An SVG line chart (aggregate tokens/s of both sides and the speed-up against concurrency)."""
    xs = [lv.concurrency for lv in levels]
    ys_b = [lv.throughput("baseline") for lv in levels]
    ys_c = [lv.throughput("candidate") for lv in levels]
    sp = [lv.speedup for lv in levels]
    ymax = max([v for v in ys_b + ys_c if v] + [1]) * 1.1
    smax = max([v for v in sp if v] + [lv.spread.high for lv in levels if lv.spread] + [1.2]) * 1.1
    c = _Chart(max(len(xs) - 1, 1))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
        f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
        f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>',
        f'<line x1="{W - R}" y1="{T}" x2="{W - R}" y2="{H - B}" stroke="#999"/>',
        f'<line x1="{L}" y1="{c.py(1, smax):.1f}" x2="{W - R}" y2="{c.py(1, smax):.1f}" stroke="#999" stroke-dasharray="4"/>',
        f'<text x="{W - R + 4}" y="{c.py(1, smax) + 4:.1f}" fill="#666">1×</text>',
        f'<path d="{c.path(ys_b, ymax)}" fill="none" stroke="#1f77b4" stroke-width="2"/>',
        f'<path d="{c.path(ys_c, ymax)}" fill="none" stroke="#2ca02c" stroke-width="2"/>',
        f'<path d="{c.path(sp, smax)}" fill="none" stroke="#d62728" stroke-width="2" stroke-dasharray="6 3"/>',
    ]
    parts += _spread_bars(levels, c, smax) + _axis_labels(xs, c, ymax, smax)
    parts += [
        f'<text x="{L + 8}" y="{T + 12}" fill="#1f77b4">baseline tok/s (aggregate)</text>',
        f'<text x="{L + 8}" y="{T + 28}" fill="#2ca02c">candidate tok/s (aggregate)</text>',
        f'<text x="{L + 8}" y="{T + 44}" fill="#d62728">speed-up (right axis)</text>',
        "</svg>",
    ]
    return "\n".join(parts)


def _spread_bars(levels: list[Level], c: _Chart, smax: float) -> list[str]:
    """The speed-up's 95 % interval over repeated runs, where measured, as an error bar at its level."""
    parts = []
    for i, lv in enumerate(levels):
        spread = lv.spread
        if spread:
            x, lo, hi = c.px(i), c.py(spread.low, smax), c.py(spread.high, smax)
            parts.append(
                f'<line x1="{x:.1f}" y1="{lo:.1f}" x2="{x:.1f}" y2="{hi:.1f}" stroke="#d62728" stroke-width="1.5"/>'
            )
            for y in (lo, hi):
                parts.append(f'<line x1="{x - 4:.1f}" y1="{y:.1f}" x2="{x + 4:.1f}" y2="{y:.1f}" stroke="#d62728"/>')
    return parts


def _axis_labels(xs: list[int], c: _Chart, ymax: float, smax: float) -> list[str]:
    """The levels along the bottom, tokens/s on the left axis, the speed-up on the right."""
    parts = [f'<text x="{c.px(i):.1f}" y="{H - B + 16}" text-anchor="middle">{x}</text>' for i, x in enumerate(xs)]
    parts.append(f'<text x="{W / 2}" y="{H - 12}" text-anchor="middle">concurrent requests</text>')
    for k in range(5):
        v = ymax * k / 4
        parts.append(f'<text x="{L - 6}" y="{c.py(v, ymax) + 4:.1f}" text-anchor="end">{v:.0f}</text>')
        s = smax * k / 4
        parts.append(
            f'<text x="{W - R + 24}" y="{c.py(s, smax) + 4:.1f}" text-anchor="start" fill="#d62728">{s:.2f}</text>'
        )
    return parts
