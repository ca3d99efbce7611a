"""Property-based fuzzing: whatever a server sends or a file holds, only spectui's own errors escape.

hypothesis generates the inputs; each property states what must hold for every one of them.
"""

from __future__ import annotations

import asyncio
import json
import tomllib

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spectui.backends.labeller import LlamaCppLabeller
from spectui.backends.sse import iter_payloads
from spectui.core.errors import SpectuiError
from spectui.core.events import StreamFailed, StreamFinished
from spectui.core.types import GenerationParams

FAST = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=8,
)
KEYS = [
    "content",
    "tokens",
    "tokens_predicted",
    "stop",
    "stop_type",
    "timings",
    "tokens_evaluated",
    "generation_settings",
    "choices",
    "usage",
    "metrics",
    "text",
    "output_ids",
    "meta_info",
    "error",
]
events = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=6)
timing_events = st.builds(
    lambda e, t: {**e, "timings": t},
    events,
    st.dictionaries(
        st.sampled_from(["draft_n", "draft_n_accepted", "predicted_per_second", "prompt_ms", "cache_n"]),
        json_values,
        max_size=4,
    ),
)


def _only_ours(fn, *a):
    try:
        return fn(*a)
    except SpectuiError:
        return None


@FAST
@given(st.lists(st.text(max_size=40), max_size=20))
def test_sse_decoder_raises_only_spectui_errors(lines):
    _only_ours(lambda: list(iter_payloads(lines)))


@FAST
@given(st.lists(st.one_of(events, timing_events), max_size=12))
def test_llamacpp_labeller_raises_only_spectui_errors(objs):
    lab = LlamaCppLabeller()
    for i, obj in enumerate(objs):
        if _only_ours(lab.feed, obj, i) is None:
            break


def _run_backend(kind: str, body: bytes):
    from spectui.backends.detect import make_backend

    def handler(request):
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as c:
            b = make_backend(kind, "http://fuzz", c)
            b.model = "m"
            return [ev async for ev in b.stream("hi", GenerationParams(max_tokens=8))]

    return asyncio.run(go())


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["llama.cpp", "openai", "vllm", "sglang"]), st.lists(st.one_of(events, timing_events), max_size=6)
)
def test_every_backend_turns_any_event_into_events_never_an_exception(kind, objs):
    body = "".join(f"data: {json.dumps(o)}\n\n" for o in objs).encode() + b"data: [DONE]\n\n"
    evs = _run_backend(kind, body)
    assert isinstance(evs[-1], (StreamFinished, StreamFailed))  # the stream always ends with a verdict event


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.dictionaries(
                st.sampled_from(
                    [
                        "type",
                        "n",
                        "side",
                        "ev",
                        "t",
                        "i",
                        "d",
                        "label",
                        "prompt",
                        "params",
                        "baseline",
                        "candidate",
                        "version",
                    ]
                ),
                json_values,
                max_size=6,
            ),
            st.text(max_size=20),
        ),
        max_size=10,
    )
)
def test_session_loader_raises_only_input_errors(tmp_path_factory, records):
    from spectui.store.session import load_session, results_for

    p = tmp_path_factory.mktemp("s") / "s.jsonl"
    head = {"format": "spectui-session", "version": 1}
    p.write_text("\n".join([json.dumps(head)] + [r if isinstance(r, str) else json.dumps(r) for r in records]) + "\n")
    s = _only_ours(load_session, p)
    if s is not None:
        for sp, r in zip(s.prompts, results_for(s), strict=True):
            b, c = r.baseline, r.candidate
            if sp.damaged or sp.result is None:  # no verdict recorded: judged from the events alone
                if r.identical is not None:
                    assert b.finished is not None and c.finished is not None and not (b.failed or c.failed)
                if r.identical is True:
                    assert b.output() == c.output()
            if sp.damaged:
                assert r.identical is None  # an unreadable record: nothing of this prompt is trusted


side_records = st.fixed_dictionaries(
    {
        "tokens": st.lists(st.tuples(st.sampled_from(["a", "b", "é", " ", ""]), st.integers(0, 3)), max_size=6),
        "ids": st.sampled_from(["all", "none", "some"]),
        "tail": st.sampled_from(["", "a", "b"]),
        "end": st.sampled_from(["finish", "finish", "finish", "failed", "cut"]),
        "predicted": st.sampled_from(["same", "more", "absent"]),
    }
)


def _known(rec: dict, i: int) -> bool:
    return rec["ids"] == "all" or (rec["ids"] == "some" and i % 2 == 0)


def _ids(rec: dict) -> list[int | None]:
    return [tid if _known(rec, i) else None for i, (_, tid) in enumerate(rec["tokens"])]


def _events(side: str, rec: dict) -> list[dict]:
    out = [{"type": "event", "n": 0, "side": side, "ev": "start", "t": 0}]
    for i, (text, tid) in enumerate(rec["tokens"]):
        known = _known(rec, i)
        out.append(
            {
                "type": "event",
                "n": 0,
                "side": side,
                "ev": "token",
                "t": i + 1,
                "i": i,
                "id": tid if known else None,
                "d": text,
                "label": "target",
            }
        )
    n = len(rec["tokens"]) + (rec["predicted"] == "more")
    if rec["end"] == "finish":
        fin = {
            "type": "event",
            "n": 0,
            "side": side,
            "ev": "finish",
            "t": 99,
            "stop_type": "limit",
            "tail": rec["tail"],
        }
        if rec["predicted"] != "absent":
            fin["tokens_predicted"] = n
        out.append(fin)
    elif rec["end"] == "failed":
        out.append({"type": "event", "n": 0, "side": side, "ev": "failed", "t": 99, "message": "lost"})
    return out


def _by_hand(b: dict, c: dict) -> tuple[bool | None, int | None]:
    """README's verdict from the records themselves: (identical, first differing byte)."""
    if "finish" != b["end"] or "finish" != c["end"]:
        return None, None  # a side failed or never finished: no verdict
    out_b = "".join(t for t, _ in b["tokens"]).encode() + b["tail"].encode()
    out_c = "".join(t for t, _ in c["tokens"]).encode() + c["tail"].encode()
    if out_b != out_c:
        n = next((i for i in range(min(len(out_b), len(out_c))) if out_b[i] != out_c[i]), min(len(out_b), len(out_c)))
        return False, n
    # the same model on both sides: where both give every id, the ids are compared too
    ids_b, ids_c = _ids(b), _ids(c)
    if ids_b and ids_c and None not in ids_b and None not in ids_c and ids_b != ids_c:
        return False, None
    if b["predicted"] != "absent" and c["predicted"] != "absent":
        if len(b["tokens"]) + (b["predicted"] == "more") != len(c["tokens"]) + (c["predicted"] == "more"):
            return False, None  # more tokens generated than sent as text
    return True, None


@settings(max_examples=200, deadline=None)
@given(side_records, side_records)
def test_a_sessions_verdict_is_what_its_recorded_bytes_say(tmp_path_factory, b, c):
    """Sessions written record by record (no spectui writer): replayed, each verdict and exit status is
    the one the README's rules give for the recorded bytes, ids and token counts."""
    from contextlib import redirect_stderr, redirect_stdout
    from io import StringIO

    from spectui.cli.main import main
    from spectui.store.session import load_session, results_for

    p = tmp_path_factory.mktemp("v") / "s.jsonl"
    server = {"url": "http://127.0.0.1:1", "model": "m.gguf"}
    records = [
        {"format": "spectui-session", "version": 1},
        {"type": "servers", "baseline": server, "candidate": server},
        {"type": "prompt", "n": 0, "prompt": {"id": "p", "messages": [{"role": "user", "content": "x"}]}},
        *_events("baseline", b),
        *_events("candidate", c),
    ]
    p.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    want, byte = _by_hand(b, c)
    [r] = results_for(load_session(p))
    assert r.identical is want
    if byte is not None:
        assert r.divergence is not None and r.divergence.byte == byte
    out = StringIO()
    with redirect_stdout(out), redirect_stderr(StringIO()):
        code = main(["replay", str(p), "--no-tui", "--json"])
    assert code == {True: 0, False: 3, None: 1}[want]
    assert json.loads(out.getvalue())["prompts"][0]["identical"] is want


@settings(max_examples=60, deadline=None)
@given(
    st.text(max_size=80),
    st.dictionaries(
        st.text("abcdef_", min_size=1, max_size=6),
        st.integers() | st.text(max_size=5) | st.floats(allow_nan=False),
        min_size=1,
        max_size=4,
    ),
)
def test_notebook_append_never_leaves_a_file_that_does_not_parse(tmp_path_factory, existing, entry):
    from spectui.store import notebook

    p = tmp_path_factory.mktemp("n") / "n.toml"
    p.write_bytes(existing.encode("utf-8"))
    try:
        where, warning = notebook.append(p, [entry])
    except SpectuiError:
        return
    if warning is None:
        tomllib.loads(p.read_text())  # what was reported as appended parses
    else:
        assert p.read_bytes() == existing.encode("utf-8")  # what could not take it is untouched


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=200))
def test_theme_profile_and_prompt_loaders_raise_only_their_errors(tmp_path_factory, text):
    from spectui.store import prompts
    from spectui.store.profiles import parse_profile
    from spectui.store.themes import load_themes

    d = tmp_path_factory.mktemp("t")
    (d / "x.toml").write_text(text)
    load_themes([d])  # never raises: problems are collected
    _only_ours(parse_profile, text, "x.toml")
    _only_ours(prompts.load_set, str(d / "x.toml"))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet='ab: {}"\r\n[]DONE', max_size=40), max_size=8), st.data())
def test_byte_decoder_agrees_with_the_line_decoder_on_any_split(parts, data):
    """The live streams' byte decoder (ByteSSEDecoder) and the line decoder give the same payloads for the
    same bytes however the server's chunks fall, \\r\\n and lone \\r line ends included."""
    from spectui.backends.sse import ByteSSEDecoder, SSEDecoder

    text = "".join(parts)
    raw = text.encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=6)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)])]
    dec = ByteSSEDecoder()
    got = [p for c in chunks for p in dec.feed(c)]
    tail = dec.flush()
    got += [tail] if tail is not None else []
    ref, want = SSEDecoder(), []
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for line in lines[:-1]:
        p = ref.feed(line)
        if p is not None:
            want.append(p.encode())
    if lines[-1]:
        p = ref.feed(lines[-1])
        if p is not None:
            want.append(p.encode())
    p = ref.flush()
    if p is not None:
        want.append(p.encode())
    assert got == want
