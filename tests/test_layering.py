"""The engine is the product's core and must run without the UI (no textual, no rich)."""

import subprocess
import sys


def test_engine_imports_no_textual_or_rich():
    code = (
        "import sys, pkgutil, importlib, spectui.engine as e\n"
        "for m in pkgutil.iter_modules(e.__path__): importlib.import_module('spectui.engine.' + m.name)\n"
        "import spectui.cli\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')]\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_themes_and_profiles_are_in_the_wheel(tmp_path):
    import zipfile

    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), "."],
                       capture_output=True, text=True)
    if r.returncode != 0 and "hatchling" in (r.stderr + r.stdout):
        r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), "."],
                           capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    [whl] = tmp_path.glob("spectui-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    assert any(n.startswith("spectui/themes/") and n.endswith(".toml") for n in names)
    assert any(n.startswith("spectui/profiles/") and n.endswith(".toml") for n in names)
    assert any(n.startswith("spectui/prompts/") for n in names)


def test_bundled_themes_load():
    from spectui.engine.themes import load_themes, resource_dir

    loaded = load_themes([resource_dir("themes")])
    assert not loaded.problems
    names = {t.name for t in loaded.themes}
    assert {"spectui-dark", "spectui-light", "spectui-colourblind"} <= names
    for t in loaded.themes:
        assert set(t.marks) == {"accepted", "target", "first", "rejected", "diverge"}


def test_broken_theme_is_reported_and_skipped(tmp_path):
    from spectui.engine.themes import load_themes

    (tmp_path / "bad.toml").write_text("name = \n")
    (tmp_path / "worse.toml").write_text('name = "x"\n[colors]\nprimary = "red"\n')
    (tmp_path / "ok.toml").write_text('name = "ok"\n[colors]\nprimary = "#123456"\n')
    loaded = load_themes([tmp_path])
    assert [t.name for t in loaded.themes] == ["ok"]
    assert len(loaded.problems) == 2 and all("skipped" in p for p in loaded.problems)
