"""The footer in the order a newcomer needs it: Run, Prove, Sampling, Theory first (tui.keys.FOOTER_FIRST),
then the rest as bound; on a sub-screen its own keys, then the app's few that work there (SpectuiApp.BINDINGS). Textual's Footer orders keys by where they were first bound along the focus chain,
so keys the prompt's text box also binds (Ctrl+E, Ctrl+D, …) came first and Enter/Run, which the text box
binds hidden (it submits, and submitting runs), was never shown."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from spectui.tui.keys import in_footer_order, sentence


class KeysFooter(Footer):
    def shown(self) -> list[tuple]:
        """(binding, enabled) for each action the footer shows, in its order."""
        active = self.screen.active_bindings
        seen: dict[str, tuple] = {}
        for _node, binding, enabled, _tooltip in active.values():
            if binding.show and binding.action not in seen:
                seen[binding.action] = (binding, enabled)
        main = self.screen is self.screen.app.screen_stack[0]
        if main:
            # a screen key the focused widget shadows with a hidden binding of its own (Enter: the prompt submits,
            # which runs): shown with the screen's description
            for b in type(self.screen).BINDINGS:
                if not isinstance(b, Binding) or not b.show or b.action in seen:
                    continue
                shadow = active.get(b.key)
                if shadow is not None and not shadow.binding.show and self.screen.check_action(b.action, ()):
                    seen[b.action] = (b, True)
        return [seen[a] for a in in_footer_order(list(seen), main)]

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        shown = self.shown()
        self.styles.grid_size_columns = len(shown)
        for binding, enabled in shown:
            yield FooterKey(
                binding.key,
                self.app.get_key_display(binding),
                binding.description,
                binding.action,
                disabled=not enabled,
                tooltip=binding.tooltip or sentence(binding.action, binding.description),
            ).data_bind(compact=Footer.compact)
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            try:
                _node, binding, enabled, tooltip = self.screen.active_bindings[self.app.COMMAND_PALETTE_BINDING]
            except KeyError:
                return
            yield FooterKey(
                binding.key,
                self.app.get_key_display(binding),
                binding.description,
                binding.action,
                classes="-command-palette",
                disabled=not enabled,
                tooltip=binding.tooltip or binding.description,
            )
