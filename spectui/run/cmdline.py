"""A server's command line, from wherever spectui can read it, and what it says that no endpoint does.

llama-server's GET /props answers `speculative.types: "none"` for every server and names no KV type, and no
server says over HTTP that it accepts drafts at random (`--spec-synth-len`): the command line does. It is the
argv spectui launched the server with, else the command line of the local process listening on the URL's
port (machine.probes.local_argv, the live panel's reader), else unknown — and every use names its source.

    CommandLine.of(launched, url) → argv and source ("launch command" | "process command line" | None)
    fill_settings(info, cmd)      → the label's chain and its state, a draft model nothing uses, how drafts
                                    are verified, the KV types (run.kvtypes)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spectui.backends import spectypes
from spectui.backends.launchspec import LaunchSpec
from spectui.backends.lossy import verification_named
from spectui.core.types import ServerInfo
from spectui.run import kvtypes

LAUNCHED = kvtypes.LAUNCHED
PROCESS = kvtypes.PROCESS
FINAL_EVENT = "the request's final event"  # backends.llamacpp: what the request really used


@dataclass(frozen=True)
class CommandLine:
    argv: tuple[str, ...] = ()
    source: str | None = None  # LAUNCHED | PROCESS | None: not known

    @classmethod
    def of(
        cls,
        launched: LaunchSpec | None,
        url: str,
        read: Callable[[str], Sequence[str] | None] | None = None,
    ) -> CommandLine:
        """`read` (default machine.probes.local_argv) gives the local process's argv for a URL."""
        if launched is not None and launched.launched:
            return cls(tuple(launched.argv), LAUNCHED)
        if read is None:
            from spectui.machine.probes import local_argv  # lazy: psutil (~20 ms cold)

            read = local_argv
        argv = read(url)
        return cls(tuple(argv), PROCESS) if argv else cls()

    @property
    def known(self) -> bool:
        return bool(self.argv)

    @property
    def spec(self) -> LaunchSpec:
        return LaunchSpec.from_argv(self.argv)

    def words(self) -> str:
        """`from the process command line` / `from the launch command` (empty where not known)."""
        return f"from the {self.source}" if self.source else ""


def fill_settings(info: ServerInfo, cmd: CommandLine) -> None:
    """What `cmd` says of the server, onto `info` for its label: the speculation chain where no request has
    reported it yet, which of its types keep state, a draft model given while nothing uses it, how its drafts
    are verified; then its KV types where the server reported none. A request's own report is kept."""
    if info.backend == "replay":
        return
    spec = info.speculative
    if cmd.known and info.backend == "llama.cpp":
        chain = spectypes.chain_from_argv(cmd.argv)
        if chain and spec.get("types_from") != FINAL_EVENT:
            spec["type"] = spectypes.label(chain)
            spec["types_from"] = f"the {cmd.source}"
            note = spectypes.state_note(chain)
            if note:
                spec["state"] = note
        unused = spectypes.draft_model_unused(cmd.argv)
        if unused:
            spec["note"] = unused
    if cmd.known:
        named = verification_named(cmd.argv)
        if named:
            spec["verification"] = f"{'; '.join(named)} ({cmd.words()})"
    kvtypes.fill_kv_types(info, LaunchSpec.from_argv(cmd.argv) if cmd.source == LAUNCHED else None, _given(cmd))


def _given(cmd: CommandLine) -> Callable[[str], list[str] | None]:
    """kvtypes' reader, answering with the command line already read (read once, used for all)."""
    return lambda _url: list(cmd.argv) if cmd.source == PROCESS else None
