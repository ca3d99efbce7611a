"""The session browser on a folder holding a FIFO, a dangling link, a link to /dev/zero and a folder named
*.jsonl beside one real session: the app stays responsive, lists the session and names
each odd entry in its row. Before, the FIFO froze the app on the UI thread until it was killed."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from textual.app import App

from tests.pilot import until

SESSION = Path(__file__).resolve().parents[1] / "data" / "session-draft-quick2-repeat2.jsonl"


def _unblock_after(fifo: Path, seconds: float, fired: list) -> threading.Timer:
    """If a reader still blocks on the FIFO after `seconds`, open it for writing and close it: the reader
    gets end-of-file, so a frozen app fails this test instead of hanging the suite."""

    def fire() -> None:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # fails (ENXIO) when nobody is reading
        except OSError:
            return
        fired.append(time.monotonic())
        os.close(fd)

    t = threading.Timer(seconds, fire)
    t.start()
    return t


async def test_the_session_browser_lists_around_odd_files(tmp_path):
    from spectui.tui.screens.sessions_screen import SessionBrowser

    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "good.jsonl").write_bytes(SESSION.read_bytes())
    os.mkfifo(folder / "fifo.jsonl")
    (folder / "dangling.jsonl").symlink_to(folder / "nowhere")
    (folder / "zero.jsonl").symlink_to("/dev/zero")
    (folder / "folder.jsonl").mkdir()
    fired: list = []

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(SessionBrowser(folder))

    app = Host()
    timer = _unblock_after(folder / "fifo.jsonl", 20, fired)
    try:
        async with app.run_test(size=(160, 40)) as pilot:

            def rows() -> list[str]:
                tables = list(app.screen.query("DataTable"))
                return [str(tables[0].get_row_at(i)) for i in range(tables[0].row_count)] if tables else []

            await until(pilot, lambda: len(rows()) == 5, 30, "five rows")
            assert not fired, "the FIFO blocked the app until the test unblocked it"
            listed = rows()
            assert any("good.jsonl" in r and "not a regular file" not in r for r in listed)
            for name in ("fifo.jsonl", "dangling.jsonl", "zero.jsonl", "folder.jsonl"):
                assert any(name in r and "not a regular file" in r for r in listed), (name, listed)
    finally:
        timer.cancel()
