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
    labels: str | None = None  # how the labels were made: exact from counters, or inferred from chunking

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
        self.counts_from_metrics = False  # drafted/accepted to be taken from /metrics (no per-step counts)
        self.relabelled = False  # labels were corrected at the end (the pane redraws them)

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
            self._finish_labels(ev)
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

    def _finish_labels(self, ev: StreamFinished) -> None:
        f = self.figures
        spec = ev.spec
        chunk_speculated = any(t.label == "accepted" for t in self.tokens)
        if spec is None:
            if self.steps:
                f.labels = "exact (draft counters)"
            elif chunk_speculated:  # a speculating server that reported nothing at the end
                f.labels, self.counts_from_metrics = "inferred from chunking", True
            elif self.tokens and self.tokens[-1].label != "unknown":
                f.labels = "no speculation"
            return
        acc, dr = spec.per_step_accepted, spec.per_step_drafted
        if acc is not None and dr is not None and len(acc) == len(dr):
            from spectui.engine.chunks import exact_labels, expand_chunks

            tokens = expand_chunks(self.tokens, acc, spec.completion_tokens)
            self.tokens, self.steps, agreed = exact_labels(tokens, acc, dr, ev.t_ns)
            f.tokens, f.drafted, f.accepted, f.steps = len(self.tokens), sum(dr), sum(acc), len(acc)
            f.label_counts = {}
            for t in self.tokens:
                f.label_counts[t.label] = f.label_counts.get(t.label, 0) + 1
            f.labels = f"exact ({spec.source} per-step counts)" + ("" if agreed else "; chunking disagreed")
            self.relabelled = True
        elif spec.steps:
            f.steps = spec.steps
            f.accepted = spec.accepted if spec.accepted is not None else f.label_counts.get("accepted", 0)
            if spec.drafted is not None:
                f.drafted = spec.drafted
            else:
                self.counts_from_metrics = True
            f.labels = f"inferred from chunking ({spec.source} gives no per-step counts)"
        elif chunk_speculated:
            f.labels, self.counts_from_metrics = "inferred from chunking", True
            f.accepted = f.label_counts.get("accepted", 0)
        else:
            f.labels = "no speculation"

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
