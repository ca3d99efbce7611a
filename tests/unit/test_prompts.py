import pytest

from spectui.core.errors import InputError
from spectui.store import prompts


def test_bundled_sets_load():
    names = prompts.bundled_names()
    assert "default" in names
    name, items = prompts.load_set("default")
    cats = {p.category for p in items}
    assert {"code", "editing", "summarising", "factual QA", "arithmetic", "translation", "multi-turn chat"} <= cats
    chat = [p for p in items if p.category == "multi-turn chat"][0]
    assert len(chat.messages) == 3 and chat.messages[-1]["role"] == "user"


def test_user_file(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('[[prompt]]\nid = "a"\nraw = "def f("\n[[prompt]]\ntext = "hi"\n')
    name, items = prompts.load_set(str(f))
    assert name == "mine" and items[0].raw == "def f(" and items[1].messages[0]["content"] == "hi"


@pytest.mark.parametrize(
    "content,needle",
    [
        ("", "no [[prompt]]"),
        ("[[prompt]\n", "not valid TOML"),
        ('[[prompt]]\nid="a"\n', "exactly one of"),
        ('[[prompt]]\ntext="a"\nbogus=1\n', "unknown key 'bogus'"),
        ('[[prompt]]\nmessages=[{role="user", content="a"}, {role="assistant", content="b"}]\n', "last message"),
        ('[[prompt]]\nid="a"\ntext="x"\n[[prompt]]\nid="a"\ntext="y"\n', "duplicate id"),
    ],
)
def test_bad_files_say_what_is_wrong(tmp_path, content, needle):
    f = tmp_path / "bad.toml"
    f.write_text(content)
    with pytest.raises(InputError) as exc:
        prompts.load_set(str(f))
    assert needle in str(exc.value)
    assert str(f) in str(exc.value)


def test_missing_file_and_unknown_set():
    with pytest.raises(InputError, match="does not exist"):
        prompts.load_set("/nonexistent/p.toml")
    with pytest.raises(InputError, match="no prompt set named"):
        prompts.load_set("nosuchset")
