"""The command palette (Ctrl+P) gives each of spectui's entries one sentence saying what it does, the same as
the `?` screen (tui.keys.SENTENCES); it read "spectui: prove". Replayed real streams."""

from __future__ import annotations

from spectui.tui.keys import SENTENCES
from tests.tui.test_snapshots import make, steady


async def test_every_palette_entry_of_spectui_has_its_sentence():
    app = make()
    async with app.run_test(size=(120, 40)) as pilot:
        await steady(pilot)
        commands = list(app.get_system_commands(app.screen))
        ours = [
            c
            for c in commands
            if any(c.title.startswith(f"{b.description} (") for b in (*app.BINDINGS, *type(app.screen).BINDINGS))
        ]
        assert len(ours) >= 10
        for c in ours:
            assert not c.help.startswith("spectui:"), c
            assert c.help in SENTENCES.values(), f"{c.title}: {c.help!r} is not one of the keys' sentences"
        prove = next(c for c in ours if c.title.startswith("Prove"))
        assert "certificate" in prove.help
