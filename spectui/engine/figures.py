"""Per-request figures, accumulated from a side's events (live or replayed)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from spectui.engine.events import StepEvent, StreamEvent, StreamFailed, StreamFinished, StreamStarted, TokenEvent


@dataclass
class SideFigures:
    tokens: int = 0
    ttft_ms: float | None = None
    decode_tps: float | None = None  # measured by spectui: (tokens − 1) / (last − first arrival)
    server_decode_tps: float | None = None  # the server's own timings.predicted_per_second
    server_prompt_ms: float | None = None
    prompt_tokens: int | None = None  # processed (not reused)
    prompt_cached: int | None = None  # reused from the prompt cache
    drafted: int = 0
    accepted: int = 0
    steps: int = 0
    stop_type: str | None = None
    label_counts: dict[str, int] = field(default_factory=dict)
    accepted_per_position: list[float] | None = None  # from /metrics, where the server gives it
    metrics_drafted: float | None = None
    metrics_accepted: float | None = None
    metrics_steps: float | None = None
    metrics_check: str | None = None  # "ok", "mismatch: …", or "unavailable: …"

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None

    @property
    def mean_accepted_length(self) -> float | None:
        # as servers report it: 1 + accepted/steps; the server's step count is exact where the stream
        # merged two steps (see labeller), so prefer it
        steps = int(self.metrics_steps) if self.metrics_steps else self.steps
        return 1 + self.accepted / steps if steps else None

    def to_json(self) -> dict:
        d = asdict(self)
        d["acceptance_rate"] = self.acceptance_rate
        d["mean_accepted_length"] = self.mean_accepted_length
        return d


class SideRecorder:
    """Feeds on one side's events and keeps its output bytes, tokens and figures."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.tokens: list[TokenEvent] = []
        self.steps: list[StepEvent] = []
        self.tail = b""
        self.started_ns: int | None = None
        self.finished: StreamFinished | None = None
        self.failed: StreamFailed | None = None
        self.figures = SideFigures()

    @property
    def done(self) -> bool:
        return self.finished is not None or self.failed is not None

    def token_bytes(self) -> list[bytes]:
        out = [t.data for t in self.tokens]
        if self.tail:
            if out:
                out[-1] = out[-1] + self.tail
            else:
                out.append(self.tail)
        return out

    def output(self) -> bytes:
        return b"".join(t.data for t in self.tokens) + self.tail

    def feed(self, ev: StreamEvent) -> None:
        f = self.figures
        if isinstance(ev, TokenEvent):
            self.tokens.append(ev)
            f.tokens += 1
            f.label_counts[ev.label] = f.label_counts.get(ev.label, 0) + 1
            if f.ttft_ms is None and self.started_ns is not None:
                f.ttft_ms = (ev.t_ns - self.started_ns) / 1e6
        elif isinstance(ev, StepEvent):
            self.steps.append(ev)
            f.steps += 1
            f.drafted += ev.drafted
            f.accepted += ev.accepted
        elif isinstance(ev, StreamStarted):
            self.started_ns = ev.t_ns
        elif isinstance(ev, StreamFinished):
            self.finished = ev
            self.tail = ev.tail
            f.stop_type = ev.stop_type
            t = ev.timings
            f.server_decode_tps = _num(t.get("predicted_per_second"))
            f.server_prompt_ms = _num(t.get("prompt_ms"))
            if "prompt_n" in t:
                f.prompt_tokens = int(t["prompt_n"])
            if "cache_n" in t:
                f.prompt_cached = int(t["cache_n"])
            self._rates()
        elif isinstance(ev, StreamFailed):
            self.failed = ev
            self._rates()

    def _rates(self) -> None:
        if len(self.tokens) >= 2:
            span = (self.tokens[-1].t_ns - self.tokens[0].t_ns) / 1e9
            if span > 0:
                self.figures.decode_tps = (len(self.tokens) - 1) / span


def _num(v) -> float | None:
    try:
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None
