"""Compact storage for long streams: tokens and verification steps packed into bytes, one fixed-size
record each, read back as the same frozen events.

A TokenEvent held as a Python object costs about 250 bytes (the object, its bytes, its ints); a
1,000,000-event session held that way took 655 MB to replay. Packed, a token costs 45 bytes
plus its own bytes, a step 32. The logs are sequences of events (len, index, slice, iterate, append,
assign), so code that reads `recorder.tokens` reads them as it read lists; an event read back is a new
object equal to the one stored. An event that does not pack (an id past 64 bits, a field of an odd
type) is kept whole, so nothing is ever refused or altered.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Iterable, Iterator, MutableSequence
from typing import Any

from spectui.core.events import StepEvent, StreamEvent, TokenEvent

_NONE = -(2**63)  # a token id or step that is None
_TOKEN = struct.Struct("<qqqqiBQ")  # index, token id, t_ns, step, rejected, label code, data length
_STEP = struct.Struct("<qqqq")  # step, drafted, accepted, t_ns
_ODD = 255  # the label code of a token kept whole (it does not pack)
_LABEL_AT = 36  # where the label code sits in a token's record
_PACK_ERRORS = (struct.error, TypeError, ValueError, AttributeError, OverflowError)

# A frozen dataclass's __init__ sets each field through object.__setattr__: 1.1-1.4 µs a TokenEvent
# here, against 0.6-0.85 µs setting its slots directly (the same object: equal, hashable, frozen after).
_new = object.__new__
_SET = [TokenEvent.__dict__[f].__set__ for f in ("index", "token_id", "data", "t_ns", "label", "step", "rejected")]
_FIELDS = ("index", "token_id", "t_ns", "step", "rejected", "label")


class _Packed(MutableSequence):
    """What both logs share: rebuilt in full on the rare insert, delete or assignment."""

    __slots__ = ()

    def __setitem__(self, i, ev) -> None:
        items = list(self)
        items[i] = ev
        self._replace(items)

    def __delitem__(self, i) -> None:
        items = list(self)
        del items[i]
        self._replace(items)

    def insert(self, i: int, ev) -> None:
        items = list(self)
        items.insert(i, ev)
        self._replace(items)

    def _replace(self, items: list) -> None:
        self.clear()
        self.extend(items)

    def extend(self, events: Iterable) -> None:
        for ev in events:
            self.append(ev)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Packed | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def _at(self, i: int) -> int:
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"{type(self).__name__} index out of range")
        return i


class TokenLog(_Packed):
    """TokenEvents packed into one buffer, their bytes into another; a sequence of TokenEvent."""

    __slots__ = ("_rows", "_data", "_starts", "_labels", "_codes", "_n", "_odd")

    def __init__(self, events: Iterable[TokenEvent] = ()) -> None:
        self._labels: list[str] = ["first", "accepted", "target", "unknown"]
        self._codes = {label: i for i, label in enumerate(self._labels)}
        self.clear()
        self.extend(events)

    def clear(self) -> None:
        self._rows = bytearray()
        self._data = bytearray()
        self._starts: array | None = None  # where each token's bytes start: built on the first random access
        self._n = 0
        self._odd: dict[int, TokenEvent] = {}  # position → an event kept whole

    def __len__(self) -> int:
        return self._n

    def _code(self, label: str) -> int:
        try:
            return self._codes[label]
        except (KeyError, TypeError):
            code = None
        if code is None:
            if type(label) is not str or len(self._labels) >= _ODD:
                raise TypeError("label")
            code = self._codes[label] = len(self._labels)
            self._labels.append(label)
        return code

    def append(self, ev: TokenEvent) -> None:
        try:
            data = ev.data
            if type(data) is not bytes:
                raise TypeError("data is not bytes")
            tid, step = ev.token_id, ev.step
            row = _TOKEN.pack(
                ev.index,
                _NONE if tid is None else tid,
                ev.t_ns,
                _NONE if step is None else step,
                ev.rejected,
                self._code(ev.label),
                len(data),
            )
            if (tid is not None and tid == _NONE) or (step is not None and step == _NONE):
                raise ValueError("the None marker itself")
        except _PACK_ERRORS:
            row, data = _TOKEN.pack(0, 0, 0, 0, 0, _ODD, 0), b""
            self._odd[self._n] = ev
        if self._starts is not None:
            self._starts.append(len(self._data))
        self._rows += row
        self._data += data
        self._n += 1

    def append_fields(
        self, index: int, token_id: int | None, data: bytes, t_ns: int, label: str, step: int | None, rejected: int
    ) -> None:
        """A token from its fields, without making the event (the session loader's path: whole numbers, bytes)."""
        try:
            row = _TOKEN.pack(
                index,
                _NONE if token_id is None else token_id,
                t_ns,
                _NONE if step is None else step,
                rejected,
                self._code(label),
                len(data),
            )
        except _PACK_ERRORS:
            self.append(TokenEvent(index, token_id, data, t_ns, label, step, rejected))  # type: ignore[arg-type]
            return
        if token_id == _NONE or step == _NONE or type(data) is not bytes:
            self.append(TokenEvent(index, token_id, data, t_ns, label, step, rejected))  # type: ignore[arg-type]
            return
        if self._starts is not None:
            self._starts.append(len(self._data))
        self._rows += row
        self._data += data
        self._n += 1

    def extend_from(self, src: TokenLog, a: int, b: int, data_at: int) -> int:
        """Append tokens a..b-1 of another log, whose bytes start at `data_at` in it, copying their packed
        records (no event made); returns where token b's bytes start."""
        if src._odd or self._odd or src._labels != self._labels[: len(src._labels)]:
            for k in range(a, b):  # rare (an event kept whole, labels coded apart): one by one
                self.append(src[k])
            return data_at + sum(r[6] for r in _TOKEN.iter_unpack(src._rows[a * _TOKEN.size : b * _TOKEN.size]))
        if len(src._labels) > len(self._labels):
            for label in src._labels[len(self._labels) :]:
                self._code(label)
        rows = src._rows[a * _TOKEN.size : b * _TOKEN.size]
        end = data_at + sum(r[6] for r in _TOKEN.iter_unpack(rows))
        if self._starts is not None:
            at = len(self._data)
            for r in _TOKEN.iter_unpack(rows):
                self._starts.append(at)
                at += r[6]
        self._rows += rows
        self._data += src._data[data_at:end]
        self._n += b - a
        return end

    def label_counts(self, a: int = 0, b: int | None = None) -> dict[str, int]:
        """How many tokens of a..b-1 carry each label (from the packed records)."""
        b = self._n if b is None else b
        if self._odd:
            out: dict[str, int] = {}
            for k in range(a, b):
                label = self[k].label
                out[label] = out.get(label, 0) + 1
            return out
        codes = bytes(self._rows[a * _TOKEN.size + _LABEL_AT : b * _TOKEN.size : _TOKEN.size])
        seen = sorted((at, code) for code in range(len(self._labels)) if (at := codes.find(code)) != -1)
        return {self._labels[code]: codes.count(code) for _, code in seen}  # in the order first seen

    def t_ns_at(self, i: int) -> int:
        i = self._at(i)
        return self._odd[i].t_ns if i in self._odd else _TOKEN.unpack_from(self._rows, i * _TOKEN.size)[2]

    def __iter__(self) -> Iterator[TokenEvent]:
        data, labels, odd, start = self._data, self._labels, self._odd, 0
        new, cls = _new, TokenEvent
        s_index, s_id, s_data, s_t, s_label, s_step, s_rej = _SET
        for k, (index, tid, t_ns, step, rejected, code, length) in enumerate(_TOKEN.iter_unpack(self._rows)):
            if code == _ODD:
                yield odd[k]
                continue
            end = start + length
            ev = new(cls)
            s_index(ev, index)
            s_id(ev, None if tid == _NONE else tid)
            s_data(ev, bytes(data[start:end]))
            s_t(ev, t_ns)
            s_label(ev, labels[code])
            s_step(ev, None if step == _NONE else step)
            s_rej(ev, rejected)
            yield ev
            start = end

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        i = self._at(i)
        if i in self._odd:
            return self._odd[i]
        if self._starts is None:
            starts, at = array("Q"), 0
            for fields in _TOKEN.iter_unpack(self._rows):
                starts.append(at)
                at += fields[6]
            self._starts = starts
        index, tid, t_ns, step, rejected, code, length = _TOKEN.unpack_from(self._rows, i * _TOKEN.size)
        start = self._starts[i]
        return TokenEvent(
            index,
            None if tid == _NONE else tid,
            bytes(self._data[start : start + length]),
            t_ns,
            self._labels[code],
            None if step == _NONE else step,
            rejected,
        )

    def copy(self) -> TokenLog:
        """Another log with the same tokens (the buffers copied, no event made)."""
        out = TokenLog()
        out._labels, out._codes = list(self._labels), dict(self._codes)
        out._rows, out._data, out._n, out._odd = bytearray(self._rows), bytearray(self._data), self._n, dict(self._odd)
        return out

    def __repr__(self) -> str:
        return f"TokenLog({self._n} tokens, {len(self._data)} bytes)"

    # -- whole-log reads that make no event per token ----------------------------------------------------
    def joined(self) -> bytes:
        """Every token's bytes, in order."""
        if self._odd:
            return b"".join(t.data for t in self)
        return bytes(self._data)

    def datas(self) -> list[bytes]:
        """Each token's bytes."""
        if self._odd:
            return [t.data for t in self]
        data, out, start = self._data, [], 0
        for fields in _TOKEN.iter_unpack(self._rows):
            end = start + fields[6]
            out.append(bytes(data[start:end]))
            start = end
        return out

    def column(self, name: str) -> list[Any]:
        """One field of every token (index, token_id, t_ns, step, rejected, label); None where None."""
        if self._odd:
            return [getattr(t, name) for t in self]
        k = _FIELDS.index(name)
        rows = _TOKEN.iter_unpack(self._rows)
        if name == "label":
            labels = self._labels
            return [labels[r[5]] for r in rows]
        if name in ("token_id", "step"):
            return [None if r[k] == _NONE else r[k] for r in rows]
        return [r[k] for r in rows]

    def nbytes(self) -> int:
        return len(self._rows) + len(self._data) + (len(self._starts) * 8 if self._starts is not None else 0)


class StepLog(_Packed):
    """StepEvents packed into one buffer; a sequence of StepEvent."""

    __slots__ = ("_rows", "_n", "_odd")

    def __init__(self, events: Iterable[StepEvent] = ()) -> None:
        self.clear()
        self.extend(events)

    def clear(self) -> None:
        self._rows = bytearray()
        self._n = 0
        self._odd: dict[int, StepEvent] = {}

    def __len__(self) -> int:
        return self._n

    def append(self, ev: StepEvent) -> None:
        try:
            step, drafted, accepted, t_ns = ev.step, ev.drafted, ev.accepted, ev.t_ns
            if type(step) is not int or type(drafted) is not int or type(accepted) is not int or type(t_ns) is not int:
                raise TypeError("not whole numbers")
            row = _STEP.pack(step, drafted, accepted, t_ns)
        except _PACK_ERRORS:
            row = _STEP.pack(0, 0, 0, 0)
            self._odd[self._n] = ev
        self._rows += row
        self._n += 1

    def __iter__(self) -> Iterator[StepEvent]:
        odd = self._odd
        for k, fields in enumerate(_STEP.iter_unpack(self._rows)):
            yield odd[k] if k in odd else StepEvent(*fields)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        i = self._at(i)
        if i in self._odd:
            return self._odd[i]
        return StepEvent(*_STEP.unpack_from(self._rows, i * _STEP.size))

    def extend_from(self, src: StepLog, a: int, b: int) -> tuple[int, int]:
        """Append steps a..b-1 of another log (their packed records); returns their (drafted, accepted)."""
        drafted = accepted = 0
        if src._odd or self._odd:
            for k in range(a, b):
                st = src[k]
                self.append(st)
                drafted += st.drafted
                accepted += st.accepted
            return drafted, accepted
        rows = src._rows[a * _STEP.size : b * _STEP.size]
        for _, d, acc, _t in _STEP.iter_unpack(rows):
            drafted += d
            accepted += acc
        self._rows += rows
        self._n += b - a
        return drafted, accepted

    def __repr__(self) -> str:
        return f"StepLog({self._n} steps)"


_TOKEN_KIND, _STEP_KIND, _OTHER_KIND = 0, 1, 2


class EventLog:
    """One side's recorded stream: tokens and steps packed, the few other events (start, finish, failed)
    as they are; iterating yields every event in the order it was appended."""

    __slots__ = ("tokens", "steps", "others", "_kinds")

    def __init__(self, events: Iterable[StreamEvent] = ()) -> None:
        self.tokens = TokenLog()
        self.steps = StepLog()
        self.others: list[StreamEvent] = []
        self._kinds = bytearray()
        for ev in events:
            self.append(ev)

    def append(self, ev: StreamEvent) -> None:
        if type(ev) is TokenEvent:
            self.tokens.append(ev)
            self._kinds.append(_TOKEN_KIND)
        elif type(ev) is StepEvent:
            self.steps.append(ev)
            self._kinds.append(_STEP_KIND)
        else:
            self.others.append(ev)
            self._kinds.append(_OTHER_KIND)

    def append_token(
        self, index: int, token_id: int | None, data: bytes, t_ns: int, label: str, step: int | None, rejected: int
    ) -> None:
        self.tokens.append_fields(index, token_id, data, t_ns, label, step, rejected)
        self._kinds.append(_TOKEN_KIND)

    def __len__(self) -> int:
        return len(self._kinds)

    def segments(self) -> Iterator[tuple[int, int, int, int, StreamEvent | None]]:
        """The log as runs of tokens and steps between its other events, in order: (tokens from, to,
        steps from, to, the other event after the run or None at the end)."""
        kinds, others = self._kinds, iter(self.others)
        ti = si = pos = 0
        while True:
            nxt = kinds.find(_OTHER_KIND, pos)
            end = len(kinds) if nxt == -1 else nxt
            n_steps = kinds.count(_STEP_KIND, pos, end)
            n_tokens = end - pos - n_steps
            yield ti, ti + n_tokens, si, si + n_steps, (next(others) if nxt != -1 else None)
            ti, si = ti + n_tokens, si + n_steps
            if nxt == -1:
                return
            pos = nxt + 1

    def __iter__(self) -> Iterator[StreamEvent]:
        nexts: list[Callable[[], StreamEvent]] = [
            iter(self.tokens).__next__,
            iter(self.steps).__next__,
            iter(self.others).__next__,
        ]
        for kind in self._kinds:
            yield nexts[kind]()

    def __getitem__(self, i):
        return list(self)[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EventLog | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EventLog({len(self.tokens)} tokens, {len(self.steps)} steps, {len(self.others)} others)"
