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

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

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
        for r in results_for(s):
            assert r.identical in (True, False, None)


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
