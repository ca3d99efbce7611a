"""Prompts from gateway logs (OpenAI chat), ShareGPT and Spec-Bench files; --limit and --sample."""

from __future__ import annotations

import json

import pytest

from spectui.cli.main import main
from spectui.core.errors import InputError
from spectui.store import prompts


def write(tmp_path, name, lines):
    p = tmp_path / name
    p.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return p


def test_openai_chat_requests(tmp_path):
    p = write(
        tmp_path,
        "gw.jsonl",
        [
            {"model": "m", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]},
            "",
            {
                "id": "r2",
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "Count"}, {"type": "text", "text": " to 3"}]}
                ],
            },
        ],
    )
    name, items = prompts.load_set(str(p))
    assert name == "gw (openai-chat)"
    assert [x.id for x in items] == ["line1", "r2"]
    assert items[0].messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert items[1].messages == [{"role": "user", "content": "Count to 3"}]


def test_sharegpt_array_takes_the_conversation_up_to_the_last_human_turn(tmp_path):
    rec = {
        "id": "c1",
        "conversations": [
            {"from": "human", "value": "A"},
            {"from": "gpt", "value": "B"},
            {"from": "human", "value": "C"},
            {"from": "gpt", "value": "D"},
        ],
    }
    p = tmp_path / "sg.json"
    p.write_text(json.dumps([rec]), encoding="utf-8")
    _, items = prompts.load_set(str(p))
    assert items[0].id == "c1"
    assert [m["content"] for m in items[0].messages] == ["A", "B", "C"]
    assert [m["role"] for m in items[0].messages] == ["user", "assistant", "user"]


def test_spec_bench_questions(tmp_path):
    p = write(
        tmp_path,
        "question.jsonl",
        [
            {"question_id": 81, "category": "writing", "turns": ["Write a haiku.", "Now in French."]},
            {"question_id": 82, "category": "math", "turns": ["2+2?"]},
        ],
    )
    _, items = prompts.load_set(str(p))
    assert [(x.id, x.category, x.messages[0]["content"]) for x in items] == [
        ("q81", "writing", "Write a haiku."),
        ("q82", "math", "2+2?"),
    ]


def test_every_bad_line_is_named(tmp_path):
    p = write(
        tmp_path,
        "bad.jsonl",
        [
            {"messages": [{"role": "user", "content": "ok"}]},
            {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]},
            "{not json",
            {"messages": []},
            {"messages": [{"role": "wizard", "content": "x"}]},
        ],
    )
    with pytest.raises(InputError) as e:
        prompts.load_set(str(p))
    msg = str(e.value)
    assert "4 bad openai-chat records" in msg
    for n in (2, 3, 4, 5):
        assert f"line {n}:" in msg
    assert "line 1:" not in msg


def test_unknown_records_and_duplicate_ids(tmp_path):
    with pytest.raises(InputError, match="line 1 is not a prompt record"):
        prompts.load_set(str(write(tmp_path, "x.jsonl", [{"prompt": "hello"}])))
    dup = write(tmp_path, "d.jsonl", [{"question_id": 1, "turns": ["a"]}, {"question_id": 1, "turns": ["b"]}])
    with pytest.raises(InputError, match="line 2: duplicate id 'q1'"):
        prompts.load_set(str(dup))


def test_limit_and_sample():
    items = [prompts.single(f"p{i}") for i in range(10)]
    items = [type(x)(f"id{i}", "", x.messages) for i, x in enumerate(items)]
    assert [x.id for x in prompts.pick(items, limit=3)] == ["id0", "id1", "id2"]
    a = prompts.pick(items, sample=4, seed=7)
    assert len(a) == 4 and [x.id for x in a] == [x.id for x in prompts.pick(items, sample=4, seed=7)]
    assert [x.id for x in a] == sorted((x.id for x in a), key=lambda s: int(s[2:]))  # file order kept
    import random

    want = sorted(random.Random(7).sample(range(10), 4))
    assert [x.id for x in a] == [f"id{i}" for i in want]
    assert prompts.pick(items, sample=50) == items
    with pytest.raises(InputError, match="--limit must be at least 1"):
        prompts.pick(items, limit=0)


def test_cli_reports_a_bad_file_in_one_line(tmp_path, capsys):
    p = write(tmp_path, "bad.jsonl", ["nope"])
    code = main(
        ["compare", "--baseline", "http://127.0.0.1:9", "--candidate", "http://127.0.0.1:9", "--prompts", str(p)]
    )
    err = capsys.readouterr().err
    assert code == 2 and "line 1: not JSON" in err and len(err.strip().splitlines()) == 1


def test_a_byte_order_mark_is_not_data(tmp_path):
    p = tmp_path / "bom.jsonl"
    p.write_bytes(b'\xef\xbb\xbf{"messages": [{"role": "user", "content": "hi"}]}\n')
    _, items = prompts.load_set(str(p))
    assert items[0].messages == [{"role": "user", "content": "hi"}]
