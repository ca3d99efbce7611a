"""SamplingResult.overall: seeds whose bytes differ under a drafting that promises the distribution only are
CONSISTENT only where the distribution test ran and found them so; with no test it is NOT DECIDED, never a
'the distributions are consistent' that nothing measured."""

from __future__ import annotations

from spectui.core.events import StreamFinished, StreamStarted, TokenEvent
from spectui.core.figures import SideRecorder
from spectui.core.runner import PromptResult
from spectui.core.types import Prompt
from spectui.labs.sampling.exact import Guarantee, SamplingResult


def _differing_seeds(n: int) -> SamplingResult:
    runs = []
    for i in range(n):
        b, c = SideRecorder("baseline"), SideRecorder("candidate")
        for rec, tok in ((b, 5), (c, 6)):
            rec.feed(StreamStarted(0, "p"))
            rec.feed(TokenEvent(0, tok, b"x" if tok == 5 else b"y", 1, "unknown"))
            rec.feed(StreamFinished(9, "limit"))
        runs.append(PromptResult(Prompt("p"), b, c, run=i + 1))
    res = SamplingResult(Prompt("p"), runs)
    res.guarantee = Guarantee("probabilistic", "distribution only", "the drafting samples")
    return res


def test_differing_seeds_with_no_distribution_test_are_not_decided():
    res = _differing_seeds(4)
    assert res.test is None and len(res.compared) == 4 and res.seeded_identical < 4
    answer, line = res.overall()
    assert answer == "undecided"
    assert line.startswith("verdict: NOT DECIDED") and "were not tested" in line
    assert "consistent" not in line
