"""Per-request figures, accumulated from a side's events (live or replayed)."""

from __future__ import annotations

from collections.abc import Iterable, MutableSequence
from dataclasses import asdict, dataclass, field

from spectui.core.events import StepEvent, StreamEvent, StreamFailed, StreamFinished, StreamStarted, TokenEvent
from spectui.core.relabel import aligned_labels, exact_labels, expand_chunks
from spectui.core.tokens import EventLog, StepLog, TokenLog


@dataclass
class SideFigures:
    tokens: int = 0
    ttft_ms: float | None = None
    # the decode rate beside the speed-up: the server's own timing where it reports one (llama.cpp
    # timings.predicted_per_second), else the observed rate; decode_source says which
    decode_tps: float | None = None
    decode_source: str | None = None  # "server timings" | "observed"
    # tokens that arrived after the first event / (last arrival − first event's arrival): the tokens
    # that came with the first event (a verification step, withheld UTF-8) were made before the window
    observed_tps: float | None = None
    rate_unit: str = "tok/s"  # "chunks/s" where a server gives neither token ids nor a token count
    server_decode_tps: float | None = None  # the server's own timings.predicted_per_second
    server_tps_incl_prefill: float | None = None  # vLLM's per-request tokens_per_second (prefill included)
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
    steps_inferred: int = 0  # steps whose labels are a guess (merged counter updates)

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None

    @property
    def alpha_per_position(self) -> float | None:
        """Leviathan's α (acceptance per drafted position, each accepted with probability α given the ones
        before it were): the α with Σ_{i=1..γ} α^i = accepted/steps, γ = drafted/steps. Not the
        acceptance per drafted token (accepted/drafted), which is Σα^i/γ. Steps are the server's
        verification steps, which (llama.cpp, vLLM) count only steps with a non-empty draft."""
        steps = int(self.metrics_steps) if self.metrics_steps else self.steps
        return per_position_alpha(self.accepted, self.drafted, steps)

    @property
    def mean_accepted_length(self) -> float | None:
        # as servers report it: 1 + accepted/steps; the server's step count is exact where the stream
        # merged two steps (see labeller), so prefer it
        steps = int(self.metrics_steps) if self.metrics_steps else self.steps
        return 1 + self.accepted / steps if steps else None

    def to_json(self, measured: bool = True) -> dict:
        """The figures; with `measured` False (the side failed or never finished) no rate, acceptance or
        speculation figure is given: a cut-off stream measured none of them."""
        d = asdict(self)
        d["acceptance_rate"] = self.acceptance_rate
        d["mean_accepted_length"] = self.mean_accepted_length
        d["alpha_per_position"] = self.alpha_per_position
        if not measured:
            for key in UNMEASURED_WHEN_CUT:
                if key in d:
                    d[key] = None
            d["unmeasured"] = "the side did not finish: no rate, acceptance or draft figure from it"
        return d


# what a side that failed or was cut off has not measured (its tokens so far and TTFT stay: they happened)
UNMEASURED_WHEN_CUT = (
    "decode_tps",
    "observed_tps",
    "server_decode_tps",
    "server_tps_incl_prefill",
    "drafted",
    "accepted",
    "steps",
    "acceptance_rate",
    "mean_accepted_length",
    "alpha_per_position",
    "accepted_per_position",
    "metrics_drafted",
    "metrics_accepted",
    "metrics_steps",
)


class SideRecorder:
    """Feeds on one side's events and keeps its output bytes, tokens and figures.

    `tokens` and `steps` are sequences of events, packed (core.tokens): a long output costs ~50 bytes a
    token, not ~250 (a 1,000,000-event replay at 655 MB); read them as lists.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.tokens: MutableSequence[TokenEvent] = TokenLog()
        self.steps: MutableSequence[StepEvent] = StepLog()
        self.tail = b""
        self.started_ns: int | None = None
        self.finished: StreamFinished | None = None
        self.failed: StreamFailed | None = None
        self.figures = SideFigures()
        self.counts_from_metrics = False  # drafted/accepted to be taken from /metrics (no per-step counts)
        self.relabelled = False  # labels were corrected at the end (the pane redraws them)
        self.n_max_hint: float | None = None  # the server's speculative n_max, where its identity says
        self._first_arrival = (0, 0, False)  # rate_so_far's: (first arrival, its tokens, whether all counted)

    @property
    def done(self) -> bool:
        return self.finished is not None or self.failed is not None

    def token_bytes(self) -> list[bytes]:
        out = self.tokens.datas() if isinstance(self.tokens, TokenLog) else [t.data for t in self.tokens]
        if self.tail:
            if out:
                out[-1] = out[-1] + self.tail
            else:
                out.append(self.tail)
        return out

    def output(self) -> bytes:
        if isinstance(self.tokens, TokenLog):
            return self.tokens.joined() + self.tail
        return b"".join(t.data for t in self.tokens) + self.tail

    def rate_so_far(self) -> float | None:
        """The observed rate while the stream runs, as observed_tps defines it (the tokens that arrived after
        the first event, over the time from its arrival to the last one's). Read at a redraw, never per
        token: the first event's tokens are counted once, from the log's start, and the rest is two reads.
        None before a second arrival; the final figures (decode_tps) replace it at the end."""
        tokens, n = self.tokens, len(self.tokens)
        if n < 2:
            return None
        at = tokens.t_ns_at if isinstance(tokens, TokenLog) else (lambda i: tokens[i].t_ns)
        t0 = at(0)
        start, first, final = self._first_arrival
        if start != t0:  # a new log (relabelled): counted again
            first, final = 0, False
        while not final and first < n:
            if at(first) != t0:
                final = True  # a later arrival: the first event's count is final
            else:
                first += 1
        self._first_arrival = (t0, first, final)
        return _per_second(n - first, t0, at(n - 1))

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
            f.server_decode_tps = _num(t.get("predicted_per_second"))  # refined from predicted_n/_ms below
            f.server_prompt_ms = _num(t.get("prompt_ms"))
            if "prompt_n" in t:
                f.prompt_tokens = int(t["prompt_n"])
            if "cache_n" in t:
                f.prompt_cached = int(t["cache_n"])
            self._rates()
        elif isinstance(ev, StreamFailed):
            self.failed = ev
            self._rates()

    def feed_all(self, events: Iterable[StreamEvent]) -> None:
        """Feed a whole stream in order, as feed() one event at a time would; a recorded EventLog's packed
        tokens and steps are copied as they are, not remade and fed one by one (a session's replay)."""
        if not (isinstance(events, EventLog) and type(self.tokens) is TokenLog and type(self.steps) is StepLog):
            for ev in events:
                self.feed(ev)
            return
        f, data_at = self.figures, 0
        for t0, t1, s0, s1, other in events.segments():
            if t1 > t0:
                first_t = events.tokens.t_ns_at(t0)
                data_at = self.tokens.extend_from(events.tokens, t0, t1, data_at)
                f.tokens += t1 - t0
                for label, n in events.tokens.label_counts(t0, t1).items():
                    f.label_counts[label] = f.label_counts.get(label, 0) + n
                if f.ttft_ms is None and self.started_ns is not None:
                    f.ttft_ms = (first_t - self.started_ns) / 1e6
            if s1 > s0:
                drafted, accepted = self.steps.extend_from(events.steps, s0, s1)
                f.steps += s1 - s0
                f.drafted += drafted
                f.accepted += accepted
            if other is not None:
                self.feed(other)

    def _finish_labels(self, ev: StreamFinished) -> None:
        f = self.figures
        spec = ev.spec
        chunk_speculated = "accepted" in _column(self.tokens, "label")
        if spec is None:
            self._labels_from_counters(ev, chunk_speculated)
            return
        acc, dr = spec.per_step_accepted, spec.per_step_drafted
        if acc is not None and dr is not None and len(acc) == len(dr):
            self._relabel_by_steps(ev, acc, dr)
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

    def _labels_from_counters(self, ev: StreamFinished, chunk_speculated: bool) -> None:
        """No speculation report at the end: the labels are the draft counters' (llama.cpp), the chunking's, or
        none."""
        f = self.figures
        if self.steps:
            # a step drafting more than n_max is two steps whose counter updates arrived between the
            # same two events: its tokens' labels are a guess (llama.cpp drafts at most n_max a step)
            n_max = _num(ev.settings.get("speculative.n_max")) or self.n_max_hint
            merged = sum(1 for st in self.steps if n_max and st.drafted > n_max)
            f.steps_inferred = merged
            f.labels = (
                "exact (draft counters)"
                if not merged
                else f"exact (draft counters) for {len(self.steps) - merged} steps, inferred for {merged} "
                f"(two steps' counters arrived together)"
            )
        elif chunk_speculated:  # a speculating server that reported nothing at the end
            f.labels, self.counts_from_metrics = "inferred from chunking", True
        elif self.tokens and self.tokens[-1].label != "unknown":
            f.labels = "no speculation"

    def _relabel_by_steps(self, ev: StreamFinished, acc: list[int], dr: list[int]) -> None:
        """The server's per-step accepted/drafted counts (vLLM, SGLang) relabel the tokens received: fitted to
        the chunks where they align, else placed in order (and said to be inferred where they disagree)."""
        f, spec = self.figures, ev.spec
        assert spec is not None
        received = list(self.tokens)
        tokens = expand_chunks(received, acc, spec.completion_tokens)
        fitted = aligned_labels(tokens, acc, dr, ev.t_ns) if tokens is received else None
        if fitted is not None:
            new_tokens, new_steps, note = fitted
            f.labels = f"exact ({spec.source} per-step counts){note}"
        else:
            expanded = tokens is not received  # one chunk per reported step, split by those counts
            new_tokens, new_steps, agreed = exact_labels(tokens, acc, dr, ev.t_ns)
            f.labels = (
                f"exact ({spec.source} per-step counts)"
                if agreed or expanded
                else f"inferred ({spec.source} per-step counts placed in order: the chunks do not match "
                "them, a chunk may hold two engine steps)"
            )
        self.tokens, self.steps = TokenLog(new_tokens), StepLog(new_steps)
        f.tokens, f.drafted, f.accepted, f.steps = len(self.tokens), sum(dr), sum(acc), len(acc)
        f.label_counts = {}
        for label in _column(self.tokens, "label"):
            f.label_counts[label] = f.label_counts.get(label, 0) + 1
        self.relabelled = True

    def _rates(self) -> None:
        f = self.figures
        if len(self.tokens) >= 2:
            times = _column(self.tokens, "t_ns")
            t0 = times[0]
            later = sum(1 for t in times if t > t0)
            f.observed_tps = _per_second(later, t0, times[-1])
        t = self.finished.timings if self.finished is not None else {}
        n, ms = _num(t.get("predicted_n")), _num(t.get("predicted_ms"))
        if n and n > 1 and ms and ms > 0:
            # llama.cpp times decoding from the first sampled token (predicted_ms is 0.001 at n = 1), so its
            # predicted_per_second is (n − 1) / predicted_ms: the n − 1 tokens made inside the window
            f.server_decode_tps = (n - 1) / ms * 1000.0
        f.server_tps_incl_prefill = _num(t.get("tokens_per_second_incl_prefill"))
        if f.server_decode_tps:
            f.decode_tps, f.decode_source = f.server_decode_tps, "server timings"
        elif f.observed_tps:
            f.decode_tps, f.decode_source = f.observed_tps, "observed"
        completion = _num(t.get("completion_tokens"))
        if (
            self.tokens
            and all(tid is None for tid in _column(self.tokens, "token_id"))
            and completion is not None
            and int(completion) != len(self.tokens)
        ):
            f.rate_unit = "chunks/s"  # one event counted as one token: the server did not say how many


def _per_second(later: int, t0_ns: int, t1_ns: int) -> float | None:
    """Tokens a second over an arrival window (observed_tps and rate_so_far): None for an empty one."""
    span = (t1_ns - t0_ns) / 1e9
    return later / span if span > 0 and later else None


def _column(tokens, name: str) -> list:
    """One field of every token, read from a packed log without making an event per token."""
    return tokens.column(name) if isinstance(tokens, TokenLog) else [getattr(t, name) for t in tokens]


def per_position_alpha(accepted: float, drafted: float, steps: float) -> float | None:
    """The α with Σ_{i=1..γ} α^i = accepted/steps at γ = drafted/steps (a real γ: the sum's closed form
    α(1−α^γ)/(1−α)); None without drafts. Every draft accepted gives 1."""
    if not (drafted and steps) or accepted < 0:
        return None
    gamma, target = drafted / steps, accepted / steps
    if target >= gamma:
        return 1.0
    if target <= 0:
        return 0.0

    def accepted_per_step(a: float) -> float:
        return a * (1 - a**gamma) / (1 - a)

    lo, hi = 0.0, 1.0 - 1e-12
    for _ in range(60):  # the sum rises with α: bisection to ~1e-18
        mid = (lo + hi) / 2
        if accepted_per_step(mid) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def rate_basis_note(baseline: SideFigures, candidate: SideFigures) -> str | None:
    """Where a speed-up divides a rate the server timed by one spectui observed on arrival (llama.cpp
    against vLLM, say): the two clocks differ, which the ratio does not show by itself."""
    b, c = baseline.decode_source, candidate.decode_source
    if b and c and b != c:
        return f"the baseline's rate is from {b}, the candidate's from {c}: the ratio mixes two clocks"
    return None


def _num(v) -> float | None:
    try:
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None
