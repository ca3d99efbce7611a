"""spectui drafts data: records of every format read back (spectui's own prompt readers, and the trainers'
record shapes), the held-out split, duplicates, resuming, a killed run leaving no half record."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from spectui.backends.base import Capabilities
from spectui.core.errors import InputError
from spectui.core.events import StreamFinished, StreamStarted, TokenEvent
from spectui.core.types import GenerationParams, Prompt, ServerInfo
from spectui.labs.drafts import data as drafts_data
from spectui.store import prompt_files, prompts


class FakeTarget:
    """A server stand-in: ChatML rendering, one token per character of a fixed answer, token ids = bytes."""

    kind = "fake"
    url = "http://fake"
    capabilities = Capabilities(token_ids=True)

    def __init__(self, delay: float = 0.0, fail: set[str] | None = None) -> None:
        self.info = ServerInfo(url=self.url, backend="fake", build="b0", model="fake.gguf")
        self.delay = delay
        self.fail = fail or set()
        self.asked: list[str] = []

    async def render_chat(self, messages):
        return "".join(f"<|{m['role']}|>{m['content']}\n" for m in messages) + "<|assistant|>"

    async def stream(self, prompt, params):
        self.asked.append(prompt)
        if self.delay:
            await asyncio.sleep(self.delay)
        yield StreamStarted(time.perf_counter_ns(), prompt)
        if any(f in prompt for f in self.fail):
            from spectui.core.events import StreamFailed

            yield StreamFailed(time.perf_counter_ns(), "server said 500")
            return
        answer = f"answer to {len(prompt)} chars: ünïcode ✓"
        for i, ch in enumerate(answer):
            yield TokenEvent(i, ord(ch), ch.encode(), time.perf_counter_ns(), "target")
        yield StreamFinished(time.perf_counter_ns(), "eos", {})

    async def counters(self):
        return None

    def recorded_verdict(self):
        return None

    async def tokenize(self, text):
        return [ord(c) for c in text]


CHATS = [
    Prompt("a", "t", messages=[{"role": "user", "content": "first question"}]),
    Prompt("b", "t", messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "second"}]),
    Prompt(
        "c",
        "t",
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "third"},
        ],
    ),
    Prompt("d", "t", messages=[{"role": "user", "content": "fourth"}]),
    Prompt("dup-of-a", "t", messages=[{"role": "user", "content": "first question"}]),
]
PARAMS = GenerationParams(max_tokens=64, cache_prompt=False)


def run(coro):
    return asyncio.run(coro)


def lines(path: Path) -> list[dict]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    return [json.loads(x) for x in raw.splitlines()]


def test_plan_drops_duplicates_and_holds_out_the_same_prompts_in_any_order():
    p = drafts_data.plan(CHATS, 0.25)
    assert p.duplicates == ["dup-of-a"]
    assert len(p.heldout) == 1 and len(p.train) == 3
    again = drafts_data.plan(list(reversed(CHATS)), 0.25)
    key = drafts_data.prompt_key  # the same content held out (a repeat keeps whichever came first)
    assert {key(x) for x in again.heldout} == {key(x) for x in p.heldout}
    assert not {x.id for x in p.heldout} & {x.id for x in p.train}
    assert drafts_data.plan(CHATS, 0).heldout == []
    with pytest.raises(InputError):
        drafts_data.plan(CHATS, 1.0)


def test_sharegpt_reads_back_through_spectuis_prompt_reader(tmp_path):
    out = tmp_path / "data.jsonl"
    target = FakeTarget()
    r = run(drafts_data.generate(target, CHATS, out, "sharegpt", PARAMS, holdout=0.25, source="test"))
    assert r.written == 3 and r.duplicates == ["dup-of-a"] and not r.failed
    recs = lines(out)
    # spectui reads its own output as a prompt file: the prompt is the conversation before the answer
    _, back = prompt_files.load(out)
    originals = {p.id: p for p in CHATS}
    for p, rec in zip(back, recs):
        assert p.messages == originals[p.id].messages
        assert drafts_data.answer_of(rec).startswith("answer to ")
    # the held-out prompts are a prompt set spectui compare reads
    name, held = prompts.load_set(str(r.heldout))
    assert [h.messages for h in held] == [originals[h.id].messages for h in held]
    assert {h.id for h in held}.isdisjoint({p.id for p in back})


def test_sharegpt_records_are_what_specforge_and_speculators_read(tmp_path):
    out = tmp_path / "sg.jsonl"
    run(drafts_data.generate(FakeTarget(), CHATS, out, "sharegpt", PARAMS, holdout=0))
    for rec in lines(out):
        # SpecForge's sharegpt preset with --data-path: an id and conversations of from/value
        assert set(rec) == {"id", "conversations"} and isinstance(rec["id"], str)
        assert all(
            set(t) == {"from", "value"} and t["from"] in ("system", "human", "gpt") for t in rec["conversations"]
        )
        assert rec["conversations"][-1]["from"] == "gpt" and rec["conversations"][-2]["from"] == "human"


@pytest.mark.parametrize("fmt", ["conversations", "messages"])
def test_role_content_formats(tmp_path, fmt):
    out = tmp_path / "conv.jsonl"
    run(drafts_data.generate(FakeTarget(), CHATS, out, fmt, PARAMS, holdout=0))
    recs = lines(out)
    assert [r["id"] for r in recs] == ["a", "b", "c", "d"]
    for rec, p in zip(recs, CHATS):
        assert set(rec) == {"id", fmt}
        turns = rec[fmt]
        assert turns[:-1] == p.messages
        assert turns[-1]["role"] == "assistant" and turns[-1]["content"].endswith("ünïcode ✓")


def test_speculators_rows_hold_exact_ids_and_mask(tmp_path):
    out = tmp_path / "spec.jsonl"
    raw = [*CHATS[:2], Prompt("r", "raw", raw="def fib(n):")]
    run(drafts_data.generate(FakeTarget(), raw, out, "speculators", PARAMS, holdout=0))
    for rec in lines(out):
        assert rec["id"] == f"{rec['primary_id']}_gen0"
        n_prompt = rec["loss_mask"].index(1)
        assert len(rec["input_ids"]) == len(rec["loss_mask"]) and set(rec["loss_mask"][n_prompt:]) == {1}
        # token ids are the fake's code points: decoding them gives back the text the row carries
        assert "".join(map(chr, rec["input_ids"])) == rec["text"]
        assert rec["metadata"]["finish_reason"] == "eos"
    assert lines(out)[-1]["text"].startswith("def fib(n):")


def test_raw_prompts_refused_by_chat_formats(tmp_path):
    with pytest.raises(InputError, match="raw"):
        run(
            drafts_data.generate(
                FakeTarget(), [Prompt("r", raw="x"), *CHATS[:1]], tmp_path / "o.jsonl", "sharegpt", PARAMS, 0
            )
        )


def test_rerun_skips_what_is_done_and_retries_failures(tmp_path):
    out = tmp_path / "data.jsonl"
    first = FakeTarget(fail={"second"})
    r1 = run(drafts_data.generate(first, CHATS, out, "messages", PARAMS, holdout=0))
    assert r1.written == 3 and [f[0] for f in r1.failed] == ["b"]
    second = FakeTarget()
    r2 = run(drafts_data.generate(second, CHATS, out, "messages", PARAMS, holdout=0))
    assert r2.written == 1 and r2.skipped_done == 3 and len(second.asked) == 1
    assert sorted(r["id"] for r in lines(out)) == ["a", "b", "c", "d"]
    r3 = run(drafts_data.generate(FakeTarget(), CHATS, out, "messages", PARAMS, holdout=0))
    assert r3.written == 0 and r3.skipped_done == 4


def test_a_torn_last_line_is_cut_and_its_prompt_answered_again(tmp_path):
    out = tmp_path / "data.jsonl"
    run(drafts_data.generate(FakeTarget(), CHATS[:2], out, "messages", PARAMS, holdout=0))
    with open(out, "ab") as fh:
        fh.write(b'{"id": "c", "messages": [{"role": "us')  # a kill inside the write
    r = run(drafts_data.generate(FakeTarget(), CHATS, out, "messages", PARAMS, holdout=0))
    assert r.cut_bytes > 0 and r.written == 2
    assert [x["id"] for x in lines(out)] == ["a", "b", "c", "d"]


def test_a_bad_line_in_the_middle_is_an_error_not_a_skip(tmp_path):
    out = tmp_path / "data.jsonl"
    out.write_text('{"id": "a", "messages": []}\nnot json\n{"id": "b", "messages": []}\n')
    with pytest.raises(InputError, match="line 2"):
        run(drafts_data.generate(FakeTarget(), CHATS, out, "messages", PARAMS, holdout=0))


def test_changing_the_holdout_cannot_leak_answered_prompts_into_the_proof(tmp_path):
    out = tmp_path / "data.jsonl"
    run(drafts_data.generate(FakeTarget(), CHATS, out, "messages", PARAMS, holdout=0))
    with pytest.raises(InputError, match="held-out"):
        run(drafts_data.generate(FakeTarget(), CHATS, out, "messages", PARAMS, holdout=0.25))


WORKER = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {tests!r})
    from pathlib import Path
    from test_drafts_data import FakeTarget, PARAMS
    from spectui.core.types import Prompt
    from spectui.labs.drafts import data as drafts_data

    class Gated(FakeTarget):
        # stops answering after 20 prompts until the gate file (argv[2]) exists: a first run cannot get
        # to the end before the test kills it, however the loaded machine schedules the two processes

        async def stream(self, prompt, params):
            while len(self.asked) >= 20 and not Path(sys.argv[2]).exists():
                await asyncio.sleep(0.05)
            async for ev in super().stream(prompt, params):
                yield ev

    items = [Prompt(f"p{{i}}", messages=[{{"role": "user", "content": "question " + str(i) * 400}}]) for i in range(40)]
    asyncio.run(drafts_data.generate(Gated(delay=0.02), items, Path(sys.argv[1]), "speculators", PARAMS, holdout=0.1))
    """
)


def test_killed_and_resumed_every_record_whole_and_once(tmp_path):
    out = tmp_path / "data.jsonl"
    script = tmp_path / "worker.py"
    script.write_text(WORKER.format(tests=str(Path(__file__).parent)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    gate = tmp_path / "gate"  # absent in the first run: it stops after 20 prompts, waiting to be killed
    proc = subprocess.Popen([sys.executable, str(script), str(out), str(gate)], env=env)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait until some records are there, then kill without warning
            if out.exists() and out.read_bytes().count(b"\n") >= 5:
                break
            assert proc.poll() is None, "the worker ended before it could be killed"
            time.sleep(0.01)
        else:
            pytest.fail("no records appeared")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    partial = out.read_bytes()
    whole = partial[: partial.rfind(b"\n") + 1]
    assert all(json.loads(x) for x in whole.splitlines())  # every newline-ended line is a whole record
    assert len(whole.splitlines()) < 36  # killed before the end
    gate.write_text("")  # the resumed run goes to the end
    done = subprocess.run([sys.executable, str(script), str(out), str(gate)], env=env, timeout=120)
    assert done.returncode == 0
    recs = lines(out)
    ids = [r["primary_id"] for r in recs]
    assert len(ids) == len(set(ids)) == 36  # 40 prompts, 4 held out, each answered once
    assert all(len(r["input_ids"]) == len(r["loss_mask"]) for r in recs)


class Regreedy:
    """A target asked again for its greedy ids (llama.cpp withholds an id in the stream: see answer_ids)."""

    def __init__(self, ids):
        self.ids = ids

    async def greedy_ids(self, context, n, top=2):
        return [(i, []) for i in self.ids[:n]]


def test_withheld_ids_are_filled_only_when_the_greedy_answer_agrees():
    greedy = GenerationParams(max_tokens=8, temperature=0.0)
    assert run(drafts_data.answer_ids(Regreedy([5, 6, 7]), [1], [5, None, 7], greedy)) == [5, 6, 7]
    assert run(drafts_data.answer_ids(object(), [1], [5, 6], greedy)) == [5, 6]  # nothing missing: not asked
    with pytest.raises(RuntimeError, match="changed when asked again"):
        run(drafts_data.answer_ids(Regreedy([5, 6, 8]), [1], [5, None, 7], greedy))
    with pytest.raises(RuntimeError, match="changed when asked again"):
        run(drafts_data.answer_ids(Regreedy([5, 6]), [1], [5, None, 7], greedy))
    sampled = GenerationParams(max_tokens=8, temperature=0.7)  # a sampled answer cannot be asked again
    with pytest.raises(RuntimeError, match="no token ids for part of the answer"):
        run(drafts_data.answer_ids(Regreedy([5, 6, 7]), [1], [5, None, 7], sampled))
