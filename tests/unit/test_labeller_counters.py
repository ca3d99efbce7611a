"""backends/labeller, value by value (the survivors of its mutmut run): a draft counter that is not a finite
number is named exactly, with its value and type. Expected messages are written by hand from the event."""

from __future__ import annotations

import pytest

from spectui.backends.labeller import LlamaCppLabeller
from spectui.core.errors import BadEvent


@pytest.mark.parametrize(
    "timings,message",
    [
        ({"draft_n": float("inf"), "draft_n_accepted": 0}, "draft_n inf is float"),
        ({"draft_n": 3, "draft_n_accepted": float("nan")}, "draft_n_accepted nan is float"),
        ({"draft_n": float("-inf"), "draft_n_accepted": 1}, "draft_n -inf is float"),
    ],
)
def test_a_counter_that_is_not_finite_is_named_with_its_value_and_type(timings, message):
    with pytest.raises(BadEvent) as exc:
        LlamaCppLabeller().feed({"content": "a", "tokens": [1], "timings": timings}, 0)
    assert str(exc.value) == f"the server sent an event spectui cannot read: {message}"
