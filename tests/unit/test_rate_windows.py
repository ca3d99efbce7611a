"""core/figures, the live rate (SideRecorder.rate_so_far) and the arrival-window arithmetic (_per_second)
value by value, on token arrival times written here: a stream whose first event is one token, a stream of
exactly two arrivals, a log replaced by one that starts later, and windows with no token in them or that
end before they start. Each expected rate is worked by hand: tokens after the first event / seconds from the
first arrival to the last."""

from __future__ import annotations

import pytest

from spectui.core.events import StreamStarted, TokenEvent
from spectui.core.figures import SideRecorder, _per_second
from spectui.core.tokens import TokenLog

MS = 1_000_000


def _token(i: int, t_ms: int) -> TokenEvent:
    return TokenEvent(i, i, b"x", t_ms * MS, "target", None, 0)


def _fed(times_ms: list[int]) -> SideRecorder:
    rec = SideRecorder("candidate")
    rec.feed(StreamStarted(900 * MS, "p"))
    for i, t in enumerate(times_ms):
        rec.feed(_token(i, t))
    return rec


def test_two_arrivals_already_make_a_rate():
    # one token at 1000 ms, the next at 1100 ms: one token after the first event, in 0.1 s
    assert _fed([1000, 1100]).rate_so_far() == pytest.approx(1 / 0.1)


def test_a_first_event_of_one_token_leaves_only_that_token_out():
    # arrivals at 1000, 1100, 1300 ms, each its own event: the window opens at 1000 ms (the first token's
    # arrival, not the second's) and holds the two later tokens: 2 tokens / 0.3 s
    rec = _fed([1000, 1100, 1300])
    assert rec.rate_so_far() == pytest.approx(2 / 0.3)
    rec.feed(_token(3, 1500))  # read again after one more arrival: 3 tokens / 0.5 s
    assert rec.rate_so_far() == pytest.approx(3 / 0.5)


def test_a_new_log_that_starts_later_is_counted_again():
    # three tokens with the first event at 1000 ms and one at 1100 ms: 1 token / 0.1 s
    rec = _fed([1000, 1000, 1000, 1100])
    assert rec.rate_so_far() == pytest.approx(1 / 0.1)
    # the log replaced by one whose first event (2000 ms) is a single token: the earlier count of three
    # first-event tokens no longer applies; 2 later tokens (2100, 2200 ms) / 0.2 s
    rec.tokens = TokenLog([_token(0, 2000), _token(1, 2100), _token(2, 2200)])
    assert rec.rate_so_far() == pytest.approx(2 / 0.2)


def test_a_window_with_no_token_in_it_or_running_backwards_has_no_rate():
    assert _per_second(0, 1000 * MS, 1100 * MS) is None  # 0.1 s but no token after the first event: no rate, not 0
    assert _per_second(3, 1100 * MS, 1000 * MS) is None  # last arrival before the first: no window
    assert _per_second(3, 1000 * MS, 1000 * MS) is None  # an empty window
    assert _per_second(3, 1000 * MS, 1200 * MS) == pytest.approx(3 / 0.2)
