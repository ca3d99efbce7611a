"""The prove screen (F4) on recorded streams: the prompt set on screen through the run session, a progress
bar over prompts and runs, the certificate's own verdict line, the certificate saved beside its sessions
(and `verify` agrees), and one notebook entry for it."""

from __future__ import annotations

import json

from spectui.run.prove import certificate
from spectui.store import notebook
from spectui.tui.screens.prove_screen import ProveScreen
from tests.pilot import until
from tests.tui.test_keys import started
from tests.tui.test_snapshots import make


async def test_f4_proves_the_set_on_screen_and_saves_the_certificate(tmp_path):
    app = make(pace="recorded")  # the certificate must verify: arrivals that agree with the timings
    book = notebook.notebook_path(None)
    before = len(notebook.read(book))
    async with app.run_test(size=(160, 48)) as pilot:
        await started(pilot)
        assert any("Prove (f4)" in str(c.title) for c in app.get_system_commands(app.screen))  # in the palette
        await pilot.press("f4")
        # pushed, and composed (its inputs are there): the push can come before the screen has mounted
        await until(
            pilot,
            lambda: isinstance(app.screen, ProveScreen) and app.screen.query("#prove-sampled"),
            what="the prove screen",
        )
        screen = app.screen
        screen.out_dir = tmp_path / "cert"
        screen.query_one("#prove-sampled").value = "1"
        screen.query_one("#prove-samples").value = "3"
        screen.query_one("#prove-max-tokens").value = "32"
        await pilot.press("enter")
        await until(pilot, lambda: screen.document is not None, 120, "the certificate")
        doc = json.loads((tmp_path / "cert" / "certificate.json").read_text(encoding="utf-8"))
        shown = screen.query_one("#prove-verdict").render()
        assert str(shown) == doc["verdict"]["line"] and doc["verdict"]["line"].startswith("IDENTICAL on ")
        assert any("bold green" in str(s.style) for s in shown.spans)  # the certificate status, in its colour
        n = len(app.prompt_list)
        bar = screen.query_one("#prove-progress")
        assert bar.total == n * 2 + 3 and bar.progress == bar.total  # every greedy run and every seed
        assert str(tmp_path / "cert" / "certificate.json") in str(screen.query_one("#prove-saved").render())
    assert certificate.verify(tmp_path / "cert" / "certificate.json").ok
    rows = notebook.read(book)
    assert len(rows) == before + 1 and rows[-1]["kind"] == "certificate"
    assert rows[-1]["verdict_line"] == doc["verdict"]["line"]
