"""The one headline of a comparison: both halves of the question, each answered on its own.

    same bytes: yes, 4/4 (text+ids) · faster: no — 0.19× [0.17–0.21] at 41% accepted (4 runs over 2 prompts)

The TUI's banner, the certificate's boxes (text, Markdown, HTML) and the reports all print this one line;
each half carries its own answer (`same`, `faster`: True, False or None for "not known") so a view colours
each half by its own answer, never the whole line by one of them. Nothing here judges a prompt: the bytes
half counts the verdicts core.verdict carried, the speed half takes core.stats.speed_call's word on the
speed-up's interval: "yes" only where it lies above 1×; one run, with no interval, is a point and not judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from spectui.core.runner import grouped
from spectui.core.stats import FASTER, MIN_DF, NO_DIFFERENCE, SLOWER, over_units, speed_call

if TYPE_CHECKING:
    from spectui.core.runner import PromptResult


@dataclass(frozen=True)
class Headline:
    same: bool | None  # every compared output identical (True), one differs (False), not known (None)
    same_text: str
    faster: bool | None  # faster by its interval (True), slower or no measurable difference (False), not judged
    faster_text: str

    @property
    def line(self) -> str:
        return f"{self.same_text} · {self.faster_text}"

    def to_json(self) -> dict:
        return {"line": self.line, "same": self.same, "faster": self.faster}


def same_half(identical: int, compared: int, differ: int, what: str = "text", first_byte: int | None = None):
    """`same bytes: yes (text+ids)`, `same bytes: no — 3/10 differ`, `same bytes: not compared`."""
    if differ:
        where = f", they part at byte {first_byte}" if first_byte is not None and compared == 1 else ""
        count = f" — {differ}/{compared} differ" if compared > 1 else ""
        return False, f"same bytes: no{where}{count} ({what})"
    if not compared or not identical:
        return None, "same bytes: not compared (a side failed or was cut off)"
    if identical < compared:
        return None, f"same bytes: yes on {identical}/{compared}, {compared - identical} not compared ({what})"
    count = f", {identical}/{compared}" if compared > 1 else ""
    return True, f"same bytes: yes{count} ({what})"


def faster_half(
    speedup: float | None,
    low: float | None = None,
    high: float | None = None,
    acceptance: float | None = None,
    runs: str = "1 run",
    df: int | None = None,
    min_df: int = 0,
    drafted_nothing: bool = False,
):
    """`faster: yes — 1.80× [1.70–1.90] …` only where the interval lies above 1 (core.stats.speed_call);
    a value without an interval (one run) is a point, not a verdict on speed: `faster: not judged — …`. A
    speculating candidate that drafted nothing is said so beside its figure: no speed-up of speculation."""
    if speedup is None:
        return None, "faster: not measured (no run where both sides finished)"
    at = f" at {acceptance:.0%} accepted" if acceptance is not None else ""
    if drafted_nothing:
        at = " — the candidate drafted nothing: not a speed-up of speculation"
    call = speed_call(low, high, df, min_df)
    if low is None or high is None:
        return None, f"faster: not judged — {speedup:.2f}×{at} ({runs})"  # a point, no interval
    figure = f"{speedup:.2f}× [{low:.2f}–{high:.2f}]"
    word = {FASTER: "yes", SLOWER: "no"}.get(call, call)
    answer = {FASTER: True, SLOWER: False, NO_DIFFERENCE: False}.get(call)
    return answer, f"faster: {word} — {figure}{at} ({runs})"


def headline(
    identical: int,
    compared: int,
    differ: int,
    what: str = "text",
    *,
    first_byte: int | None = None,
    speedup: float | None = None,
    low: float | None = None,
    high: float | None = None,
    acceptance: float | None = None,
    runs: str = "1 run",
    df: int | None = None,
    min_df: int = 0,
    drafted_nothing: bool = False,
) -> Headline:
    same, same_text = same_half(identical, compared, differ, what, first_byte)
    faster, faster_text = faster_half(speedup, low, high, acceptance, runs, df, min_df, drafted_nothing)
    return Headline(same, same_text, faster, faster_text)


def runs_words(runs: int, prompts: int = 1) -> str:
    return f"{runs} run{'s' if runs != 1 else ''}" + (f" over {prompts} prompts" if prompts > 1 else "")


def headline_for(results: list[PromptResult]) -> Headline:
    """The headline of a run: one prompt's runs, or a set's (its speed-up over prompts, as core.report's
    whole_set; one prompt's over its runs, as its Repeated)."""
    verdicts = [r.verdict for r in results if r.verdict is not None]
    judged = [v for v in verdicts if v.identical is not None]
    identical = sum(1 for v in judged if v.identical)
    differ = [v for v in judged if not v.identical]
    what = "text+ids" if judged and all(v.compared == "text+ids" for v in judged) else "text"
    first = differ[0].divergence.byte if differ and differ[0].divergence is not None else None
    paired = [r for r in results if r.speedup is not None]
    drafted = sum(r.candidate.figures.drafted for r in paired)
    acceptance = sum(r.candidate.figures.accepted for r in paired) / drafted if drafted else None
    # a candidate whose requests named a speculation type, yet drafted nothing (llama.cpp issue 25345: a draft
    # model given with no type that uses it; n-gram sizes its prompts never repeat)
    speculating = any(_speculates(r.candidate.finished) for r in paired)
    groups = grouped(results)
    # over two or more prompts the prompt is the unit, as core.report.whole_set (which imports this module)
    units = [u for g in groups if (u := [r.speedup for r in g.runs if r.speedup is not None])]
    whole = len(units) >= 2
    spread = over_units(units) if whole else (groups[0].speedup if len(groups) == 1 else None)
    runs = runs_words(len(paired), len(units) if whole else 1)
    return headline(
        identical,
        len(verdicts),
        len(differ),
        what,
        first_byte=first,
        acceptance=acceptance,
        speedup=spread.median if spread is not None else None,
        low=spread.low if spread is not None else None,
        high=spread.high if spread is not None else None,
        runs=runs,
        drafted_nothing=bool(paired) and speculating and not drafted,
    )


def _speculates(finished) -> bool:
    """The request's final event names a speculation type other than none (llama.cpp's speculative.types)."""
    if finished is None:
        return False
    types = str(finished.settings.get("speculative.types") or finished.settings.get("speculative.type") or "")
    return any(t.strip() not in ("", "none") for t in types.split(","))


def for_prompt(results: list[PromptResult], result: PromptResult) -> Headline:
    """The headline of `result`'s prompt over its runs so far (its group among `results`)."""
    group = next((g.runs for g in grouped(results) if any(r is result for r in g.runs)), [result])
    return headline_for(group)


def from_certificate(derived: dict) -> Headline:
    """The certificate's headline from its derived section (run.prove.derive): greedy counts, the set's
    speed-up with its interval, the pooled acceptance."""
    g = derived["greedy"]
    n = g["prompts"] + len([i for i in g.get("not_run") or [] if i not in {p["id"] for p in g["per_prompt"]}])
    sp = (derived.get("speedup") or {}).get("overall")
    acc = derived.get("acceptance") or {}
    acceptance = acc["accepted"] / acc["drafted"] if acc.get("drafted") else None
    runs = g.get("runs") or g["prompts"]
    speed: dict = dict(speedup=None)
    if sp is not None and sp.get("value", sp.get("median")) is not None:
        df = sp.get("df") if isinstance(sp.get("df"), int) else None
        speed = dict(speedup=sp.get("value", sp.get("median")), low=sp.get("low"), high=sp.get("high"), df=df)
        speed["min_df"] = MIN_DF
    return headline(
        g["identical"], n, g["differs"], "greedy", acceptance=acceptance, runs=runs_words(runs, g["prompts"]), **speed
    )
