"""Label each llama.cpp token as `first`, `accepted` (a draft the target kept) or `target`.

llama-server's cumulative `timings.draft_n` / `timings.draft_n_accepted` counters rise before it emits
a verification step's tokens back to back: when accepted rose by a and drafted by d, the next a+1
tokens are a accepted drafts followed by one token of the target's own (a correction or a bonus), and
d−a drafts were rejected at that point. A stop condition can cut the last step short.

Steps are queued, not replaced: when a token's bytes are withheld (incomplete UTF-8), the next step's
counters can arrive before the previous step's tokens, and those tokens still belong to the earlier
step. Two steps whose counter updates fall between the same two events cannot be told apart; they
are labelled as one (drafted and accepted stay exact; the step count is cross-checked with /metrics).
"""

from __future__ import annotations

import math
from collections import deque

from spectui.core.errors import BadEvent, checked
from spectui.core.events import StepEvent, StreamEvent, StreamFinished, TokenEvent

NUM = (int, float)


class LlamaCppLabeller:
    """Feed it the stream's JSON objects in order, with their arrival times; it yields events."""

    def __init__(self) -> None:
        self.index = 0  # tokens emitted so far
        self.step = 0
        self.drafted = 0
        self.accepted = 0
        self._draft_n = 0
        self._draft_acc = 0
        # pending steps: [step number, accepted tokens still to come, drafts rejected]; the target follows
        self._steps: deque[list[int]] = deque()
        self._tokens_predicted = 0
        self.finished: StreamFinished | None = None
        self.inconsistent: str | None = None  # why the draft counters stopped making sense, if they did

    def _next_label(self) -> tuple[str, int | None, int]:
        if self.index == 0:
            return "first", None, 0
        if self.inconsistent is not None and not self._steps:
            return "unknown", None, 0
        if self._steps:
            head = self._steps[0]
            if head[1] > 0:
                head[1] -= 1
                return "accepted", head[0], 0
            self._steps.popleft()
            return "target", head[0], head[2]
        return "target", None, 0

    def feed(self, obj: dict, t_ns: int) -> list[StreamEvent]:
        """One event's JSON object; BadEvent when a field spectui reads has the wrong type."""
        out: list[StreamEvent] = []
        # the per-token hot path: exact-type checks inline, checked() (which names the field) only when one fails
        timings = obj.get("timings")
        if type(timings) is not dict:
            timings = checked(obj, "timings", dict, {})
        step = self._draft_step(timings, t_ns)
        if step is not None:
            out.append(step)
        ids, n_new, data, predicted = self._new_tokens(obj)
        stop = obj.get("stop", False)
        if stop is not False and type(stop) is not bool:
            stop = checked(obj, "stop", bool, False)
        if stop:
            if n_new or data:
                out.extend(self._emit(ids, max(n_new, 0), data, t_ns))
            out.append(self._finish(obj, timings, predicted, data if not n_new else b"", t_ns))
            return out
        out.extend(self._emit(ids, n_new, data, t_ns))
        return out

    def _draft_step(self, timings: dict, t_ns: int) -> StepEvent | None:
        """The verification step the draft counters' rise since the last event says (None: no step)."""
        draft_n = timings.get("draft_n")
        draft_acc = timings.get("draft_n_accepted")
        if draft_n is not None and type(draft_n) is not int:
            draft_n = checked(timings, "draft_n", NUM)
        if draft_acc is not None and type(draft_acc) is not int:
            draft_acc = checked(timings, "draft_n_accepted", NUM)
        for name, v in (("draft_n", draft_n), ("draft_n_accepted", draft_acc)):
            if type(v) is float and not math.isfinite(v):  # int() of inf/nan would escape as OverflowError
                raise BadEvent(f"{name} {v!r}", v)
        if draft_n is None or draft_acc is None or self.inconsistent is not None:
            return None
        d = int(draft_n) - self._draft_n
        a = int(draft_acc) - self._draft_acc
        if d < 0 or a < 0 or a > d:
            # counters only rise, and a step cannot accept more than it drafted: stop trusting them,
            # keep the labels already made, and label what follows as unknown
            self.inconsistent = (
                f"draft counters went backwards or do not add up (drafted {self._draft_n} → "
                f"{int(draft_n)}, accepted {self._draft_acc} → {int(draft_acc)})"
            )
            return None
        if d == 0 and a == 0:
            return None
        self.step += 1
        self.drafted += d
        self.accepted += a
        self._steps.append([self.step, a, d - a])
        self._draft_n, self._draft_acc = int(draft_n), int(draft_acc)
        return StepEvent(self.step, d, a, t_ns)

    def _new_tokens(self, obj: dict) -> tuple[list, int, bytes, int | None]:
        """The event's token ids, how many tokens it stands for, its bytes, and tokens_predicted."""
        content = obj.get("content")
        if type(content) is not str:
            content = checked(obj, "content", str, "")
        data = content.encode("utf-8") if content else b""
        ids = obj.get("tokens")
        if type(ids) is not list:
            ids = checked(obj, "tokens", list, [])
        for i in ids:
            if type(i) is not int:
                raise BadEvent("tokens[]", i)
        predicted = obj.get("tokens_predicted")
        if predicted is not None and type(predicted) is not int:
            predicted = checked(obj, "tokens_predicted", int)
        n_new = len(ids)
        if predicted is not None:
            # a withheld incomplete-UTF-8 token has no event of its own: tokens_predicted jumps by 2; the
            # final event can carry such a jump too (content "", tokens []) for tokens never sent
            n_new = max(n_new, predicted - max(self._tokens_predicted, self.index))
            self._tokens_predicted = max(self._tokens_predicted, predicted)
        return ids, n_new, data, predicted

    def _finish(self, obj: dict, timings: dict, predicted: int | None, tail: bytes, t_ns: int) -> StreamFinished:
        """The final event: how the stream stopped, with the settings the theory lab reads."""
        settings = checked(obj, "generation_settings", dict, {})
        self.finished = StreamFinished(
            t_ns=t_ns,
            stop_type=str(obj.get("stop_type", "none")),
            timings=dict(timings),
            tokens_evaluated=checked(obj, "tokens_evaluated", int),
            tail=tail,
            # speculation's settings, and n_predict: it caps each draft at n_remaining − 1
            # (tools/server/server-context.cpp:517-536), which the theory lab charges
            settings={k: v for k, v in settings.items() if k.startswith("speculative") or k == "n_predict"},
            tokens_predicted=predicted,
        )
        return self.finished

    def _emit(self, ids: list, n_new: int, data: bytes, t_ns: int) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        if n_new == 0:
            return out
        missing = n_new - len(ids)
        all_ids: list[int | None] = [None] * missing + list(ids)
        for k, tid in enumerate(all_ids):
            label, step, rejected = self._next_label()
            # the bytes arrive with the last token of the event; earlier (withheld) tokens carry none
            chunk = data if k == len(all_ids) - 1 else b""
            out.append(TokenEvent(self.index, tid, chunk, t_ns, label, step, rejected))  # type: ignore[arg-type]
            self.index += 1
        return out
