"""The layers: everything below the TUI runs without it (no textual, no rich), imports run one way, and the
wheel carries the bundled data."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BELOW_THE_UI = ("core", "backends", "store", "machine", "labs", "run")


def test_everything_below_the_ui_imports_no_textual_or_rich():
    # rich is checked by import-linter's forbidden contract (our own imports): at run time httpx's CLI
    # module pulls rich in by itself whenever click is installed, which says nothing about spectui
    code = (
        "import sys, pkgutil, importlib\n"
        f"for pkg in {BELOW_THE_UI!r}:\n"
        "    p = importlib.import_module('spectui.' + pkg)\n"
        "    for m in pkgutil.walk_packages(p.__path__, p.__name__ + '.'):\n"
        "        try: importlib.import_module(m.name)\n"
        # a module run only in an environment of its own (labs/drafts/eagle3_*: torch) is not spectui's to load
        "        except ModuleNotFoundError as e:\n"
        "            if e.name.startswith('spectui'): raise\n"
        "import spectui.cli.main, spectui.cli.compare, spectui.cli.sweep, spectui.cli.theory, spectui.cli.machine\n"
        "bad = [m for m in sys.modules if m.split('.')[0] == 'textual']\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_import_contracts_hold():
    """import-linter's contracts in pyproject.toml: cli → tui → run → labs → store → machine → backends → core."""
    exe = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(exe)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "broken" in r.stdout and "0 broken" in r.stdout


def test_ruff_lint_and_format_are_clean():
    exe = Path(sys.executable).with_name("ruff")
    r = subprocess.run([str(exe), "check", "spectui", "tests", "bench"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:]
    r = subprocess.run(
        [str(exe), "format", "--check", "spectui", "tests", "bench"], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 0, r.stdout[-3000:]


def test_nothing_imports_cli():
    offenders = []
    for p in (ROOT / "spectui").rglob("*.py"):
        if "cli" in p.relative_to(ROOT / "spectui").parts[:1] or p.name == "__main__.py":
            continue
        text = p.read_text(encoding="utf-8")
        if "spectui.cli" in text:
            offenders.append(str(p.relative_to(ROOT)))
    assert not offenders, offenders


def test_themes_and_profiles_are_in_the_wheel(tmp_path):
    import zipfile

    # hatchling is installed by `make test` (the test extra), so no package index is needed here
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    [whl] = tmp_path.glob("spectui-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    assert any(n.startswith("spectui/themes/") and n.endswith(".toml") for n in names)
    assert any(n.startswith("spectui/profiles/") and n.endswith(".toml") for n in names)
    assert any(n.startswith("spectui/prompts/") for n in names)


def test_bundled_themes_load():
    from spectui.store.locations import resource_dir
    from spectui.store.themes import load_themes

    loaded = load_themes([resource_dir("themes")])
    assert not loaded.problems
    names = {t.name for t in loaded.themes}
    assert {"spectui-dark", "spectui-light", "spectui-colourblind"} <= names
    for t in loaded.themes:
        assert set(t.marks) == {"accepted", "target", "first", "rejected", "diverge"}


def test_broken_theme_is_reported_and_skipped(tmp_path):
    from spectui.store.themes import load_themes

    (tmp_path / "bad.toml").write_text("name = \n")
    (tmp_path / "worse.toml").write_text('name = "x"\n[colors]\nprimary = "red"\n')
    (tmp_path / "ok.toml").write_text('name = "ok"\n[colors]\nprimary = "#123456"\n')
    loaded = load_themes([tmp_path])
    assert [t.name for t in loaded.themes] == ["ok"]
    assert len(loaded.problems) == 2 and all("skipped" in p for p in loaded.problems)
