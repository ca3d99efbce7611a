"""What `spectui drafts lesson` measured, kept in its folder as DIR/lesson.json: each phase's
time, peak memory and tokens, the draft's per-position acceptance, its cost, the n_max chosen from them,
the certificate's verdict line and, where the served weights are not the quantised ones, the three-way
table (plain quantised rate, plain served rate, speculative served rate). The TUI's drafts screen and
`spectui drafts cost --lesson DIR` read it from here; run.drafts_lesson writes it after every phase, so a
rerun skips what is done."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from spectui.core.errors import InputError
from spectui.labs.theory.draft_length import LengthChoice
from spectui.store.locations import atomic_write, data_dir

LESSON_NAME = "lesson.json"
PHASES = ("data", "train", "convert", "measure", "prove")


@dataclass
class Phase:
    name: str
    seconds: float
    peak_mib: float | None = None  # the largest resident set a process of this phase reached
    tokens: int | None = None  # tokens the phase generated or trained on
    note: str = ""  # what it made, in words
    memory_of: str = ""  # whose peak memory (the trainer, llama-server …)


@dataclass
class ThreeWay:
    """Plain quantised, plain served (F32) and speculative served rates: a "faster" on the F32 copy is only
    read beside the quantised plain rate. Ratios are paired (B C / C B in one session)."""

    quantised: str  # the quantised model's file name
    served: str  # the served copy's
    plain_quantised_tps: float | None
    plain_served_tps: float | None
    spec_served_tps: float | None
    served_over_quantised: float | None  # plain served / plain quantised, paired
    spec_over_plain: float | None  # the certificate's speed-up (spec served / plain served)

    @property
    def spec_over_quantised(self) -> float | None:
        """The product of the two paired ratios, not of rates measured minutes apart on a shared machine."""
        a, b = self.served_over_quantised, self.spec_over_plain
        return a * b if a is not None and b is not None else None

    def rows(self) -> list[list[str]]:
        def rate(x):
            return f"{x:.1f} tok/s" if x else "—"

        def times(x):
            return f"{x:.2f}×" if x is not None else "—"

        return [
            ["", "rate", "over plain quantised"],
            [f"plain {self.quantised}", rate(self.plain_quantised_tps), "1.00×"],
            [f"plain {self.served}", rate(self.plain_served_tps), times(self.served_over_quantised)],
            [f"speculative {self.served}", rate(self.spec_served_tps), times(self.spec_over_quantised)],
        ]

    def line(self) -> str:
        """One line beside the verdict: never "faster" without the quantised plain rate."""
        sq = self.spec_over_quantised
        verdict = (
            ""
            if sq is None
            else (" — still slower than plain quantised" if sq < 1 else " — faster than plain quantised")
        )
        return (
            f"plain {self.quantised} {_rate(self.plain_quantised_tps)}, plain {self.served} "
            f"{_rate(self.plain_served_tps)}, speculative {self.served} {_rate(self.spec_served_tps)}"
            + (f" ({sq:.2f}× plain quantised{verdict})" if sq is not None else "")
        )


def _rate(x: float | None) -> str:
    return f"{x:.1f} tok/s" if x else "— tok/s"


@dataclass
class Lesson:
    draft: str  # "eagle3" | "lookup"
    target: str  # the GGUF the data and features came from
    served: str  # the GGUF the servers ran (the target, or its F32 copy)
    phases: list[Phase] = field(default_factory=list)
    done: dict = field(default_factory=dict)  # phase → what a later phase needs from it (paths, counts)
    probe_n_max: int | None = None
    per_position: list[float] | None = None  # accepted at position i / verification steps, at probe_n_max
    acceptance: dict | None = None  # accepted, drafted, steps on the held-out prompts at probe_n_max
    cost: dict | None = None  # {"c": …, "c_source": …, "verify": [V(1)…], "verify_source": …}
    choice: LengthChoice | None = None
    certificate: str | None = None  # the certificate.json path
    verdict: str | None = None  # its verdict line
    headline: str | None = None  # same bytes · faster, in the house's words (core.headline)
    three_way: ThreeWay | None = None

    def phase(self, name: str) -> Phase | None:
        return next((p for p in self.phases if p.name == name), None)

    def record(self, p: Phase) -> None:
        self.phases = [x for x in self.phases if x.name != p.name] + [p]
        self.phases.sort(key=lambda x: PHASES.index(x.name) if x.name in PHASES else len(PHASES))

    def to_json(self) -> dict:
        d = asdict(self)
        d["choice"] = self.choice.to_json() if self.choice else None
        d["three_way"] = asdict(self.three_way) if self.three_way else None
        return d

    @classmethod
    def from_json(cls, d: dict) -> Lesson:
        kw = dict(d)
        kw["phases"] = [Phase(**p) for p in d.get("phases") or []]
        kw["choice"] = LengthChoice.from_json(d["choice"]) if d.get("choice") else None
        kw["three_way"] = ThreeWay(**d["three_way"]) if d.get("three_way") else None
        return cls(**kw)

    def text(self) -> str:
        return "\n".join(text_lines(self))


def text_lines(les: Lesson) -> list[str]:
    """The lesson in lines: phases, acceptance per position, the cost and the n_max, the verdict, the table."""
    out = [f"draft: {les.draft} for {Path(les.target).name}, served on {Path(les.served).name}"]
    for p in les.phases:
        mem = f", peak {p.peak_mib:,.0f} MiB ({p.memory_of})" if p.peak_mib else ""
        tok = f", {p.tokens:,} tokens" if p.tokens else ""
        out.append(f"  {p.name:<16} {p.seconds:>7.0f} s{mem}{tok}{f' — {p.note}' if p.note else ''}")
    if les.per_position:
        a = les.acceptance or {}
        out.append(
            f"acceptance per position at n_max {les.probe_n_max}: "
            + ", ".join(f"{i}: {x:.0%}" for i, x in enumerate(les.per_position, 1))
            + (f" ({a['accepted']}/{a['drafted']} drafted tokens in {a['steps']} steps)" if a.get("drafted") else "")
        )
    if les.cost:
        v = les.cost.get("verify") or []
        out.append(
            f"cost: c {les.cost['c']:.3f} target steps a drafted token ({les.cost.get('c_source', '')}); "
            + "V(k) "
            + ", ".join(f"{x:.2f}" for x in v)
        )
    if les.choice:
        ch = les.choice
        out.append(
            f"--spec-draft-n-max {ch.n_max}: {ch.why}; predicted S(k) "
            + ", ".join(f"{k}: {s:.2f}" for k, s in enumerate(ch.speedups, 1))
        )
    measured = (les.done.get("prove") or {}).get("speedup")
    if les.choice and measured is not None:
        out.append(
            f"predicted S({les.choice.n_max}) {les.choice.speedups[les.choice.n_max - 1]:.2f}× from the draft's own "
            f"c, V(k) and acceptance, beside the certificate's measured {measured:.2f}×"
        )
    if les.verdict:
        out.append(f"certificate: {les.verdict}")
        if les.certificate:
            out.append(f"  {les.certificate}")
    if les.three_way:
        out.append("three-way (never 'faster' without the quantised plain rate): " + les.three_way.line())
    return out


def lesson_path(folder: Path) -> Path:
    return folder / LESSON_NAME


def lessons_root() -> Path:
    """Where `spectui drafts lesson` keeps a lesson given no -o: the data folder's lessons/."""
    return data_dir() / "lessons"


def default_dir(draft: str, target: Path, f32: bool) -> Path:
    """A lesson's folder under lessons_root(): one per draft kind, target and served copy (so a rerun resumes)."""
    stem = target.name.removesuffix(".gguf")
    return lessons_root() / f"{draft}-{stem}{'-f32' if f32 else ''}"


def latest_lesson(root: Path | None = None) -> Path | None:
    """The folder under lessons_root() whose lesson.json changed last; None where there is none."""
    base = root or lessons_root()
    try:
        found = [p for p in base.glob(f"*/{LESSON_NAME}") if p.is_file()]
    except OSError:
        return None
    return max(found, key=lambda p: p.stat().st_mtime).parent if found else None


def measured_text(folder: Path) -> str:
    """What a trained draft measured, for `drafts cost --lesson` and the drafts screen; one line where the
    folder holds no lesson (or a damaged one), never an exception."""
    try:
        les = read_lesson(folder)
    except InputError as e:
        return f"lesson {folder}: {e.one_line()}"
    if les is None:
        return f"lesson {folder}: no lesson.json there yet (run `spectui drafts lesson -o {folder}`)"
    head = f"measured by `spectui drafts lesson -o {folder}`:"
    if les.verdict is None:
        head += " (not finished: rerun the same command to resume it)"
    try:
        return "\n".join([head, *text_lines(les)])
    except (KeyError, TypeError, ValueError, AttributeError) as e:  # a field of the wrong kind or missing
        return f"lesson {folder}: its lesson.json is not a lesson record ({type(e).__name__}: {e})"


def read_lesson(folder: Path) -> Lesson | None:
    """The lesson kept in a folder; None where there is none yet; InputError for a file that is not one."""
    path = lesson_path(folder) if folder.is_dir() else folder
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict):
            raise TypeError(f"a JSON {type(doc).__name__}, not an object")
        return Lesson.from_json(doc)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise InputError(
            f"{path} is not a lesson record ({type(e).__name__}: {e})", hint="move it away and rerun the lesson"
        ) from None


def write_lesson(folder: Path, les: Lesson) -> Path:
    return atomic_write(lesson_path(folder), json.dumps(les.to_json(), indent=2) + "\n")
