"""The command table: each command's module in spectui.cli, its one line of help and the task it serves
(pip's commands_dict). `spectui --help` reads it and imports no command module; each command's parser takes
its help line from it, so the line is written once."""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    module: str  # spectui.cli.<module> registers the command's parser and runs it (cmd_<command>)
    help: str  # the one line `spectui --help` and the command's own parser show
    task: str  # the group `spectui --help` lists it under (TASKS)


# only the command that runs is imported
COMMANDS: dict[str, Command] = {
    "tui": Command("tui", "open the two-pane TUI on two running servers (or the profile picker)", "watch"),
    "compare": Command("compare", "stream the same prompts to both servers and compare, headless", "watch"),
    "demo": Command("demo", "launch the bundled pair of llama-servers and open the TUI on them", "watch"),
    "serve": Command("serve", "the app in a web browser (textual-serve), on 127.0.0.1 unless told otherwise", "watch"),
    "prove": Command(
        "prove", "one certificate that the candidate is identical to the baseline, and how much faster", "prove"
    ),
    "verify": Command(
        "prove", "re-derive a certificate from its raw sessions (no servers) and check every hash", "prove"
    ),
    "regress": Command("prove", "two certificates of one prompt set: what got worse", "prove"),
    "merge": Command("prove", "shard certificates (--shard I/N) into the one a single run would give", "prove"),
    "formats": Command(
        "formats", "which weight format to serve: each measured plain and speculative on this machine", "labs"
    ),
    "theory": Command("theory", "speed-up as a function of acceptance rate, draft length and draft cost", "labs"),
    "sweep": Command("sweep", "throughput and speed-up against concurrency: where the payoff collapses", "labs"),
    "sampling": Command("sampling", "exact under sampling: seeded bytes and the two output distributions", "labs"),
    "prefix": Command("prefix", "prefix caching: cold vs warm turns, tokens reused, TTFT, and the bytes", "labs"),
    "cache": Command("prefix", "save, restore or erase a llama.cpp slot's cache (--slot-save-path)", "labs"),
    "kv": Command("memory", "KV cache types: each server's flags, and the memory a quantised cache saves", "labs"),
    "drafts": Command("drafts", "drafts: what training one costs, data from the target, a lookup draft proven", "labs"),
    "replay": Command("sessions", "replay a saved session without any server", "sessions"),
    "report": Command("sessions", "export a saved session as text, Markdown, JSON or HTML", "sessions"),
    "sessions": Command("sessions", "list saved sessions (the autosave folder by default)", "sessions"),
    "notebook": Command("sessions", "the lab notebook: show it or print its path", "sessions"),
    "import": Command("sessions", "results of vllm bench serve, AIPerf or guidellm into the lab notebook", "sessions"),
    "setup": Command("machine", "build llama-server and fetch SmolLM2 and its draft into the cache", "set-up"),
    "doctor": Command("machine", "what spectui found: llama-server, models, GPUs, host", "set-up"),
    "profiles": Command("machine", "hardware profiles: list, show one, check one against this machine", "set-up"),
}
TASKS = ("watch", "prove", "labs", "sessions", "set-up")
