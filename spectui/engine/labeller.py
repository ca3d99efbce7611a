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

from collections import deque

from spectui.engine.events import StepEvent, StreamEvent, StreamFinished, TokenEvent


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

    def _next_label(self) -> tuple[str, int | None, int]:
        if self.index == 0:
            return "first", None, 0
        if self._steps:
            head = self._steps[0]
            if head[1] > 0:
                head[1] -= 1
                return "accepted", head[0], 0
            self._steps.popleft()
            return "target", head[0], head[2]
        return "target", None, 0

    def feed(self, obj: dict, t_ns: int) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        timings = obj.get("timings") or {}
        draft_n = timings.get("draft_n")
        draft_acc = timings.get("draft_n_accepted")
        if draft_n is not None and draft_acc is not None:
            d = int(draft_n) - self._draft_n
            a = int(draft_acc) - self._draft_acc
            if d > 0 or a > 0:
                self.step += 1
                self.drafted += d
                self.accepted += a
                self._steps.append([self.step, a, d - a])
                self._draft_n, self._draft_acc = int(draft_n), int(draft_acc)
                out.append(StepEvent(self.step, d, a, t_ns))

        content = obj.get("content") or ""
        data = content.encode("utf-8") if content else b""
        ids = obj.get("tokens")
        if ids is None:
            ids = []
        predicted = obj.get("tokens_predicted")
        n_new = len(ids)
        if predicted is not None and not obj.get("stop"):
            # a withheld incomplete-UTF-8 token has no event of its own: tokens_predicted jumps by 2
            n_new = max(n_new, int(predicted) - self._tokens_predicted)
        if predicted is not None:
            self._tokens_predicted = max(self._tokens_predicted, int(predicted))

        if obj.get("stop"):
            # the final event: no new token unless it carries ids (it can carry released held text)
            if n_new or data:
                out.extend(self._emit(ids, max(n_new, 0), data, t_ns))
            self.finished = StreamFinished(
                t_ns=t_ns,
                stop_type=str(obj.get("stop_type", "none")),
                timings=dict(timings),
                tokens_evaluated=obj.get("tokens_evaluated"),
                tail=data if not n_new else b"",
                settings={k: v for k, v in (obj.get("generation_settings") or {}).items() if k.startswith("speculative")},
            )
            out.append(self.finished)
            return out

        out.extend(self._emit(ids, n_new, data, t_ns))
        return out

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
