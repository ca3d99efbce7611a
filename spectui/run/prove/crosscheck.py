"""Every figure a session records, checked against the others it must agree with (part of run.prove.derive's
derivation, so `prove`, `verify` and `merge` see the same problems):

- each `servers` record of a session, not only the last: a side's build, model, context and cache never
  change mid-run, and the speculation each request reported (its final event's `speculative.types`) is one
  and the same over every request, and is the one the session's identity says;
- each stream's times: none negative, in order, one start first and one end last; the sides of a
  "sequential" pair never overlap (of a "concurrent" one, always do), and the side that went first is the one the run's number gives
  (B C on odd runs, C B on even ones: core.runner.run_prompts);
- the server's timings against the token arrivals it sent: `predicted_ms` (the decode time the speed-up
  is made of) within TIMING_TOLERANCE× (+ TIMING_SLACK_MS) of the span between the first and the last
  arrival; every timing a finite, non-negative number;
- the tokens received against the count the final event states (`predicted_n`, `tokens_predicted`), and a
  stream stopped at its limit against max_tokens;
- acceptance: each step accepts no more than it drafted; the step events' totals against the final
  event's `draft_n`/`draft_n_accepted` and against the /metrics deltas the result record holds; the
  per-position counts whole numbers within 0 … steps, never rising with the position, summing to at most
  the accepted count;
- each (prompt, run) distinct in content: two runs whose arrivals are the same gaps apart, to the
  nanosecond, are one run recorded twice (moved in time or not) (more degrees of freedom, a narrower interval, from no new data).

What no check here can reach: a session forged whole and self-consistently (times, counts, timings and
tokens all made up to agree). Only a signature by the machine that ran it could say who wrote a file.
"""

from __future__ import annotations

import hashlib
import json
import math

from spectui.core.events import StepEvent, StreamFailed, StreamFinished, StreamStarted, TokenEvent
from spectui.core.types import SIDES
from spectui.store.session import Session, SessionPrompt

TIMING_TOLERANCE = 1.5  # predicted_ms within ×/÷ this of the arrivals' span …
TIMING_SLACK_MS = 50.0  # … give or take this (delivery jitter on a loaded machine)
MIN_TOKENS_FOR_TIMING = 4  # below this the span is a few deliveries: not compared
NUMERIC_TIMINGS = (
    "prompt_n",
    "prompt_ms",
    "prompt_per_token_ms",
    "prompt_per_second",
    "predicted_n",
    "predicted_ms",
    "predicted_per_token_ms",
    "predicted_per_second",
    "cache_n",
    "draft_n",
    "draft_n_accepted",
)
SAVED_COUNTS = ("metrics_drafted", "metrics_accepted", "metrics_steps")


def problems_of(sessions: dict[str, list[Session]]) -> list[str]:
    """Every disagreement between the figures the sessions record, one line each."""
    out: list[str] = []
    all_sessions = [s for phase in ("greedy", "sampled") for s in sessions.get(phase, [])]
    out += _identities(all_sessions)
    seen: dict[str, str] = {}
    sampled = {id(s) for s in sessions.get("sampled", [])}
    for s in all_sessions:
        for sp in s.prompts:
            which = f"seed {sp.params.seed}" if id(s) in sampled else f"run {_run(sp)}"
            where = f"{s.path.name}: {sp.prompt.id} {which}"
            for side in SIDES:
                out += [f"{where}: the {side}'s {p}" for p in _stream(sp, side)]
            out += [f"{where}: {p}" for p in _saved(sp)]
            out += [f"{where}: {p}" for p in _pairing(sp)]
            print_ = _fingerprint(sp)
            if print_ is not None:
                if print_ in seen:
                    out.append(
                        f"{where}: the same recording as {seen[print_]} (the gaps between arrivals equal to the nanosecond)"
                    )
                else:
                    seen[print_] = where
    return out


def _run(sp: SessionPrompt) -> int:
    saved = sp.result if isinstance(sp.result, dict) else {}
    return saved["run"] if isinstance(saved.get("run"), int) and not isinstance(saved.get("run"), bool) else 1


# -- the servers ---------------------------------------------------------------------------------------
def _identities(sessions: list[Session]) -> list[str]:
    """A side's identity over EVERY servers record (the speculation aside: learnt from the first request),
    and the speculation its requests reported: one value, the one the last record says."""
    out: list[str] = []
    reported: dict[str, set[str]] = {side: set() for side in SIDES}
    for s in sessions:  # (between sessions: derive.servers_of)
        known: dict[str, dict] = {side: {} for side in SIDES}  # each field's value once it is known
        changed: dict[str, set[str]] = {side: set() for side in SIDES}
        for infos in s.servers_seen or [s.infos]:
            for side in SIDES:
                info = infos.get(side)
                if info is None:
                    continue
                d = {k: v for k, v in info.to_json().items() if k not in ("url", "speculative")}
                spec = info.speculative if isinstance(info.speculative, dict) else {}
                d |= {f"speculative.{k}": v for k, v in spec.items() if k not in ("type", "enabled")}
                for k in set(d) | set(known[side]):
                    v = d.get(k)
                    if v is None and k not in known[side]:
                        continue  # not known yet: a later record may learn it (never forget it)
                    if known[side].setdefault(k, v) != v:
                        changed[side].add(k)
        for side in SIDES:
            if changed[side]:
                out.append(
                    f"{s.path.name}: the {side} server's {', '.join(sorted(changed[side]))} changed between its "
                    "servers records"
                )
        for sp in s.prompts:
            for side in SIDES:
                fin = _finish(sp, side)
                if fin is not None and isinstance(fin.settings, dict):
                    types = fin.settings.get("speculative.types") or fin.settings.get("speculative.type")
                    if types is not None:
                        used = [t for t in str(types).split(",") if t and t != "none"]
                        reported[side].add(",".join(used) or "none")
    for side in SIDES:
        if len(reported[side]) > 1:
            out.append(
                f"the {side}'s requests reported different speculation ({', '.join(sorted(reported[side]))}): "
                "one server changed mid-run"
            )
        elif reported[side]:
            said = {t for s in sessions if (t := _type_said(s, side)) is not None}
            (only,) = reported[side]
            if said and said != {only}:
                out.append(
                    f"the {side}'s requests reported speculation {only}; its servers record says {', '.join(sorted(said))}"
                )
    return out


def _type_said(s: Session, side: str) -> str | None:
    """The speculation type a session's last servers record gives a side (learnt from its requests)."""
    info = s.infos.get(side)
    spec = info.speculative if info is not None and isinstance(info.speculative, dict) else {}
    return str(spec["type"]) if spec.get("type") is not None else None


# -- one side's stream ------------------------------------------------------------------------------------
def _finish(sp: SessionPrompt, side: str) -> StreamFinished | None:
    return next((e for e in sp.events[side] if isinstance(e, StreamFinished)), None)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def _stream(sp: SessionPrompt, side: str) -> list[str]:
    """One side's stream: its shape and times, then its final event against what arrived."""
    events = list(sp.events[side])
    if not events:
        return []
    out = _shape(events)
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    steps = [e for e in events if isinstance(e, StepEvent)]
    if any(not isinstance(st.drafted, int) or not isinstance(st.accepted, int) for st in steps):
        return out + ["step events without whole-number drafted/accepted counts"]
    for st in steps:
        if not (0 <= st.accepted <= st.drafted):
            out.append(f"step {st.step} accepts {st.accepted} of {st.drafted} drafted (0 ≤ accepted ≤ drafted)")
            break
    fin = _finish(sp, side)
    return out if fin is None else out + _final(sp, fin, tokens, steps)


def _shape(events: list) -> list[str]:
    """Times from the prompt's start and in order; one start, first; one end, last."""
    out: list[str] = []
    times = [e.t_ns for e in events]
    if min(times) < 0:
        out.append(f"events have negative times ({min(times)} ns): times run from the prompt's start")
    if any(b < a for a, b in zip(times, times[1:])):
        out.append("events are not in time order")
    starts = [i for i, e in enumerate(events) if isinstance(e, StreamStarted)]
    ends = [i for i, e in enumerate(events) if isinstance(e, (StreamFinished, StreamFailed))]
    if starts and starts != [0]:
        out.append("stream has a start that is not its first event")
    if len(ends) > 1 or (ends and ends[0] != len(events) - 1):
        out.append("stream has events after its end")
    return out


def _final(sp: SessionPrompt, fin: StreamFinished, tokens: list[TokenEvent], steps: list[StepEvent]) -> list[str]:
    """The final event's timings, counts and settings against the tokens and steps that arrived."""
    out: list[str] = []
    timings = fin.timings if isinstance(fin.timings, dict) else {}
    bad = [k for k in NUMERIC_TIMINGS if k in timings and not _number(timings[k])]
    bad += [k for k, v in timings.items() if k not in NUMERIC_TIMINGS and isinstance(v, float) and not math.isfinite(v)]
    if bad:
        out.append(
            f"timings {', '.join(f'{k} = {json.dumps(timings[k])[:20]}' for k in bad)}: each is a finite number ≥ 0"
        )
        return out
    said = fin.settings.get("n_predict") if isinstance(fin.settings, dict) else None
    if isinstance(said, int) and not isinstance(said, bool) and said != sp.params.max_tokens:
        out.append(
            f"server reports n_predict {said} for the request; its recorded max_tokens is {sp.params.max_tokens}"
        )
    with_ids = bool(tokens) and all(t.token_id is not None for t in tokens)
    for key, said in (("predicted_n", timings.get("predicted_n")), ("tokens_predicted", fin.tokens_predicted)):
        if with_ids and said is not None and int(said) != len(tokens):
            out.append(f"final event says {key} {int(said)}; {len(tokens)} tokens arrived")
    if fin.stop_type == "limit" and with_ids and len(tokens) < sp.params.max_tokens:
        out.append(f"stream stopped at its limit after {len(tokens)} tokens; max_tokens is {sp.params.max_tokens}")
    if "draft_n" in timings:  # llama.cpp's own count for the request: the step events are its deltas
        for key, total in (
            ("draft_n", sum(s.drafted for s in steps)),
            ("draft_n_accepted", sum(s.accepted for s in steps)),
        ):
            if key in timings and int(timings[key]) != total:
                out.append(f"final event says {key} {int(timings[key])}; its step events add up to {total}")
    if steps and fin.spec is None and tokens:
        # the draft counters label each token: the accepted ones are the steps' accepted drafts
        labelled = sum(1 for t in tokens if t.label == "accepted")
        if labelled != sum(s.accepted for s in steps):
            out.append(
                f"tokens labelled accepted number {labelled}; its step events accepted {sum(s.accepted for s in steps)}"
            )
    out += _timing(timings, tokens)
    return out


def _timing(timings: dict, tokens: list[TokenEvent]) -> list[str]:
    """predicted_ms against the span of the arrivals (first to last token)."""
    ms, n = timings.get("predicted_ms"), timings.get("predicted_n")
    out = []
    rate = timings.get("predicted_per_second")
    if rate is not None and ms and n and n > 1:
        # llama.cpp: n / ms, or (n − 1) / ms where it times from the first sampled token
        if not any(abs(rate - k / ms * 1000.0) <= 0.01 * rate for k in (n, n - 1)):
            out.append(
                f"timings say predicted_per_second {rate:.6g}; predicted_n {n} over predicted_ms {ms:.6g} give {n / ms * 1000.0:.6g}"
            )
    if ms is None or n is None or n < MIN_TOKENS_FOR_TIMING or len(tokens) < MIN_TOKENS_FOR_TIMING:
        return out
    span = (tokens[-1].t_ns - tokens[0].t_ns) / 1e6
    low, high = span / TIMING_TOLERANCE - TIMING_SLACK_MS, span * TIMING_TOLERANCE + TIMING_SLACK_MS
    if low <= ms <= high:
        return out
    return out + [
        f"timings say predicted_ms {ms:.6g}; its tokens arrived over {span:.1f} ms (the speed-up rests on the "
        f"timings: they must lie within ×/÷{TIMING_TOLERANCE} ± {TIMING_SLACK_MS:.0f} ms of the arrivals)"
    ]


def _saved(sp: SessionPrompt) -> list[str]:
    """The result record's counters (the /metrics deltas) against the candidate's and baseline's events."""
    saved = sp.result if isinstance(sp.result, dict) else {}
    out: list[str] = []
    for side in SIDES:
        fig = saved.get(side)
        if not isinstance(fig, dict):
            continue
        steps = [
            e
            for e in sp.events[side]
            if isinstance(e, StepEvent) and isinstance(e.drafted, int) and isinstance(e.accepted, int)
        ]
        counts: dict[str, float] = {k: v for k in SAVED_COUNTS if (v := fig.get(k)) is not None}
        bad = [k for k, v in counts.items() if not _number(v) or v != int(v)]
        if bad:
            out.append(f"the {side}'s {', '.join(bad)}: each is a whole number ≥ 0")
            continue
        d, a, st = counts.get("metrics_drafted"), counts.get("metrics_accepted"), counts.get("metrics_steps")
        if d is not None and a is not None and a > d:
            out.append(f"the {side}'s /metrics counts accept {int(a)} of {int(d)} drafted")
        if steps:
            ev_d, ev_a = sum(s.drafted for s in steps), sum(s.accepted for s in steps)
            if (d is not None and int(d) != ev_d) or (a is not None and int(a) != ev_a):
                out.append(
                    f"the {side}'s /metrics counts ({_i(a)}/{_i(d)} accepted/drafted) disagree with its step events "
                    f"({ev_a}/{ev_d})"
                )
        pos = fig.get("accepted_per_position")
        if pos is None:
            continue
        n_steps = int(st) if st else len(steps)
        accepted = int(a) if a is not None else sum(s.accepted for s in steps)
        if not isinstance(pos, list) or not all(_number(v) and v == int(v) for v in pos):
            out.append(f"the {side}'s accepted_per_position is not a list of whole numbers ≥ 0")
        elif any(v > n_steps for v in pos):
            out.append(f"the {side}'s accepted_per_position {_short(pos)} exceeds its {n_steps} steps")
        elif any(b > a_ for a_, b in zip(pos, pos[1:])):
            out.append(f"the {side}'s accepted_per_position {_short(pos)} rises with the position")
        elif sum(pos) > accepted:
            out.append(
                f"the {side}'s accepted_per_position adds up to {int(sum(pos))}, more than the {accepted} accepted"
            )
    return out


def _i(v) -> str:
    return "—" if v is None else str(int(v))


def _short(v) -> str:
    text = str(v)
    return text if len(text) <= 40 else text[:37] + "…"


# -- the pair ---------------------------------------------------------------------------------------------
def _window(sp: SessionPrompt, side: str) -> tuple[int, int] | None:
    events = list(sp.events[side])
    if not events or not isinstance(events[0], StreamStarted):
        return None
    if not isinstance(events[-1], StreamFinished):
        return None
    return events[0].t_ns, events[-1].t_ns


def _pairing(sp: SessionPrompt) -> list[str]:
    """A sequential pair: the two streams one after the other, never overlapping, the first side the one
    the run's number gives (B C on odd runs, C B on even)."""
    if sp.order not in ("sequential", "concurrent"):
        return []  # one at a time: each side timed from its own start, in its own phase
    b, c = _window(sp, "baseline"), _window(sp, "candidate")
    if b is None or c is None:
        return []
    if sp.order == "concurrent":
        if not (b[0] < c[1] and c[0] < b[1]):
            return ["the two sides' streams ran one after the other, yet the pair is recorded as concurrent"]
        return []
    if b[0] < c[1] and c[0] < b[1]:
        return ["the two sides' streams overlap in time, yet the pair is recorded as sequential"]
    first = "baseline" if b[0] < c[0] else "candidate"
    want = "baseline" if _run(sp) % 2 else "candidate"
    if first != want:
        return [f"the {first} went first; run {_run(sp)} of a sequential pair starts with the {want} (B C / C B)"]
    return []


def _fingerprint(sp: SessionPrompt) -> str | None:
    """Both sides' gaps between arrivals, to the nanosecond: two real runs never share them (a copy moved
    in time keeps its gaps)."""
    h = hashlib.sha256()
    n = 0
    for side in SIDES:
        h.update(side.encode())
        last = None
        for e in sp.events[side]:
            if isinstance(e, TokenEvent):
                if last is not None:
                    h.update((e.t_ns - last).to_bytes(16, "little", signed=True))
                    n += 1
                last = e.t_ns
    return h.hexdigest() if n >= 3 else None
