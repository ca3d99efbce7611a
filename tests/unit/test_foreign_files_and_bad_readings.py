"""No command writes over a file not its own; unreadable files, odd readings and servers that ignore
max_tokens are one line or no figure: each case failed (a damaged file, a traceback, a wrong figure) before
its fix. Expected values are written from the input, not read back from spectui's output."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from spectui.cli.main import main
from tests.recorded_server import RecordedServer
from tests.recordings import BASELINE, DATA, DRAFT, payloads

SESSION = DATA / "session-draft-quick2-repeat2.jsonl"


# -- item 1: a command writes only a file that is its own (or new) ------------------------------------------
def _victims(root: Path, certificate: Path) -> dict[str, Path]:
    """Files a mistyped output path may name: a model, a user's notes, a session, a certificate."""
    root.mkdir(parents=True, exist_ok=True)
    gguf = root / "model.gguf"
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(range(256)) * 12)  # holds newlines, no final one
    notes = root / "notes.txt"
    notes.write_bytes(b"my notes\nthe last line, with no newline")
    session = root / "run.jsonl"
    shutil.copyfile(SESSION, session)
    cert = root / "certificate.json"
    shutil.copyfile(certificate, cert)
    return {"gguf": gguf, "text": notes, "session": session, "certificate": cert}


class Tokenizing(RecordedServer):
    """The recorded server, answering /tokenize too (the sweep predicts from the prompt's length)."""

    async def _answer(self, path: str, writer) -> None:
        if path != "/tokenize":
            return await super()._answer(path, writer)
        body = json.dumps({"tokens": list(range(12))}).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
        writer.write(body)
        await writer.drain()


@pytest.fixture(autouse=True)
def no_prediction(monkeypatch):
    """The sweep's batch-time prediction launches llama-servers of its own: not in a unit test."""

    async def none(*a, **k):
        return None

    monkeypatch.setattr("spectui.labs.sweep.predict.predict_levels", none)


@pytest.fixture(scope="module")
def servers():
    with Tokenizing(payloads(BASELINE)) as b, Tokenizing(payloads(DRAFT)) as c:
        yield b, c


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    from tests.unit.test_certificate_merge import shard

    root = tmp_path_factory.mktemp("shards")
    return [shard(root / "s1", 1), shard(root / "s2", 2)]


def _pair(servers) -> list[str]:
    b, c = servers
    return ["--baseline", b.url, "--candidate", c.url, "--backend", "llama.cpp"]


def _prompts(tmp: Path) -> str:
    p = tmp / "prompts.toml"
    p.write_text('[[prompt]]\nid = "fizz"\ntext = "fizzbuzz"\n[[prompt]]\nid = "buzz"\ntext = "buzz fizz"\n')
    return str(p)


# (command, the victim kinds that are NOT its own: a session is --save's own, a certificate merge's)
WRITERS = {
    "report -o": ("gguf", "text", "session", "certificate"),
    "compare --save": ("gguf", "text", "certificate"),
    "compare --notebook": ("gguf", "text", "session", "certificate"),
    "sampling --save": ("gguf", "text", "certificate"),
    "sweep --save": ("gguf", "text", "session", "certificate"),
    "sweep --svg": ("gguf", "text", "session", "certificate"),
    "drafts data -o": ("gguf", "text", "session", "certificate"),
    "merge -o": ("gguf", "text", "session"),
}


def _argv(writer: str, victim: Path, servers, shards, tmp: Path) -> list[str]:
    pair = _pair(servers)
    one = ["--prompt", "fizzbuzz", "--max-tokens", "8"]
    data = ["--prompts", _prompts(tmp), "--max-tokens", "8", "--holdout", "0"]
    return {
        "report -o": ["report", str(SESSION), "--format", "md", "-o", str(victim)],
        "compare --save": ["compare", *pair, *one, "--save", str(victim)],
        "compare --notebook": ["compare", *pair, *one, "--notebook", str(victim)],
        "sampling --save": ["sampling", *pair, *one, "--samples", "2", "--save", str(victim)],
        "sweep --save": ["sweep", *pair, "--prompts", _prompts(tmp), "--concurrency", "1", "--save", str(victim)],
        "sweep --svg": ["sweep", *pair, "--prompts", _prompts(tmp), "--concurrency", "1", "--svg", str(victim)],
        "drafts data -o": ["drafts", "data", "--baseline", servers[0].url, *data, "-o", str(victim)],
        "merge -o": ["merge", *shards, "-o", str(victim)],
    }[writer]


CASES = [
    pytest.param(
        w,
        v,
        id=f"{w} at a {v}",
    )
    for w, kinds in WRITERS.items()
    for v in kinds
]


@pytest.mark.parametrize(("writer", "kind"), CASES)
def test_no_command_writes_over_a_file_that_is_not_its_own(writer, kind, servers, shards, tmp_path, capsys):
    victims = _victims(tmp_path / "v", Path(shards[0]))
    before = {p: p.read_bytes() for p in victims.values()}
    listing = sorted(p.name for p in (tmp_path / "v").iterdir())
    code = main(_argv(writer, victims[kind], servers, shards, tmp_path))
    err = capsys.readouterr().err
    assert {p: p.read_bytes() for p in victims.values()} == before, (writer, kind, err)
    assert sorted(p.name for p in (tmp_path / "v").iterdir()) == listing, "a file was added beside it"
    assert code != 0 and "Traceback" not in err
    assert len([ln for ln in err.splitlines() if ln.startswith("spectui: error:")]) == 1, err


@pytest.mark.parametrize("writer", list(WRITERS))
def test_each_writer_writes_a_new_file(writer, servers, shards, tmp_path, capsys):
    """The control for the test above: given a new path, each command runs to the write."""
    out = tmp_path / "new" / ("out.jsonl" if writer != "merge -o" else "merged.json")
    code = main(_argv(writer, out, servers, shards, tmp_path))
    err = capsys.readouterr().err
    assert code == 0 and out.is_file() and out.stat().st_size > 0, err


def test_a_commands_own_files_are_still_written(servers, tmp_path, capsys):
    """The check refuses only what is not the command's own: a report over a report, a session appended
    to, a notebook appended to, an empty file."""
    report, session, nb, empty = tmp_path / "r.md", tmp_path / "s.jsonl", tmp_path / "nb.toml", tmp_path / "e.svg"
    report.write_text("# spectui comparison\n\nan older report\n")
    shutil.copyfile(SESSION, session)
    nb.write_text("")
    empty.write_bytes(b"")
    assert main(["report", str(SESSION), "--format", "md", "-o", str(report)]) == 0
    assert "an older report" not in report.read_text()
    lines = len(session.read_bytes().splitlines())
    argv = ["compare", *_pair(servers), "--prompt", "fizzbuzz", "--max-tokens", "8"]
    assert main([*argv, "--save", str(session), "--notebook", str(nb)]) == 0
    assert len(session.read_bytes().splitlines()) > lines and "[[measurement]]" in nb.read_text()
    assert main([*argv, "--notebook", str(nb)]) == 0  # a notebook with a measurement is its own too
    assert nb.read_text().count("[[measurement]]") == 2
    capsys.readouterr()


def test_drafts_data_resumes_a_file_whose_only_line_was_torn(tmp_path):
    from spectui.labs.drafts import data as drafts_data

    out = tmp_path / "d.jsonl"
    out.write_bytes(b'{"id": "a", "messages": [{"role": "us')  # killed inside its first write
    drafts_data.check_own(out)  # its own: no error
    out.write_bytes(b'{"format":"spectui-session","version":1}\n')
    with pytest.raises(Exception, match="not a drafts data file"):
        drafts_data.check_own(out)
    held = drafts_data.heldout_path(tmp_path / "e.jsonl")
    held.write_text("[profile]\nname = 'mine'\n")
    with pytest.raises(Exception, match="held-out set"):
        drafts_data.check_own(tmp_path / "e.jsonl")
    assert held.read_text() == "[profile]\nname = 'mine'\n"


# -- item 2: one bad file in a folder never takes the listing down --------------------------------------------
def _bad_folder(root: Path, suffix: str, good: bytes) -> tuple[Path, set[str]]:
    """A folder with one good file and every odd kind of entry a folder can hold under the same suffix."""
    import os

    root.mkdir()
    (root / f"good{suffix}").write_bytes(good)
    os.mkfifo(root / f"fifo{suffix}")  # opening it for reading blocks until a writer comes: never
    (root / f"dangling{suffix}").symlink_to(root / "nowhere")
    (root / f"zero{suffix}").symlink_to("/dev/zero")  # an endless first line
    (root / f"folder{suffix}").mkdir()
    return root, {f"fifo{suffix}", f"dangling{suffix}", f"zero{suffix}", f"folder{suffix}"}


def _within(seconds: float, fn):
    """fn() in a thread, failing (not hanging) the test if it blocks: a FIFO opened for reading does."""
    import threading

    box: dict = {}
    t = threading.Thread(target=lambda: box.setdefault("v", fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "blocked on a file that is not a regular one"
    return box["v"]


def test_the_sessions_listing_skips_what_is_not_a_regular_file(tmp_path):
    from spectui.store.session_list import list_sessions

    folder, odd = _bad_folder(tmp_path / "s", ".jsonl", SESSION.read_bytes())
    rows = _within(30, lambda: list_sessions(folder))
    by_name = {r.path.name: r for r in rows}
    assert by_name["good.jsonl"].problem is None and by_name["good.jsonl"].runs > 0
    for name in odd:
        assert name in by_name and "not a regular file" in by_name[name].problem, name
        assert "\n" not in by_name[name].line()


def test_spectui_sessions_on_a_bad_folder_lists_the_good_one(tmp_path):
    import subprocess
    import sys

    folder, odd = _bad_folder(tmp_path / "s", ".jsonl", SESSION.read_bytes())
    r = subprocess.run([sys.executable, "-m", "spectui", "sessions", str(folder)], capture_output=True,
                       text=True, timeout=30, cwd=Path(__file__).resolve().parents[2])  # fmt: skip
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stdout.splitlines()) == 1 + len(odd) and "good.jsonl" in r.stdout


def test_spectui_tui_exits_non_zero_when_the_app_died(monkeypatch):
    """The app dies of an error (as Ctrl+L on a dangling link did): the command's status says so."""
    from textual.app import App

    from spectui.cli import tui as tui_cli
    from spectui.store.session import load_session

    class Headless(App):
        def run(self, **kw):
            return super().run(headless=True)

    class Dies(Headless):
        def on_mount(self) -> None:
            raise FileNotFoundError("a session that vanished")

    class Lives(Headless):
        def on_mount(self) -> None:
            self.exit()

    monkeypatch.setattr(tui_cli, "make_app", lambda config: Dies())
    assert tui_cli.run_replay(load_session(SESSION), "max") == 1
    monkeypatch.setattr(tui_cli, "make_app", lambda config: Lives())
    assert tui_cli.run_replay(load_session(SESSION), "max") == 0


PROFILE = (
    'name = "mine"\n[hardware]\nmin_memory_gib = {mem}\n[[comparison]]\nid = "c"\n'
    'baseline = {{ backend = "llama.cpp", argv = ["x"], port = {bport}, host = "{host}" }}\n'
    'candidate = {{ backend = "llama.cpp", argv = ["x"], port = {cport} }}\n'
)


def _good_profile(**kw) -> str:
    return PROFILE.format(**{"mem": 1, "bport": 0, "cport": 0, "host": "127.0.0.1", **kw})


def _odd_entries(root: Path, suffix: str) -> set[str]:
    """Random bytes, a folder, a FIFO, a link to /dev/zero and a dangling link, all named *suffix."""
    import os

    (root / f"random{suffix}").write_bytes(bytes([0xFF, 0xFE, 0x80, 0x00, 0xC3]) * 20)
    (root / f"folder{suffix}").mkdir()
    os.mkfifo(root / f"fifo{suffix}")
    (root / f"zero{suffix}").symlink_to("/dev/zero")
    (root / f"dangling{suffix}").symlink_to(root / "nowhere")
    return {f"random{suffix}", f"folder{suffix}", f"fifo{suffix}", f"zero{suffix}", f"dangling{suffix}"}


def test_unreadable_profile_files_are_one_line_each_and_the_others_load(tmp_path):
    from spectui.store.profiles import load_profiles

    (tmp_path / "good.toml").write_text(_good_profile())
    odd = _odd_entries(tmp_path, ".toml")
    profiles, problems = _within(30, lambda: load_profiles([tmp_path]))
    assert list(profiles) == ["mine"]
    for name in odd:
        [line] = [p for p in problems if name in p]
        assert "\n" not in line and "skipped" in line, line


def test_profiles_list_with_a_bad_user_file_is_no_traceback(tmp_path):
    import subprocess
    import sys

    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "good.toml").write_text(_good_profile())
    (tmp_path / "profiles" / "x.toml").write_bytes(bytes(range(128, 256)))
    (tmp_path / "profiles" / "dir.toml").mkdir()
    r = subprocess.run([sys.executable, "-m", "spectui", "profiles", "list"], capture_output=True, text=True,
                       timeout=60, env={**__import__("os").environ, "SPECTUI_CONFIG_DIR": str(tmp_path)})  # fmt: skip
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "mine" in r.stdout and "x.toml is not UTF-8" in r.stderr and "dir.toml is not a regular file" in r.stderr


def test_unreadable_theme_files_are_one_line_each_and_the_others_load(tmp_path):
    from spectui.store.themes import load_themes

    (tmp_path / "good.toml").write_text('name = "mine"\n[colors]\nprimary = "#123456"\n')
    odd = _odd_entries(tmp_path, ".toml")
    loaded = _within(30, lambda: load_themes([tmp_path]))
    assert [t.name for t in loaded.themes] == ["mine"]
    for name in odd:
        [line] = [p for p in loaded.problems if name in p]
        assert "\n" not in line and "skipped" in line, line


def test_the_prompt_set_picker_offers_only_regular_files(tmp_path, monkeypatch):
    from spectui.store import prompts

    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path))
    d = tmp_path / "prompts"
    d.mkdir()
    (d / "mine.toml").write_text('[[prompt]]\nid = "a"\ntext = "hello"\n')
    _odd_entries(d, ".toml")
    yours = [label for label, _ in prompts.available_sets() if "(yours)" in label]
    assert yours == ["mine (yours)", "random (yours)"]  # random bytes: a regular file, refused when loaded
    with pytest.raises(Exception, match="not a regular file"):
        prompts.load_set(str(d / "fifo.toml"))


# -- items 6 and 9: profile values ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kw", "key"),
    [
        ({"mem": "nan"}, "min_memory_gib"),
        ({"mem": "inf"}, "min_memory_gib"),
        ({"bport": 22}, "port"),
        ({"bport": 8090, "cport": 8090}, "candidate.port"),
    ],
)
def test_nonsense_profile_numbers_are_one_line_naming_the_key(kw, key):
    from spectui.core.errors import InputError
    from spectui.store.profiles import parse_profile

    with pytest.raises(InputError, match=key):
        parse_profile(_good_profile(**kw), "p.toml")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "myhost.example"])
def test_a_profile_binding_beyond_this_machine_warns(host):
    from spectui.store.profiles import parse_profile

    p = parse_profile(_good_profile(host=host), "p.toml")
    assert any("baseline.host" in w and "other machines" in w for w in p.warnings), p.warnings
    for local in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert not any("host" in w for w in parse_profile(_good_profile(host=local), "p.toml").warnings)


def test_profiles_show_says_a_profile_binds_every_interface(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "open.toml").write_text(_good_profile(host="0.0.0.0"))
    for action in ("show", "check"):
        r = subprocess.run([sys.executable, "-m", "spectui", "profiles", action, "mine"], capture_output=True,
                           text=True, timeout=60, env={**os.environ, "SPECTUI_CONFIG_DIR": str(tmp_path)})  # fmt: skip
        assert "'0.0.0.0' lets other machines reach" in r.stderr, (action, r.stderr)


# -- item 3: the --repeat summary counts only measured runs --------------------------------------------------
class CutOn(RecordedServer):
    """The recorded candidate, whose /completion number `n` (1-based) in `cut` is cut mid-stream."""

    def __init__(self, stream, cut: set[int]) -> None:
        super().__init__(stream)
        self.cut = cut

    async def _answer(self, path: str, writer) -> None:
        if path == "/completion":
            self.cut_after = len(self.payloads) // 2 if self.requests + 1 in self.cut else None
        return await super()._answer(path, writer)


def _repeat(capsys, cut: set[int], runs: int, *extra) -> tuple[int, str]:
    with RecordedServer(payloads(BASELINE)) as b, CutOn(payloads(DRAFT), cut) as c:
        argv = ["compare", "--baseline", b.url, "--candidate", c.url, "--backend", "llama.cpp", "--prompt", "fizzbuzz"]
        code = main([*argv, "--repeat", str(runs), *extra])
    return code, capsys.readouterr().out


def test_a_failed_run_is_not_counted_in_the_repeat_summary(capsys):
    code, out = _repeat(capsys, {2}, 3)
    summary = out[out.index("repeated runs") :]
    assert "identical in 2 of 3 runs; 1 not compared (failed)" in summary, summary
    assert "(2 runs)" in summary and "1 of 3 runs failed (run 2), not counted" in summary, summary
    assert "identical in every run" not in summary
    code, out = _repeat(capsys, {2}, 3, "--json")
    [rep] = json.loads(out)["repeats"]
    assert rep["failed_runs"] == [2] and rep["compared_runs"] == 2
    assert rep["speedup"]["n"] == 2 and rep["decode_tps"]["candidate"]["n"] == 2


def test_a_prompt_whose_every_run_failed_is_not_called_identical(capsys):
    code, out = _repeat(capsys, {1, 2}, 2)
    summary = out[out.index("repeated runs") :]
    assert "not compared: no run finished on both sides (2 runs)" in summary, summary
    assert "identical in every run" not in summary
    assert "candidate decode tok/s —" in summary, summary  # the cut runs' partial rate is not its rate
    assert "rendered the chat template differently" not in out


# -- item 4: limits hold in every driver ---------------------------------------------------------------------
class Misbehaving(RecordedServer):
    """A llama-server look-alike whose /completion never ends by itself: `keepalive` sends only SSE comments,
    else it streams the recorded first token every `every` seconds and ignores max_tokens. It stops after
    `give_up` seconds, so a test that failed does not leave it streaming."""

    def __init__(self, keepalive: bool = False, every: float = 0.0, give_up: float = 60.0) -> None:
        super().__init__(payloads(BASELINE))
        self.keepalive, self.every, self.give_up = keepalive, every, give_up
        self.sent = 0  # tokens sent, over every request

    async def _answer(self, path: str, writer) -> None:
        if path != "/completion":
            return await super()._answer(path, writer)
        import time

        self.requests += 1
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        token = dict(self.payloads[0])
        end = time.monotonic() + self.give_up
        while time.monotonic() < end:
            if self.keepalive:
                data = b": keep-alive\n\n"
            else:
                token["tokens_predicted"] = self.sent + 1
                data = f"data: {json.dumps(token)}\n\n".encode()
                self.sent += 1
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()
            await asyncio.sleep(self.every if not self.keepalive else 0.2)
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def test_a_server_ignoring_max_tokens_is_stopped_and_named_in_compare(capsys):
    with RecordedServer(payloads(BASELINE)) as b, Misbehaving(give_up=10) as c:
        argv = ["compare", "--baseline", b.url, "--candidate", c.url, "--backend", "llama.cpp"]
        code = main([*argv, "--prompt", "fizzbuzz", "--max-tokens", "8", "--json", "--deadline", "60"])
    doc = json.loads(capsys.readouterr().out)
    cand = doc["prompts"][0]["candidate"]
    assert code != 0 and "overran max_tokens=8" in (cand["failed"] or ""), cand["failed"]
    from spectui.core.runner import OVERRUN_MARGIN

    assert cand["tokens"] == 8 + OVERRUN_MARGIN  # read up to the margin, then the connection dropped


def test_a_server_ignoring_max_tokens_is_stopped_in_the_sweep(tmp_path, capsys):
    with RecordedServer(payloads(BASELINE)) as b, Misbehaving(give_up=10) as c:
        argv = ["sweep", "--baseline", b.url, "--candidate", c.url, "--backend", "llama.cpp", "--json"]
        main([*argv, "--prompts", _prompts(tmp_path), "--concurrency", "1", "--max-tokens", "8", "--deadline", "60"])
    level = json.loads(capsys.readouterr().out)["levels"][0]
    assert level["verdicts"][0]["status"] == "failed", level["verdicts"]
    assert "overran max_tokens=8" in json.dumps(level), level


# -- item 7: every number of a model header checked at the reader, one line naming file and key ---------------
def _gguf_with(tmp_path: Path, name: str, tail: bytes = b"", version: int = 3, **kv) -> Path:
    from tests.unit.test_gguf import GOOD, _gguf

    keys = {**GOOD, "llama.feed_forward_length": 256, "llama.vocab_size": 1000, **kv}
    head = _gguf(tmp_path / f"{name}.gguf", keys).read_bytes()
    import struct

    n_kv = len(keys) + (1 if tail else 0)
    path = tmp_path / f"{name}.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", version, 0, n_kv) + head[24:] + tail)
    return path


def _config(tmp_path: Path, name: str, text: str) -> Path:
    base = {"architectures": ["LlamaForCausalLM"], "hidden_size": 576, "num_hidden_layers": 30,
            "num_attention_heads": 9, "num_key_value_heads": 3, "intermediate_size": 1536, "vocab_size": 49152}  # fmt: skip
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(text.replace("BASE", json.dumps(base)[1:-1]))
    return folder


def _headers(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    import struct

    from tests.unit.test_gguf import _s

    nested = _s("x.nested") + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 200_000 + struct.pack("<IQ", 4, 0)
    return {
        "gguf nested arrays": (_gguf_with(tmp_path, "nested", nested), "damaged or truncated"),
        "gguf version 99": (_gguf_with(tmp_path, "v99", version=99), "GGUF version 99"),
        "gguf 100000 heads": (_gguf_with(tmp_path, "heads", **{"llama.attention.head_count": 100_000}), "head_count"),
        "config 100k deep": (_config(tmp_path, "deep", "[" * 100_000 + "]" * 100_000), "nests too deeply"),
        "config tie 'false'": (_config(tmp_path, "tie", '{BASE, "tie_word_embeddings": "false"}'), "tie_word_emb"),
        "config heads of 0": (
            _config(
                tmp_path,
                "h0",
                '{BASE, "num_attention_heads": 100000, "head_dim": 0}'.replace('"num_attention_heads": 9, ', ""),
            ),
            "num_attention_heads",
        ),  # fmt: skip
        "config bias 1": (_config(tmp_path, "bias", '{BASE, "attention_bias": "yes"}'), "attention_bias"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "gguf nested arrays",
        "gguf version 99",
        "gguf 100000 heads",
        "config 100k deep",
        "config tie 'false'",
        "config heads of 0",
        "config bias 1",
    ],  # fmt: skip
)
def test_drafts_cost_on_a_malformed_header_is_one_line(case, tmp_path, capsys):
    path, said = _headers(tmp_path)[case]
    code = main(["drafts", "cost", "--target", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    [line] = [ln for ln in err.splitlines() if ln.strip()]
    assert line.startswith("spectui: error: ") and str(path.name) in line and said in line, line


def test_train_lookup_refuses_a_model_that_is_not_a_gguf_before_any_server(tmp_path, capsys):
    notes = tmp_path / "notes.gguf"
    notes.write_text("not a model\n")
    code = main(["drafts", "train-lookup", "--model", str(notes), "--prompts", "default", "-o", str(tmp_path / "o")])
    assert code == 2 and "is not a GGUF model file" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# -- item 9: the rest ----------------------------------------------------------------------------------------
def test_an_nvml_reading_that_does_not_add_up_is_not_a_figure():
    from spectui.machine.probes import GPUProbe
    from tests.fakes import FakeNVML

    gib = 1024**3
    probe = GPUProbe(FakeNVML(gpus=[("GPU A", 8 * gib, 14 * gib, 5), ("GPU B", 8 * gib, 2 * gib, 5)]))
    a, b = probe.sample()
    assert (a.memory_used, a.memory_total, a.memory_free) == (None, None, None)  # used > total: N/A, never -6 GiB
    assert (b.memory_used, b.memory_total, b.memory_free) == (2 * gib, 8 * gib, 6 * gib)
    assert probe.memory(0) is None and probe.memory(1).free == 6 * gib


def test_escape_codes_in_a_gpu_name_never_reach_the_terminal():
    from spectui.machine.probes import GPUProbe
    from tests.fakes import FakeNVML

    [g] = GPUProbe(FakeNVML(gpus=[("NVIDIA \x1b[2J\x1b]0;pwned\x07H200\n", 1024**3, 0, 0)])).sample()
    assert g.name.isprintable() and "\x1b" not in g.name and "H200" in g.name


def test_a_slot_reply_without_a_count_is_an_error_not_a_question_mark():
    from spectui.backends.llamacpp import slot_result
    from spectui.core.errors import ServerError

    with pytest.raises(ServerError, match="n_saved = 'many'"):
        slot_result("save", 0, "f.bin", {"n_saved": "many", "n_written": 10})
    assert slot_result("save", 0, "f.bin", {"n_saved": 12, "n_written": 10}).tokens == 12


def test_a_verdict_that_is_a_string_is_called_unreadable_not_missing(tmp_path, capsys):
    lines, edited = [], False
    for line in SESSION.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("type") == "result" and not edited:
            rec["verdict"], edited = "identical", True
        lines.append(json.dumps(rec))
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["replay", str(path), "--no-tui"]) == 0
    err = capsys.readouterr().err
    assert "the recorded verdict is unreadable (str: 'identical')" in err and "no verdict was recorded" not in err
