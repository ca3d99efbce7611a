"""The profile picker: bundled and user profiles, whether this machine fits each, and their comparisons."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Label, OptionList, Static
from textual.widgets.option_list import Option

from spectui.store.profiles import Hardware, Profile, fits, profile_text


class ProfilePicker(Screen[tuple[Profile, str] | None]):
    BINDINGS = [Binding("escape", "cancel", "Back", id="picker_back")]
    DEFAULT_CSS = """
    ProfilePicker #lists { height: 1fr; }
    ProfilePicker OptionList { width: 1fr; height: 1fr; }
    ProfilePicker #hw, ProfilePicker #detail { padding: 0 1; height: auto; }
    ProfilePicker #detail { color: $text-muted; }
    """

    def __init__(
        self, profiles: dict[str, Profile], hw: Hardware, preselected: str | None, problems: list[str]
    ) -> None:
        super().__init__()
        self.profiles = profiles
        self.hw = hw
        self.preselected = preselected
        self.problems = problems

    def compose(self) -> ComposeResult:
        yield Label(f"this machine: {self.hw.describe()} — pick a profile, then a comparison (Enter)", id="hw")
        with Horizontal(id="lists"):
            opts = []
            for p in self.profiles.values():
                ok, why = fits(p, self.hw)
                star = "★ " if p.name == self.preselected else "  "
                opts.append(Option(f"{star}{p.name} (track {p.track or '—'}) — {'fits' if ok else why}", id=p.name))
            yield OptionList(*opts, id="profile-list")
            yield OptionList(id="comparison-list")
        with Vertical():
            yield Static("", id="detail")
        yield Footer()

    def on_mount(self) -> None:
        for problem in self.problems:
            self.notify(problem, severity="warning", timeout=10)
        plist = self.query_one("#profile-list", OptionList)
        names = list(self.profiles)
        if self.preselected in names:
            plist.highlighted = names.index(self.preselected)
        elif names:
            plist.highlighted = 0
        plist.focus()
        self._show(names[plist.highlighted] if names and plist.highlighted is not None else None)

    def _show(self, name: str | None) -> None:
        clist = self.query_one("#comparison-list", OptionList)
        clist.clear_options()
        if name is None:
            return
        p = self.profiles[name]
        clist.add_options([Option(f"{c.id}: {c.title}", id=c.id) for c in p.comparisons])
        self.query_one("#detail", Static).update(profile_text(p, self.hw))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id == "profile-list":
            self._show(event.option.id)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list.id == "profile-list":
            self.query_one("#comparison-list", OptionList).focus()
            return
        plist = self.query_one("#profile-list", OptionList)
        name = list(self.profiles)[plist.highlighted]
        self.dismiss((self.profiles[name], event.option.id))

    def action_cancel(self) -> None:
        self.dismiss(None)
