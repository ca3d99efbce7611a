"""Identity under sampling, derived from the sampled pass's sessions (part of run.prove.derive's
derivation): per prompt, the seeded bytes where the candidate's drafting promises them, else the
whole-sequence distribution test of labs.sampling.exact with its power beside it."""

from __future__ import annotations

import dataclasses

from spectui.core.runner import PromptResult, same_tokenizer
from spectui.core.types import ServerInfo
from spectui.core.verdict import judge
from spectui.store.session import Session, recorders_for


def sampled_json(sessions: list[Session], order: dict, inputs: dict, argv: list[str] | None) -> dict | None:
    """Identity under sampling, per prompt: seeded bytes where the drafting mode promises them, the
    whole-sequence distribution test (labs.sampling.exact, its power beside it) where only the distribution is."""
    cfg = inputs.get("sampled")
    if not cfg or not cfg.get("ids"):
        return None
    from spectui.labs.sampling.exact import SamplingResult, distribution_pass  # lazy: numpy (~0.3 s)

    by_id, info = _sampled_runs(sessions)
    if not by_id:
        return None  # none of the sampled prompts fell in this shard's share
    kind = info.backend if info is not None else "unknown"
    prompts = []
    for pid in sorted(by_id, key=lambda i: order.get(i, (1 << 30, ""))[0]):
        runs = sorted(by_id[pid], key=lambda r: r.seed or 0)
        res = SamplingResult(runs[0].prompt, runs)
        res.guarantee = promised(kind, info, argv)
        failed = [r.seed for r in runs if r.failed or r.incomplete]
        if not failed and res.seeded_identical < len(runs):
            distribution_pass(res, int(cfg["max_tokens"]))
        t = res.test
        status, why = _sampled_status(res, len(runs), failed)
        prompts.append(
            {
                "id": pid,
                "category": order.get(pid, (0, ""))[1],
                "samples": len(runs),
                "seeded_identical": res.seeded_identical,
                "divergent_seeds": [r.seed for r in runs if r.identical is False],
                "guarantee": res.guarantee.to_json(),
                "status": status,
                "why": why,
                "test": t.to_json() if t is not None else None,
                "compared": res.representation if t is not None else "bytes",
            }
        )
    count = {
        k: sum(1 for p in prompts if p["status"] == k)
        for k in ("identical", "consistent", "different", "undecided", "failed")
    }
    detect = [p["test"]["smallest_detectable_tvd"] for p in prompts if p["status"] == "consistent" and p["test"]]
    return {
        "prompts": prompts,
        "counts": count,
        "passed": count["identical"] + count["consistent"],
        "total": len(prompts),
        # the weakest guarantee among the consistent ones: what every one of them could detect
        "detectable_tvd": (max(detect) if None not in detect else None) if detect else None,
    }


def promised(kind: str, info: ServerInfo | None, argv: list[str] | None):
    """The promise the sampled verdict rests on: the one the sessions show (the server's reported
    speculation), or the stated command line's where that promises MORE (seeded bytes): a stated field may
    make the test stricter, never let a seeded mismatch pass as "distribution only"."""
    from spectui.labs.sampling.exact import Guarantee, guarantee_for  # lazy: see sampled_json

    derived = guarantee_for(kind, info, None)
    if kind == "llama.cpp" and derived.promise == "unknown":
        # the server reports which drafter ran, never how it samples drafts; its default is greedy, which
        # promises the seeded bytes. A certificate holds the candidate to that: a probabilistic launch is
        # only stated, and a stated field never lets a seeded mismatch through
        derived = Guarantee(
            "greedy",
            "seeded bytes",
            "llama-server drafts greedily unless launched with --spec-draft-sampling probabilistic, which it does "
            "not report: the certificate holds it to its default",
        )
    if argv is None:
        return derived
    stated = guarantee_for(kind, info, argv)
    if stated.promise == "seeded bytes" and derived.promise != "seeded bytes":
        return dataclasses.replace(stated, why=f"{stated.why} (stated: the recorded command line)")
    if stated.promise != derived.promise:
        why = f"{derived.why}; the recorded command line (stated, not derivable) says {stated.promise}: not relied on"
        return dataclasses.replace(derived, why=why)
    return derived


def _sampled_runs(sessions: list[Session]) -> tuple[dict[str, list[PromptResult]], ServerInfo | None]:
    """Each sampled prompt's seeded runs, judged again from their events, and the candidate as recorded."""
    by_id: dict[str, list[PromptResult]] = {}
    info = None
    for s in sessions:
        ids = same_tokenizer(s.infos.get("baseline"), s.infos.get("candidate"))
        info = info or s.infos.get("candidate")
        for sp in s.prompts:
            b, c = recorders_for(sp)
            r = PromptResult(sp.prompt, b, c, judge(b, c, ids, sp.damaged), damaged=sp.damaged)
            r.seed = sp.params.seed
            by_id.setdefault(sp.prompt.id, []).append(r)
    return by_id, info


def _sampled_status(res, samples: int, failed: list) -> tuple[str, str]:
    """A sampled prompt's verdict and why: the seeded bytes, then (where only the distribution is promised
    or the promise is unknown) the distribution test."""
    t = res.test
    if failed:
        return "failed", f"a side failed on seed {failed[0]}: no verdict"
    if res.seeded_identical == samples:
        return "identical", "every seed byte-identical"
    if res.guarantee.promise == "seeded bytes":
        return "different", "seeded bytes differ where the candidate's drafting promises them"
    if t is not None and t.verdict == "different":
        return "different", f"distribution different (p {t.p:.3g})"
    if t is not None and t.verdict == "consistent" and res.guarantee.promise == "distribution only":
        return "consistent", "distribution consistent"
    if t is not None and t.verdict == "consistent":
        return "undecided", "seeded bytes differ and whether the candidate promises them is unknown"
    return "undecided", (t.reason if t is not None and t.reason else "not enough samples to decide")
