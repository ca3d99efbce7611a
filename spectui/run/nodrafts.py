"""Why a speculating candidate drafted nothing, from its command line, and the flag that fixes it.

"The candidate drafted nothing" alone leaves a newcomer stuck: llama.cpp's ngram-simple at its default
sizes (N 12, M 48: common/common.h, backends/launchspec.NGRAM_SIMPLE_DEFAULT) drafts only where the last 12
tokens already occurred earlier in the context, which a short prompt's answer almost never does; the same
prompt drafted with N 3 / M 8 (measured on a copying prompt with llama-server b11434). The command
line is the launched one where spectui started the server, else the one of the local process listening on
the URL's port (psutil), else unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

import psutil

from spectui.backends.launchspec import NGRAM_SIMPLE_DEFAULT, LaunchSpec, flag_value
from spectui.machine.probes import pid_listening_on


def local_argv(url: str) -> list[str] | None:
    """The command line of the process on this machine that listens on the URL's port, where psutil can read it."""
    u = urlsplit(url)
    if (u.hostname or "") not in ("127.0.0.1", "localhost", "::1") or u.port is None:
        return None

    pid = pid_listening_on(u.port)
    if pid is None:
        return None
    try:
        return psutil.Process(pid).cmdline() or None
    except Exception:  # gone, or not ours to read
        return None


def why_nothing_drafted(argv: Sequence[str] | None, context_tokens: int | None) -> str:
    """One line: the likely cause from the candidate's flags, and what to change."""
    if not argv:
        return (
            "the candidate drafted nothing, and its command line is not known here (not launched by spectui, "
            "not a local process): check it speculates (--spec-type, -md) with n-gram sizes its prompts repeat"
        )
    spec = LaunchSpec.from_argv(argv)
    kind = spec.spec_type or ("draft-simple" if spec.draft_model else None)
    if kind in (None, "none"):
        return "the candidate drafted nothing: it was started without speculation (no --spec-type, no -md)"
    if spec.draft_model is not None and not spec.draft_model.is_file():
        return f"the candidate drafted nothing: its draft model {spec.draft_model} is not a file here"
    p_min = flag_value(argv, "--spec-draft-p-min", "--draft-p-min")
    if p_min is not None and kind.startswith("draft"):
        return (
            f"the candidate drafted nothing: --spec-draft-p-min {p_min} drops every draft token the draft is less "
            "sure of; lower it (llama.cpp's default is 0.75 in common/common.h) or leave it out"
        )
    if kind.startswith("ngram"):
        n, m = spec.ngram_sizes or NGRAM_SIMPLE_DEFAULT
        where = f" in a context of {context_tokens} tokens" if context_tokens else ""
        default = " (llama.cpp's defaults)" if (n, m) == NGRAM_SIMPLE_DEFAULT else ""
        if n > 4:
            return (
                f"the candidate drafted nothing: {kind} with N {n} / M {m}{default} drafts only where the last {n} "
                f"tokens already occurred earlier{where}; launch it with --spec-ngram-simple-size-n 3 "
                "--spec-ngram-simple-size-m 8"
            )
        return (
            f"the candidate drafted nothing: {kind} (N {n}) drafts only where the answer repeats {n} tokens of its "
            f"context{where}; n-gram drafting pays on answers that copy the prompt (code edits, quoting)"
        )
    return f"the candidate drafted nothing with --spec-type {kind}: see its log for draft errors"


def explain(launched_argv: Sequence[str] | None, url: str, context_tokens: int | None) -> str | None:
    """why_nothing_drafted for a candidate whose command line says it speculates; None where it does not (a
    KV-cache or prefix-cache candidate drafts nothing by design) or its command line cannot be read."""
    argv = launched_argv or local_argv(url)
    spec = LaunchSpec.from_argv(argv)
    if not argv or (spec.spec_type in (None, "none") and spec.draft_model is None):
        return None
    return why_nothing_drafted(argv, context_tokens)
