"""`make mutate`: mutation testing (mutmut 3) of the modules where a wrong line is a wrong verdict or figure,
against the fast tests (tests/unit and tests/contract, as [tool.mutmut] in pyproject.toml says), one
module at a time; then the kill rate per module.

    python tests/mutate.py                      # every module, from a fresh mutants/ folder
    python tests/mutate.py core/figures core/relabel --max-children 1
    python tests/mutate.py --report             # only the table, from the last run's results
    python tests/mutate.py --survivors core/figures   # each survivor's diff

A survivor is either killed by a test or listed in MUTATION.md as equivalent (the mutant's full name in
backticks under "Equivalent"), with a one-line reason; the table counts those apart and names any
survivor that is neither.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULES = [  # the ones nobody else was changing first; the rest as late as possible
    "core/figures",
    "core/relabel",
    "backends/sse",
    "backends/labeller",
    "core/compare",
    "core/verdict",
    "core/stats",
    "labs/sampling/exact",
    "labs/theory/formula",
    "run/triage",
    "store/session",
    "store/notebook",
    "labs/theory/terms",
    "run/prove/derive",
    "run/prove/regress",
]
# Left out of the mutant runs (pytest `-k`, through PYTEST_ADDOPTS; `--all-tests` keeps them): tests that
# wait on wall-clock deadlines or drive the whole TUI or CLI, 5–35 s each here (mutants/mutmut-stats.json).
# mutmut already runs each mutant against only the tests that execute its function, fastest first, until
# one fails; a mutant no test kills runs all of them, so these dominated: core/verdict's run needed over
# two minutes per surviving mutant of `judge` at a load of 15. Each is still in `make test`.
SLOW = [
    "test_certificate_tamper",  # 34 s: edits every field of a certificate and verifies each
    "test_failed_side",  # the TUI, for each place a side can fail
    "test_tui_stream_client",  # the TUI
    "test_interleaving",  # sweep --repeat through the CLI
    "test_prove_alone_recorded",  # prove and sweep one server at a time through the CLI
    "test_foreign_files_and_bad_readings",  # every writer through the CLI
    "(test_compare_options and (deadline or silent))",  # wait for a 20 s and a 10 s deadline
]
# mutmut's exit codes (mutmut/stats.py): killed by a failing test, a timeout or the type checker
KILLED = {1, 3, 36, 37, -24, 24, 152, 255}
SURVIVED = {0, 5, 33}  # survived, or no test ran it at all


def mutant_glob(module: str) -> str:
    return "spectui." + module.replace("/", ".") + ".*"


def selection() -> str:
    """The pytest option that leaves SLOW out of every mutant's run."""
    return "-k " + shlex.quote(" and ".join(f"not {s}" for s in SLOW))


def meta_path(module: str) -> Path:
    return ROOT / "mutants" / "spectui" / f"{module}.py.meta"


def equivalents() -> dict[str, str]:
    """Mutant name → reason, from MUTATION.md's "Equivalent" sections (`- `name`: reason`)."""
    doc = ROOT / "MUTATION.md"
    if not doc.exists():
        return {}
    found = {}
    for m in re.finditer(r"^- `(spectui\.[^`]+__mutmut_\d+)`:?\s*(.*)$", doc.read_text("utf-8"), re.M):
        found[m.group(1)] = m.group(2).strip()
    return found


def results(module: str) -> dict[str, int | None]:
    p = meta_path(module)
    return json.loads(p.read_text())["exit_code_by_key"] if p.exists() else {}


def report(modules: list[str]) -> int:
    eq = equivalents()
    rows, unexplained = [], []
    totals = [0, 0, 0, 0]
    for module in modules:
        codes = results(module)
        if not any(v is not None for v in codes.values()):
            rows.append(f"{module:<20} {'not run':>8}")
            continue
        ran = {k: v for k, v in codes.items() if v is not None}
        if len(ran) < len(codes):  # a run stopped part-way: no figure, never a partial one
            rows.append(f"{module:<20} {len(codes):>8}  incomplete: {len(ran)} of them run")
            continue
        killed = sum(1 for v in ran.values() if v in KILLED)
        survivors = sorted(k for k, v in ran.items() if v not in KILLED)
        equivalent = [k for k in survivors if k in eq]
        unexplained += [k for k in survivors if k not in eq]
        scored = len(ran) - len(equivalent)
        rate = 100 * killed / len(ran) if ran else 0.0
        score = 100 * killed / scored if scored else 100.0
        rows.append(
            f"{module:<20} {len(ran):>8} {killed:>7} {len(equivalent):>11} {len(survivors) - len(equivalent):>9}"
            f" {rate:>9.1f}% {score:>9.1f}%"
        )
        for i, n in enumerate((len(ran), killed, len(equivalent), len(survivors) - len(equivalent))):
            totals[i] += n
    print(
        f"{'module':<20} {'mutants':>8} {'killed':>7} {'equivalent':>11} {'survived':>9} {'kill rate':>10} {'score':>10}"
    )
    print("\n".join(rows))
    n, killed, equivalent, survived = totals
    if n:
        print(
            f"{'all':<20} {n:>8} {killed:>7} {equivalent:>11} {survived:>9} {100 * killed / n:>9.1f}%"
            f" {100 * killed / (n - equivalent):>9.1f}%"
        )
    print("kill rate: killed / mutants; score: killed / (mutants − those MUTATION.md lists as equivalent)")
    if unexplained:
        print(f"{len(unexplained)} survivors neither killed nor explained in MUTATION.md:")
        for k in unexplained:
            print("  ", k)
    return 0


def survivors(module: str) -> None:
    """Each surviving mutant's changed lines (mutmut's own diff)."""
    from mutmut.__main__ import get_diff_for_mutant

    eq = equivalents()
    for name, code in sorted(results(module).items()):
        if code is None or code in KILLED:
            continue
        diff = get_diff_for_mutant(name, path=f"spectui/{module}.py")
        lines = [x for x in diff.splitlines() if x[:1] in "+-" and not x.startswith(("+++", "---"))]
        print(f"{name}{'  (equivalent: ' + eq[name] + ')' if name in eq else ''}")
        for x in lines:
            print("    " + x)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", help="e.g. core/figures (default: all, in order)")
    ap.add_argument("--max-children", type=int, default=2, help="parallel mutant runs (default 2)")
    ap.add_argument("--keep", action="store_true", help="reuse mutants/ from the last run (faster, may be stale)")
    ap.add_argument("--all-tests", action="store_true", help="run mutants against SLOW too (much slower)")
    ap.add_argument("--report", action="store_true", help="print the table from the last results only")
    ap.add_argument("--survivors", action="store_true", help="print each survivor's diff")
    args = ap.parse_args()
    modules = [m.removeprefix("spectui/").removesuffix(".py") for m in args.modules] or MODULES
    if unknown := [m for m in modules if m not in MODULES]:
        ap.error(f"not a mutated module: {', '.join(unknown)} (see [tool.mutmut] in pyproject.toml)")
    if args.survivors:
        for m in modules:
            survivors(m)
        return 0
    if not args.report:
        if not args.keep and (ROOT / "mutants").exists():
            shutil.rmtree(ROOT / "mutants")  # mutmut keeps old copies of unmutated files: start clean
        for m in modules:  # one module at a time keeps the CPU bounded (--max-children each)
            print(f"== mutmut over spectui/{m}.py", flush=True)
            cmd = [sys.executable, "-m", "mutmut", "run", "--max-children", str(args.max_children), mutant_glob(m)]
            env = dict(os.environ)
            if not args.all_tests:
                env["PYTEST_ADDOPTS"] = (env.get("PYTEST_ADDOPTS", "") + " " + selection()).strip()
            log = ROOT / "mutants" / f"mutmut-{m.replace('/', '-')}.log"
            log.parent.mkdir(exist_ok=True)
            with open(log, "w") as out:
                r = subprocess.run(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
            if r.returncode != 0:
                print(f"mutmut failed on {m} (exit {r.returncode}): see {log}", file=sys.stderr)
                return r.returncode
    return report(modules)


if __name__ == "__main__":
    sys.exit(main())
