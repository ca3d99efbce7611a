"""The profile picker: bundled and user profiles, whether this machine fits each, their comparisons, and the
memory plan of each comparison (both servers at once, or one at a time) on this GPU or the track's."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Label, OptionList, Static
from textual.widgets.option_list import Option

from spectui.labs.memory.plan import MemoryPlan, floor_gpu, plan_profile, summary
from spectui.store.profiles import Hardware, Profile, fits, profile_text
from spectui.tui.widgets.footer import KeysFooter

_DECISION = {"together": "both at once", "one-at-a-time": "one at a time", "too-big": "does not fit"}


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
        self._plans: dict[str, dict[str, MemoryPlan]] = {}

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
        yield KeysFooter()  # its own keys and the app's few that work here (SpectuiApp.BINDINGS)

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

    def _plan(self, p: Profile) -> None:
        """Plan every comparison of a profile in a thread (a GGUF header walk takes ~0.1 s), once."""
        gpu = self.hw.gpu_memory or floor_gpu(p, self.hw.note)  # NVML was read once, by detect

        def work() -> None:
            try:
                plans = {pl.comparison: pl for pl in plan_profile(p, gpu)}
                problem = None
            except Exception as exc:  # a broken model file must not break the picker
                plans, problem = {}, f"memory plan for {p.name}: {exc}"
            self.app.call_from_thread(self._planned, p.name, plans, problem)

        self._plans[p.name] = {}
        self.run_worker(work, thread=True, group="memplan", exit_on_error=False)

    def _planned(self, name: str, plans: dict[str, MemoryPlan], problem: str | None) -> None:
        self._plans[name] = plans
        if problem:
            self.notify(problem, severity="warning")
        plist = self.query_one("#profile-list", OptionList)
        if plist.highlighted is None or list(self.profiles)[plist.highlighted] != name:
            return
        clist = self.query_one("#comparison-list", OptionList)
        for c in self.profiles[name].comparisons:
            clist.replace_option_prompt(c.id, self._label(name, c.id, c.title))
        if clist.has_focus and clist.highlighted is not None:
            self._show_plan(clist.get_option_at_index(clist.highlighted).id)
        else:
            self._detail(name)

    def _label(self, name: str, cid: str, title: str) -> str:
        plan = self._plans.get(name, {}).get(cid)
        word = _DECISION.get(plan.decision) if plan else None
        return f"{cid}: {title}" + (f" [{word}]" if word else "")

    def _detail(self, name: str) -> None:
        p = self.profiles[name]
        lines = [profile_text(p, self.hw)]
        planned = [pl for pl in self._plans.get(name, {}).values() if pl.decision != "not-planned"]
        if planned:
            lines.append(f"  memory plan ({planned[0].gpu_line()}):")
            lines += [f"    {summary(pl)}" for pl in planned]
        elif p.gpu_vendor == "nvidia":
            lines.append("  memory plan: planning…")
        self.query_one("#detail", Static).update("\n".join(lines))

    def _show(self, name: str | None) -> None:
        clist = self.query_one("#comparison-list", OptionList)
        clist.clear_options()
        if name is None:
            return
        p = self.profiles[name]
        if name not in self._plans:
            self._plan(p)
        clist.add_options([Option(self._label(name, c.id, c.title), id=c.id) for c in p.comparisons])
        self._detail(name)

    def _show_plan(self, cid: str | None) -> None:
        plist = self.query_one("#profile-list", OptionList)
        if plist.highlighted is None or cid is None:
            return
        p = self.profiles[list(self.profiles)[plist.highlighted]]
        plan = self._plans.get(p.name, {}).get(cid)
        if plan is None:
            return
        body = plan.lines(detail=True) if plan.decision != "not-planned" else plan.lines()
        self.query_one("#detail", Static).update(
            profile_text(p, self.hw) + "\n  memory plan:\n" + "\n".join("    " + line for line in body)
        )

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id == "profile-list":
            self._show(event.option.id)
        elif event.option_list.id == "comparison-list" and event.option_list.has_focus:
            self._show_plan(event.option.id)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list.id == "profile-list":
            clist = self.query_one("#comparison-list", OptionList)
            clist.focus()
            if clist.option_count:
                if clist.highlighted is None:
                    clist.highlighted = 0
                self._show_plan(clist.get_option_at_index(clist.highlighted).id)
            return
        plist = self.query_one("#profile-list", OptionList)
        name = list(self.profiles)[plist.highlighted or 0]
        self.dismiss((self.profiles[name], event.option.id or ""))

    def action_cancel(self) -> None:
        self.dismiss(None)
