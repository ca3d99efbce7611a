"""SideRecorder.rate_so_far: the rate a pane shows while its text streams, by the observed
rate's definition: the tokens that came with the first event are not in the window, and at the end it equals
observed_tps."""

from __future__ import annotations

from spectui.core.events import StreamFinished, StreamStarted, TokenEvent
from spectui.core.figures import SideRecorder

MS = 1_000_000


def _token(i: int, t_ms: int) -> TokenEvent:
    return TokenEvent(i, i, b"x", t_ms * MS, "target", None, 0)


def test_before_a_second_arrival_there_is_no_rate():
    rec = SideRecorder("baseline")
    rec.feed(StreamStarted(0, "p"))
    assert rec.rate_so_far() is None
    rec.feed(_token(0, 10))
    rec.feed(_token(1, 10))  # the same event: no window yet
    assert rec.rate_so_far() is None


def test_the_first_events_tokens_are_left_out_and_the_rate_follows_the_stream():
    rec = SideRecorder("candidate")
    rec.feed(StreamStarted(0, "p"))
    for i in range(3):  # three tokens with the first event (a verification step)
        rec.feed(_token(i, 100))
    rec.feed(_token(3, 200))
    assert rec.rate_so_far() == 1 / 0.1  # one token in 100 ms
    for i, t in ((4, 250), (5, 300), (6, 300)):
        rec.feed(_token(i, t))
    assert rec.rate_so_far() == 4 / 0.2  # four tokens after the first event, in 200 ms
    rec.feed(StreamFinished(300 * MS, "eos", {}, None))
    assert rec.figures.observed_tps == rec.rate_so_far() == 20.0


def test_a_plain_list_of_tokens_reads_the_same():
    rec = SideRecorder("baseline")
    rec.tokens = []
    for i, t in enumerate((0, 0, 50, 100)):
        rec.feed(_token(i, t))
    assert rec.rate_so_far() == 2 / 0.1
