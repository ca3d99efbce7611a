"""A quick kill check after `tests/mutate.py` has run: one test module's test functions, called directly (no
pytest collection, which took ~30 s a mutant on this loaded 2-core machine), against each named mutant
through mutmut's own switch (MUTANT_UNDER_TEST), one forked child per mutant; a test that fails kills it.
It runs only the one module, so it counts no more kills than `mutmut run` would (a lower bound); it supports
the `monkeypatch` fixture and @pytest.mark.parametrize, and refuses any other fixture and async tests
(the unmutated run then fails, and nothing is counted); a child still running after 60 s is killed (a timeout). Run from the run's
mutants/ folder, after copying the test module into mutants/tests/unit/:

    cd COPY/mutants && python ../tests/mutkill.py tests.unit.test_regress SURVIVORS.txt OUT.txt

SURVIVORS.txt: one mutant name a line (`tests/mutate.py --report` lists them); OUT.txt: name, killed or
survived, exit code. The unmutated code must pass the module first."""

import importlib
import inspect
import os
import signal
import sys

import pytest

sys.path.insert(0, os.getcwd())
modname, names_file, out = sys.argv[1:4]
mod = importlib.import_module(modname)
cases = []
for name, fn in vars(mod).items():
    if not (name.startswith("test_") and callable(fn)):
        continue
    marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]
    if marks:
        argnames, values = marks[0].args[0], marks[0].args[1]
        argnames = [a.strip() for a in argnames.split(",")] if isinstance(argnames, str) else list(argnames)
        for v in values:
            v = v.values if hasattr(v, "values") else v
            v = v if len(argnames) > 1 else (v,)
            cases.append((fn, dict(zip(argnames, v))))
    else:
        cases.append((fn, {}))


def run_all():
    for fn, kw in cases:
        params = inspect.signature(fn).parameters
        mp = pytest.MonkeyPatch()
        try:
            if "monkeypatch" in params:
                kw = {**kw, "monkeypatch": mp}
            unknown = set(params) - set(kw)
            if unknown or inspect.iscoroutinefunction(fn):  # never a test silently not run
                raise SystemExit(f"{fn.__name__}: async tests and fixture(s) {unknown or ''} are not supported")
            fn(**kw)
        finally:
            mp.undo()


def run(name):
    pid = os.fork()
    if pid == 0:
        os.environ["MUTANT_UNDER_TEST"] = name
        signal.alarm(60)  # a mutant that loops forever is killed by the timeout, as mutmut counts it
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        try:
            run_all()
        except BaseException:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


os.environ["MUTANT_UNDER_TEST"] = ""
print(f"{len(cases)} cases", flush=True)
base = run("none_at_all")
print("unmutated:", base, flush=True)
if base != 0:
    sys.exit("the unmutated code fails the tests: no check possible")
names = [n.strip() for n in open(names_file) if n.strip()]
with open(out, "w") as f:
    for n in names:
        code = run(n)
        f.write(f"{n} {'killed' if code != 0 else 'survived'} {code}\n")
        f.flush()
