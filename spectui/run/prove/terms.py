"""The formula's terms measured for a certificate: after `spectui prove` has written its
certificate, the servers it ran on (still up) are timed on separate requests (labs.theory.costs, as `spectui
theory --from` does) for each prompt of the greedy session, and the certificate gets a "terms" record
(labs.theory.record) and is written again (JSON, Markdown, HTML).

The greedy runs are read back from greedy.jsonl, so each prompt's check is made from the same runs
`spectui verify` reads; the measured times are the only figures verify cannot derive again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from spectui.backends.launchspec import LaunchSpec
from spectui.core.errors import describe
from spectui.core.runner import grouped
from spectui.core.types import SIDES
from spectui.labs.theory import record as terms_record
from spectui.run.prove import certificate
from spectui.run.prove.derive import normalised
from spectui.store.session import load_session, results_for

SKIPPED_FLAG = "--no-terms"


def launched_of(doc: dict) -> dict:
    """Each side's recorded command line as a LaunchSpec (empty where not recorded): the draft is timed at
    the candidate's threads and offload, every position's outputs at the baseline's."""
    servers = doc["measured_on"].get("servers", {})
    return {side: LaunchSpec.from_argv((servers.get(side) or {}).get("launch_argv")) for side in SIDES}


def draft_model_of(doc: dict) -> str | None:
    """The draft model file the candidate was launched with (its recorded command line), where it says."""
    argv = (doc["measured_on"].get("servers", {}).get("candidate") or {}).get("launch_argv")
    model = LaunchSpec.from_argv(argv).draft_model if argv else None
    return str(model) if model is not None and model.is_file() else None


async def add_terms(
    doc: dict,
    client,
    baseline,
    candidate,
    *,
    skip: str | None = None,
    repeats: int = 3,
    say: Callable[[str], None] | None = None,
) -> dict:
    """The certificate with its measured terms (or {"skipped": why}), written again beside its sessions.
    A measurement that fails is recorded as skipped with its reason: the certificate stays complete."""
    path = Path(doc["_path"])
    if skip is None and (baseline is None or candidate is None):
        skip = "the two servers were not up together"
    if skip is not None:
        terms: dict = {"skipped": skip}
    else:
        terms = await _measure(doc, client, baseline, candidate, repeats, say)
    doc = {k: v for k, v in doc.items() if k != "_path"}
    doc["terms"] = normalised(terms)
    certificate.write(doc, path)
    return doc


async def _measure(doc: dict, client, baseline, candidate, repeats: int, say: Callable[[str], None] | None) -> dict:
    """The terms of every greedy prompt that finished on both sides (labs.theory.record), on the servers."""
    groups = _finished_groups(doc)

    def done(i: int, pid: str) -> None:
        if say is not None:
            say(f"terms {i}/{len(groups)} {pid}")

    try:
        return await terms_record.measure(
            client,
            baseline,
            candidate,
            groups,
            draft_model_of(doc),
            repeats,
            done=done,
            draft_named="the -md on the candidate's recorded command line",
            launched=launched_of(doc),
        )
    except Exception as exc:  # a server gone, a draft server that would not start: said, not raised
        return {"skipped": f"the measurement failed: {describe(exc)}"}


def _finished_groups(doc: dict) -> list:
    """The greedy sessions' prompts, each with its runs, where some run finished on both sides."""
    path = Path(doc["_path"])
    groups = []
    for ref in doc["sessions"]:
        if ref["phase"] == "greedy":
            session = load_session(path.parent / ref["path"])
            groups += [g for g in grouped(results_for(session)) if any(r.speedup for r in g.runs)]
    return groups
