# spectui: `make demo` runs the main job, `make test` runs the tests; each sets everything up first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# pytest processes for `make test` and `make check` (pytest-xdist; 2 = the cores of the machine it was sized on)
TEST_WORKERS ?= 2
# The test targets let Python keep bytecode (__pycache__, ignored by git) even where the environment says
# PYTHONDONTWRITEBYTECODE=1, as container images often do: with it set, every pytest worker re-rewrote the
# asserts of every test module (collecting the suite: 16 CPU-s a worker, 6 with the cache) and every Python
# process a test starts recompiled spectui (editable install, so pip compiled none of it). Empty = unset
# (https://docs.python.org/3/using/cmdline.html#envvar-PYTHONDONTWRITEBYTECODE).
test check: export PYTHONDONTWRITEBYTECODE =

.PHONY: venv setup demo test check lint bench clean browser mutate

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

# llama-server built from pinned source, SmolLM2 and its Q2_K draft, all in the per-user cache
setup: $(STAMP)
	$(PY) -m spectui setup

demo: setup
	$(PY) -m spectui demo

# lint (ruff), the import layers (import-linter contracts in pyproject.toml) and types (mypy, [tool.mypy])
lint: $(STAMP)
	$(VENV)/bin/ruff check spectui tests bench
	$(VENV)/bin/ruff format --check spectui tests bench
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# the browser tests drive Debian's Chromium through Playwright (Playwright cannot fetch its own browsers)
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else echo "make test needs Debian's chromium: sudo apt-get install chromium" >&2; exit 1; fi; }

# the tests also run a real vLLM for CPU (its own environment in the cache, installed once)
# in TEST_WORKERS processes (pytest-xdist): a file's tests stay on one worker, with their module's servers
test: setup lint browser
	$(PY) -m spectui setup --vllm
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# the inner loop: lint and the fast tests (unit + contract), which need no server, model or browser built;
# first the house's report (import cycles, function-level imports, long modules and functions to look at)
check: lint
	$(PY) -m tests.unit.test_architecture
	$(PY) -m pytest -q -n $(TEST_WORKERS) tests/unit tests/contract

# mutation testing (mutmut) of the verdict and figure modules against the fast tests, one module at a time;
# slow (about an hour on 2 cores), so not part of `make test`; results and survivors in MUTATION.md
mutate: $(STAMP)
	$(PY) tests/mutate.py

bench: setup
	$(PY) bench/calibrate.py
	$(PY) bench/parse_throughput.py
	$(PY) bench/tui_keepup.py
	$(PY) bench/replay_100k.py
	$(PY) bench/long_sessions.py
	$(PY) bench/timing_fidelity.py
	$(PY) bench/startup.py
	$(PY) bench/probe_cost.py
	$(PY) bench/loadgen.py

clean:
	rm -rf $(VENV) build dist *.egg-info
