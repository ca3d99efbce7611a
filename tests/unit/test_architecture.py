"""The house's shape, read from the source with `ast` (nothing is imported): file-level import cycles
(imports inside functions count: they run too, only later; so do `if TYPE_CHECKING:` imports: a module typed
against another depends on it), who imports the CLI, private names imported across modules, and
function-level imports that do not say a real reason for not being at the module top (`# lazy: <what it
loads>`, on the import or the line above it). These fail the run.

Sizes (modules, functions, the app's methods) are a smell to look at, never a rule to satisfy: they are a
report, printed by `python -m tests.unit.test_architecture` (and by `make check`), with the whole tree's counts
per floor (cycles, private imports, function-level imports, functions over 50 and 80 lines, long modules).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "spectui"
FLOORS = ("core", "backends", "machine", "store", "labs", "run", "tui", "cli")
# the report's marks: sizes worth a look (a module or function this long may hold two jobs), never a failure
LONG_MODULE_LINES = 600
LONG_FUNCTION_LINES = 50
VERY_LONG_FUNCTION_LINES = 80
# a function-level import's reason names what it keeps out of the module's other paths (a heavy package, a
# measured start-up cost); a count of modules is no reason: it moves to the top
LAZY_MARK = "# lazy:"
NO_REASON = re.compile(r"#\s*lazy:\s*(\d+ modules? more|see above|as above)?\s*$")


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    target: str  # the spectui module imported (a submodule where `from pkg import mod` names one)
    name: str | None  # the name taken from it (`from target import name`), None for `import target`
    in_function: bool
    line: int
    typing_only: bool = False  # under `if TYPE_CHECKING:`


@dataclass
class Module:
    name: str
    path: Path
    lines: int
    newlines: int = 0
    imports: list[Import] = field(default_factory=list)
    functions: list[tuple[str, int, int]] = field(default_factory=list)  # (qualified name, first line, length)
    function_imports: int = 0  # every import statement run inside a function, spectui's or not
    unexplained_imports: list[int] = field(default_factory=list)  # lines of those without a real `# lazy:` reason


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def floor_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in FLOORS) else ""


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def said_why(lines: list[str], first: int, last: int) -> bool:
    """A `# lazy: <reason>` on the import's own lines or on the comment line just above it, with a reason
    that names what it loads (not a count of modules)."""
    said = lines[first - 1 : last]
    above = lines[first - 2].strip() if first >= 2 else ""
    if above.startswith("#"):
        said = [above, *said]
    for line in said:
        if LAZY_MARK in line:
            reason = line[line.index(LAZY_MARK) :]
            return not NO_REASON.match(reason)
    return False


class _Walker(ast.NodeVisitor):
    def __init__(self, mod: Module, known: set[str], text: str = "") -> None:
        self.mod, self.known = mod, known
        self.lines = text.splitlines()
        self.scope: list[str] = []  # enclosing function/class names
        self.depth = 0  # functions we are inside
        self.typing = False  # inside `if TYPE_CHECKING:`

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node):
            self.generic_visit(node)
            return
        self.typing = True  # an edge of the graph, never run: not a function-level import
        for n in node.body:
            self.visit(n)
        self.typing = False
        for n in node.orelse:
            self.visit(n)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        self.mod.functions.append((".".join([*self.scope, node.name]), node.lineno, length))
        self.scope.append(node.name)
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1
        self.scope.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def _in_function(self, node: ast.Import | ast.ImportFrom) -> None:
        if self.depth == 0 or self.typing:
            return
        self.mod.function_imports += 1
        if not said_why(self.lines, node.lineno, node.end_lineno or node.lineno):
            self.mod.unexplained_imports.append(node.lineno)

    def _add(self, target: str, name: str | None, line: int) -> None:
        self.mod.imports.append(Import(self.mod.name, target, name, self.depth > 0, line, self.typing))

    def visit_Import(self, node: ast.Import) -> None:
        self._in_function(node)
        for a in node.names:
            if a.name.split(".")[0] == "spectui":
                self._add(a.name, None, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._in_function(node)
        base = node.module or ""
        if node.level:  # relative: resolve against this module's package
            pkg = self.mod.name.split(".")
            if not self.mod.path.name == "__init__.py":
                pkg = pkg[:-1]
            pkg = pkg[: len(pkg) - (node.level - 1)]
            base = ".".join([*pkg, base] if base else pkg)
        if base.split(".")[0] != "spectui":
            return
        for a in node.names:
            sub = f"{base}.{a.name}"
            if sub in self.known:  # `from spectui.core import terms_table`: the submodule itself
                self._add(sub, None, node.lineno)
            else:
                self._add(base, a.name, node.lineno)


def load_tree() -> dict[str, Module]:
    paths = sorted(PKG.rglob("*.py"))
    known = {module_name(p) for p in paths}
    tree: dict[str, Module] = {}
    for p in paths:
        text = p.read_text(encoding="utf-8")
        mod = Module(module_name(p), p, len(text.splitlines()), text.count("\n"))
        _Walker(mod, known, text).visit(ast.parse(text, str(p)))
        tree[mod.name] = mod
    return tree


def cycles(tree: dict[str, Module]) -> list[list[str]]:
    """The import graph's strongly connected components of more than one module (Tarjan), each sorted."""
    graph = {
        m: sorted({i.target for i in mod.imports if i.target in tree and i.target != m}) for m, mod in tree.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def strong(v: str) -> None:  # iterative Tarjan: the graph is deep enough to matter for recursion
        nonlocal counter
        work = [(v, iter(graph[v]))]
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return sorted(out)


def private_imports(tree: dict[str, Module]) -> list[Import]:
    """`from spectui.x import _name` (or a private submodule) taken by another module; dunders are public."""
    out = []
    for mod in tree.values():
        for i in mod.imports:
            taken = i.name if i.name is not None else i.target.rsplit(".", 1)[-1]
            if taken.startswith("_") and not taken.startswith("__") and i.target != mod.name:
                out.append(i)
    return out


def cli_importers(tree: dict[str, Module]) -> list[Import]:
    """Imports of spectui.cli from outside it (spectui/__main__ is the entry and may)."""
    return [
        i
        for mod in tree.values()
        for i in mod.imports
        if (i.target == "spectui.cli" or i.target.startswith("spectui.cli."))
        and floor_of(mod.name) != "cli"
        and mod.name != "spectui.__main__"
    ]


TREE = load_tree()
CYCLES = cycles(TREE)


def test_the_walker_sees_an_import_cycle_and_a_private_import(tmp_path):
    """The checks can fail: a cycle made through a function-level import, a private name and a function-level
    import without a real reason are found."""
    src = {
        "spectui/a.py": "from spectui.b import f\n",
        "spectui/b.py": (
            "def f():\n    from spectui.a import _g\n    import json  # lazy: orjson (~9 ms), only to write\n"
            "    import csv  # lazy: 1 modules more\n    # lazy: numpy (~0.3 s), only for the fit\n    import re\n"
        ),
        "spectui/c.py": "from typing import TYPE_CHECKING\nfrom spectui.a import h\nif TYPE_CHECKING:\n    import spectui.c\n",
        "spectui/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from spectui.c import k\n",
    }
    known = {"spectui.a", "spectui.b", "spectui.c", "spectui.d"}
    tree = {}
    for rel, text in src.items():
        p = ROOT / rel  # only its name is used
        mod = Module(module_name(p), p, len(text.splitlines()))
        _Walker(mod, known, text).visit(ast.parse(text))
        tree[mod.name] = mod
    tree["spectui.a"].imports.append(Import("spectui.a", "spectui.d", "x", False, 2))  # a → d ⇢ c → a
    assert cycles(tree) == [["spectui.a", "spectui.b", "spectui.c", "spectui.d"]]
    assert [(i.importer, i.name) for i in private_imports(tree)] == [("spectui.b", "_g")]
    assert tree["spectui.b"].function_imports == 4 and tree["spectui.d"].function_imports == 0
    assert tree["spectui.b"].unexplained_imports == [2, 4]  # no `# lazy:` at all, and a count of modules


@pytest.mark.parametrize("floor", FLOORS)
def test_no_import_cycle_touches_the_floor(floor):
    touching = [c for c in CYCLES if any(floor_of(m) == floor for m in c)]
    assert not touching, touching


@pytest.mark.parametrize("floor", FLOORS)
def test_no_private_name_imported_across_modules(floor):
    found = [
        f"{i.importer}:{i.line} takes {i.name or i.target} from {i.target}"
        for i in private_imports(TREE)
        if floor_of(i.importer) == floor
    ]
    assert not found, found


@pytest.mark.parametrize("floor", FLOORS)
def test_a_function_level_import_says_a_real_reason_or_is_at_the_top(floor):
    """An import inside a function only with what it keeps out of the module's other paths (`# lazy: aiohttp
    (~0.8 s), only for the stamped client`); else it belongs at the module top."""
    found = [
        f"{m.path.relative_to(ROOT)}:{line}"
        for m in TREE.values()
        if floor_of(m.name) == floor
        for line in m.unexplained_imports
    ]
    assert not found, found


def test_nothing_imports_the_cli_but_the_cli_and_the_entry():
    found = [f"{i.importer}:{i.line} imports {i.target}" for i in cli_importers(TREE)]
    assert not found, found


def sides_written_out(tree: dict[str, Module]) -> list[str]:
    """Where the two sides are spelt out as a tuple or list instead of core.types.SIDES (the one definition)."""
    found = []
    for m in tree.values():
        for node in ast.walk(ast.parse(m.path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Tuple | ast.List) and [getattr(e, "value", None) for e in node.elts] == [
                "baseline",
                "candidate",
            ]:
                found.append(f"{m.path.relative_to(ROOT)}:{node.lineno}")
    return found


# floors held to it (tui/ joins once its loops over the sides name SIDES)
SIDES_ONCE = [f for f in FLOORS if f != "tui"]


@pytest.mark.parametrize("floor", SIDES_ONCE)
def test_the_sides_are_written_once(floor):
    here = {n: m for n, m in TREE.items() if floor_of(n) == floor}
    found = [w for w in sides_written_out(here) if not w.startswith("spectui/core/types.py:")]
    assert not found, found


def test_each_command_help_line_is_written_once():
    """A command's one line of help lives in cli/commands.py's table; its parser reads it from there."""
    from spectui.cli.commands import COMMANDS

    lines = {c.help for c in COMMANDS.values()}
    found = [
        f"{m.path.relative_to(ROOT)}:{node.lineno}"
        for m in TREE.values()
        if m.name != "spectui.cli.commands"
        for node in ast.walk(ast.parse(m.path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in lines
    ]
    assert not found, found


def app_methods() -> list[str]:
    """SpectuiApp's own methods (a hub's size: the report shows it)."""
    path = PKG / "tui" / "app.py"
    if not path.exists():
        return []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    apps = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SpectuiApp"]
    return [n.name for a in apps for n in a.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def report(tree: dict[str, Module] = TREE) -> str:
    """The whole tree's counts, per floor and in all, with the cycles, the long functions and the long
    modules named: what to look at, not what to satisfy."""
    cyc = cycles(tree)
    priv = private_imports(tree)
    fns = [(m.name, fn, n) for m in tree.values() for fn, _, n in m.functions]
    lines_total = sum(m.newlines for m in tree.values())
    fn_imports = sum(m.function_imports for m in tree.values())
    per = Counter()
    for m in tree.values():
        f = floor_of(m.name) or "(top)"
        per[f, "modules"] += 1
        per[f, "lines"] += m.lines
        per[f, "fn>50"] += sum(1 for _, _, n in m.functions if n > LONG_FUNCTION_LINES)
        per[f, "fn>80"] += sum(1 for _, _, n in m.functions if n > VERY_LONG_FUNCTION_LINES)
        per[f, "fn imports"] += m.function_imports
        per[f, "unexplained"] += len(m.unexplained_imports)
        per[f, "private"] += sum(1 for i in priv if i.importer == m.name)
        per[f, "cycles"] += sum(1 for c in cyc if m.name in c)
    cols = ("modules", "lines", "cycles", "private", "fn>50", "fn>80", "fn imports", "unexplained")
    lines = [f"{'floor':<10}" + "".join(f"{c:>12}" for c in cols)]
    for f in [*FLOORS, "(top)"]:
        lines.append(f"{f:<10}" + "".join(f"{per[f, c]:>12}" for c in cols))
    long_modules = sorted(((m.lines, m.name) for m in tree.values() if m.lines > LONG_MODULE_LINES), reverse=True)
    lines += [
        "",
        f"import cycles between files (function-level imports included): {len(cyc)}",
        *(f"  {' <-> '.join(c)}" for c in cyc),
        f"private names imported across modules: {len(priv)}",
        *(f"  {i.importer}:{i.line} takes {i.name or i.target} from {i.target}" for i in priv),
        f"imports of spectui.cli from outside it: {len(cli_importers(tree))}",
        f"function-level imports: {fn_imports} ({1000 * fn_imports / max(1, lines_total):.2f} per 1,000 lines)",
        "",
        "sizes, to look at (a long module or function may hold two jobs; one concept may simply be large):",
        f"functions over {LONG_FUNCTION_LINES} lines: {sum(1 for *_, n in fns if n > LONG_FUNCTION_LINES)}",
        *(f"  {m}.{fn} ({n})" for m, fn, n in sorted(fns, key=lambda x: -x[2]) if n > LONG_FUNCTION_LINES),
        f"functions over {VERY_LONG_FUNCTION_LINES} lines: {sum(1 for *_, n in fns if n > VERY_LONG_FUNCTION_LINES)}",
        f"modules over {LONG_MODULE_LINES} lines: {len(long_modules)}",
        *(f"  {name} ({n})" for n, name in long_modules),
        f"SpectuiApp methods: {len(app_methods())}",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())


def test_no_two_test_files_share_a_name():
    """pytest imports test files by their base name (no packages under tests/): two files of one name in
    different folders stop the whole run at collection ('import file mismatch')."""
    names: dict[str, list[str]] = {}
    for path in Path(__file__).resolve().parents[1].rglob("test_*.py"):
        names.setdefault(path.name, []).append(str(path))
    assert {n: p for n, p in names.items() if len(p) > 1} == {}
