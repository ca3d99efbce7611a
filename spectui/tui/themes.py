"""The user's themes as Textual themes, each with the token marks it sets (store.themes reads the files)."""

from __future__ import annotations

from textual.color import Color
from textual.theme import Theme

from spectui.store.themes import load_themes


def user_themes() -> tuple[list[Theme], dict[str, dict[str, str]], list[str]]:
    """The user's themes, their marks by theme name, and what to warn about (a theme that does not parse is
    skipped with its reason)."""
    loaded = load_themes()
    themes: list[Theme] = []
    marks: dict[str, dict[str, str]] = {}
    for spec in loaded.themes:
        try:  # Textual's own colour parser has the last word on what a theme may hold
            for value in [*spec.colors.values(), *spec.marks.values()]:
                Color.parse(value)
            themes.append(Theme(spec.name, dark=spec.dark, **spec.colors))  # type: ignore[arg-type]
        except Exception as exc:
            loaded.problems.append(f"theme {spec.path}: {exc}; skipped")
            continue
        marks[spec.name] = spec.marks
    return themes, marks, loaded.problems


MARKS_KEY = "alt+k"  # the app's binding that cycles the marks (tui.app)


def legend_text(marks: dict[str, str], mode: str = "full") -> str:
    """The line under the prompt row that says what the candidate's marks mean, in the theme's colours, and
    what the marks key does next (token_view.MARK_MODES: full, colour only, off)."""
    m = marks
    if mode == "off":
        return f"candidate marks off: the text as the server sent it · {MARKS_KEY}: all marks"
    if mode == "full":
        rejected = f"[bold {m['rejected']}]✗n[/] drafts rejected · "
    else:  # colour only: the character where the target's own token took over is reversed, as here
        rejected = f"[reverse {m['rejected']}]d[/]rafts rejected · "
    then = "colour only" if mode == "full" else "off"
    return (
        f"candidate marks: [{m['accepted']} underline]accepted draft[/] · [{m['target']}]target's own[/] · "
        f"{rejected}[bold reverse {m['diverge']}]first difference[/] · {MARKS_KEY}: {then}"
    )
