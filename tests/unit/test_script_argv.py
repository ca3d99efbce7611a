"""A script of spectui's run by another environment's Python (the GGUF → Hugging Face conversion under the vLLM
environment) must not see its own folder first on sys.path: spectui/machine/gguf.py stood in for the `gguf`
package transformers imports, and a fresh `spectui setup --vllm` failed with "No module named 'spectui'"."""

import subprocess
import sys
from pathlib import Path

from spectui.machine import assets
from spectui.machine.assets import script_argv


def test_a_script_beside_a_module_named_like_a_package_imports_the_package(tmp_path):
    # a folder like spectui/machine: a module named like an installed package, and a script that imports it
    (tmp_path / "json.py").write_text("raise ImportError('the script folder shadowed the json package')\n")
    script = tmp_path / "convert.py"
    script.write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    r = subprocess.run(script_argv(Path(sys.executable), script, "in.gguf", tmp_path / "out"), capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().strip() == f'["in.gguf", "{tmp_path / "out"}"]'


def test_the_conversion_script_has_a_package_named_module_beside_it():
    # why the flag matters here: the converter's folder holds gguf.py, the name of the package transformers loads
    machine = Path(assets.__file__).parent
    assert (machine / "gguf_to_hf.py").exists() and (machine / "gguf.py").exists()
