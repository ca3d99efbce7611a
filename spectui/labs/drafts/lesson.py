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
from spectui.store.bounded import load_json_file, typed_field
from spectui.store.claim import inside
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
    def from_json(cls, d: dict, source: str = LESSON_NAME) -> Lesson:
        """The record as lesson.json keeps it, every field's type and range checked (InputError naming
        the file and the key); `done`'s paths are left as written (read_lesson places them)."""
        if not isinstance(d, dict):
            raise InputError(f"{source} holds a JSON {type(d).__name__}, not a lesson object")
        kw: dict = {}
        for key in ("draft", "target", "served"):
            kw[key] = typed_field(d, key, str, source)
        if kw["draft"] not in ("eagle3", "lookup"):
            raise InputError(f"{source}: 'draft' is {kw['draft'][:20]!r}, not eagle3 or lookup")
        phases = typed_field(d, "phases", list, source, required=False) or []
        kw["phases"] = [_phase(p, f"{source}: phases[{i}]") for i, p in enumerate(phases)]
        kw["done"] = typed_field(d, "done", dict, source, required=False) or {}
        for name, v in kw["done"].items():
            if not isinstance(v, dict):
                raise InputError(f"{source}: 'done'.{name} is not an object")
        probe = typed_field(d, "probe_n_max", int, source, required=False, lo=1, hi=PROBE_N_MAX)
        kw["probe_n_max"] = probe
        per = typed_field(d, "per_position", list, source, required=False)
        if per is not None:
            for i, x in enumerate(per):
                typed_field({"x": x}, "x", float, f"{source}: 'per_position'[{i}]", lo=0, hi=1)
            if len(per) > PROBE_N_MAX:
                raise InputError(f"{source}: 'per_position' has {len(per)} positions, over {PROBE_N_MAX}")
        kw["per_position"] = per
        for key in ("acceptance", "cost"):
            kw[key] = typed_field(d, key, dict, source, required=False)
        if kw["cost"] is not None:
            typed_field(kw["cost"], "c", float, f"{source}: 'cost'", lo=0, hi=1e6)
            for i, x in enumerate(typed_field(kw["cost"], "verify", list, f"{source}: 'cost'", required=False) or []):
                typed_field({"x": x}, "x", float, f"{source}: 'cost'.verify[{i}]", lo=0, hi=1e6)
        for key in ("certificate", "verdict", "headline"):
            kw[key] = typed_field(d, key, str, source, required=False)
        ch = typed_field(d, "choice", dict, source, required=False)
        kw["choice"] = _choice(ch, probe, per, source) if ch else None
        tw = typed_field(d, "three_way", dict, source, required=False)
        try:
            kw["three_way"] = ThreeWay(**tw) if tw else None
        except TypeError as exc:
            raise InputError(f"{source}: 'three_way' is not a three-way table ({exc})") from None
        return cls(**kw)

    def text(self) -> str:
        return "\n".join(text_lines(self))


PROBE_N_MAX = 64  # --probe-n-max's bound: llama.cpp drafts far fewer; a larger n_max is never measured


def _phase(p, source: str) -> Phase:
    if not isinstance(p, dict):
        raise InputError(f"{source} is not an object")
    name = typed_field(p, "name", str, source)
    return Phase(
        name,
        typed_field(p, "seconds", float, source, lo=0, hi=1e9),
        typed_field(p, "peak_mib", float, source, required=False, lo=0, hi=1e9),
        typed_field(p, "tokens", int, source, required=False, lo=0, hi=1e15),
        typed_field(p, "note", str, source, required=False) or "",
        typed_field(p, "memory_of", str, source, required=False) or "",
    )


def _choice(ch: dict, probe: int | None, per: list | None, source: str) -> LengthChoice:
    """The chosen n_max: a whole number within what was measured (1 … the positions whose acceptance the
    probe saw), its predicted speed-ups one a position."""
    where = f"{source}: 'choice'"
    top = len(per) if per else (probe or PROBE_N_MAX)
    n = typed_field(ch, "n_max", int, where, lo=1, hi=top)
    lists = {}
    for key in ("speedups", "tokens_per_step", "step_costs"):
        xs = typed_field(ch, key, list, where, required=False) or []
        for i, x in enumerate(xs):
            typed_field({"x": x}, "x", float, f"{where}.{key}[{i}]", lo=0, hi=1e6)
        lists[key] = tuple(float(x) for x in xs)
    if len(lists["speedups"]) < n:
        raise InputError(f"{where}: 'n_max' {n} has no predicted speed-up (speedups holds {len(lists['speedups'])})")
    pays = typed_field(ch, "pays", bool, where, required=False)
    return LengthChoice(
        n,
        bool(pays),
        lists["speedups"],
        lists["tokens_per_step"],
        lists["step_costs"],
        typed_field(ch, "why", str, where, required=False) or "",
    )


# the paths a phase leaves in `done`, kept relative to the lesson's folder and checked inside it on resume
PATH_KEYS = {"data": ("path", "heldout"), "train": ("head", "cache", "target_dir"), "convert": ("gguf",)}


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
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:  # a field the reader did not check
        return f"lesson {folder}: its lesson.json is not a lesson record ({type(e).__name__}: {e})"


LESSON_MAX = 4 << 20  # a lesson record is a few KiB; a larger lesson.json is not one


def read_lesson(folder: Path) -> Lesson | None:
    """The lesson kept in a folder; None where there is none yet; InputError (one line naming the file and
    the key) for a lesson.json that is not a regular file (a folder, a link, a FIFO), too large, too deep,
    not a lesson record, or whose paths leave the folder."""
    folder = Path(folder)
    path = lesson_path(folder) if folder.is_dir() else folder
    base = path.parent
    if path.is_symlink():
        raise InputError(f"{path} is a symbolic link", hint="a lesson's record is a file in its folder: move the link")
    if not path.exists():
        return None
    try:
        les = Lesson.from_json(load_json_file(path, "lesson record", LESSON_MAX), str(path))
    except InputError as exc:
        why = str(exc).replace(f"lesson record {path} ", "").replace(f"{path}: ", "")
        raise InputError(f"{path} is not a lesson record ({why})", hint="move it away and rerun the lesson") from None
    for phase, keys in PATH_KEYS.items():
        got = les.done.get(phase) or {}
        for key in keys:
            v = got.get(key)
            if v is None:
                continue
            if not isinstance(v, str):
                raise InputError(f"{path}: 'done'.{phase}.{key} is not a path")
            got[key] = str(inside(base, v, f"{path}: 'done'.{phase}.{key}"))
    if les.certificate is not None:
        les.certificate = str(inside(base, les.certificate, f"{path}: 'certificate'"))
    return les


def write_lesson(folder: Path, les: Lesson) -> Path:
    """lesson.json, atomically, with `done`'s paths relative to the folder (a moved folder still reads)."""
    doc = les.to_json()
    base = Path(folder).resolve()
    done = {k: dict(v) if isinstance(v, dict) else v for k, v in doc["done"].items()}
    for phase, keys in PATH_KEYS.items():
        for key in keys:
            v = (done.get(phase) or {}).get(key)
            if isinstance(v, str):
                try:
                    done[phase][key] = str(Path(v).resolve().relative_to(base))
                except ValueError:
                    pass  # outside the folder (a target's own HF folder): kept as given, refused on resume
    doc["done"] = done
    if isinstance(doc.get("certificate"), str):
        try:
            doc["certificate"] = str(Path(doc["certificate"]).resolve().relative_to(base))
        except ValueError:
            pass  # refused on resume, as the paths in `done`
    return atomic_write(lesson_path(folder), json.dumps(doc, indent=2) + "\n")
