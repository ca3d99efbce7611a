"""Expected values computed by the tests themselves, from the README's rules and the raw data."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

SIDES = ("baseline", "candidate")


def cause_by_the_evidence(t: dict, threshold: float = 0.05) -> str:
    """Triage's cause for a pair whose reruns both reproduced their side with no cache reused (README's
    order): from a side's own decode where one gives an exact margin (the baseline's first), a near-tie under
    the threshold (`--near-tie`, 0.05 nats), else — where the candidate's token came from a verification
    batch — the batch shape; otherwise from the position asked apart: a near-tie where its exact margin is
    under the threshold, else the configuration, or the batch shape where both sides answered it alike."""
    assert [r["identical"] for r in t["reruns"]] == [True, True], t["reruns"]
    lp = t.get("logprobs") or {}
    own = lp.get("own") or {}
    first = next((own[s] for s in SIDES if own.get(s, {}).get("exact")), None)
    if first is not None and abs(first["margin"]) < threshold:
        return "near-tie"
    if first is not None and "verification batch" in t["summary"]:
        return "batch shape"
    margin = lp.get("margin")
    if margin is not None and abs(margin) < threshold:
        return "near-tie"
    b, c = lp.get("baseline"), lp.get("candidate")
    if b and c and [(x, f"{v:.3f}") for x, v in b] == [(x, f"{v:.3f}") for x, v in c]:
        return "batch shape"
    return "configuration"


_NATS = re.compile(r"(?<!under )(?<![\d.])(\d+\.\d{3})(?!\d)")
_PRINTED = re.compile(r"(-?\d+\.\d{3})")


def cause_contradictions(t, threshold: float = 0.05) -> list[str]:
    """Where a triage finding's cause disagrees with the evidence printed beside it (core.findings
    evidence_lines, as the report and the diff screen print it): every margin the summary quotes is one the
    printed lists give (a difference of two values of one list, or a printed margin); "the two servers compute
    different distributions" never stands beside the same top tokens; a near-tie quotes a margin under the
    threshold. Empty where they agree."""
    from spectui.core.findings import evidence_lines

    lines = evidence_lines(t.logprobs)
    out: list[str] = []
    values: set[float] = set()
    for line in lines:
        nums = [float(x) for x in _PRINTED.findall(line.split(":", 1)[-1])]
        values.update(abs(x) for x in nums)
        values.update(abs(x - y) for x in nums for y in nums)
    quoted = [float(x) for x in _NATS.findall(t.summary)]
    for q in quoted:
        if not any(abs(q - v) <= 0.0015 for v in values):
            out.append(f"the summary quotes {q:.3f}, which no printed evidence gives: {lines}")
    lp = t.logprobs or {}
    b, c = lp.get("baseline"), lp.get("candidate")
    if "compute different distributions" in t.summary and b and c:
        if [(x, f"{v:.3f}") for x, v in b] == [(x, f"{v:.3f}") for x, v in c]:
            out.append(f"'different distributions' beside the same top tokens: {b} and {c}")
    if t.cause == "near-tie" and (not quoted or quoted[0] >= threshold):
        out.append(f"a near-tie whose first quoted margin is not under {threshold}: {t.summary}")
    return out


def first_difference(a: bytes, b: bytes) -> int | None:
    """The first byte where a and b differ (the shorter one's end where one is a prefix), None if equal."""
    for i in range(min(len(a), len(b))):
        if a[i] != b[i]:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def verdict_by_hand(low: float, high: float, tolerance: float = 0.02) -> str:
    """README: an interval containing 1.00, or within ±2 % of it, is no measurable difference."""
    if low <= 1.0 <= high or (1 - tolerance <= low and high <= 1 + tolerance):
        return "no measurable difference"
    return "faster" if low > 1.0 else "slower"


def sampling_samples(session: Path) -> list[dict]:
    """Each sample of a `spectui sampling --save` session, read from its raw lines: per side the token
    sequence (ids, or each token's bytes where a server gave no id) and the output bytes."""
    samples: list[dict] = []
    for line in session.read_text(encoding="utf-8").splitlines()[1:]:
        rec = json.loads(line)
        if rec.get("type") == "prompt":
            samples.append({side: {"ids": [], "data": [], "tail": b"", "failed": False} for side in SIDES})
        elif rec.get("type") == "event" and samples:
            side = samples[-1][rec["side"]]
            if rec["ev"] == "token":
                data = rec["d"].encode() if "d" in rec else bytes.fromhex(rec["x"])
                side["ids"].append(rec["id"])
                side["data"].append(data)
            elif rec["ev"] == "finish":
                side["tail"] = rec["tail"].encode() if "tail" in rec else bytes.fromhex(rec.get("tail_x", ""))
            elif rec["ev"] == "failed":
                side["failed"] = True
    for s in samples:
        for side in SIDES:
            d = s[side]
            d["seq"] = d["ids"] if None not in d["ids"] else d["data"]
            d["output"] = b"".join(d["data"]) + d["tail"]
    return samples


ENDED = ("ended",)  # a sample that had ended by a position: a category of its own there


def tvd_by_hand(a: list, b: list) -> float:
    """README: every token its own category (nothing pooled), then the total variation distance."""
    pa, pb = Counter(a), Counter(b)
    return 0.5 * sum(abs(pa[k] / len(a) - pb[k] / len(b)) for k in pa.keys() | pb.keys())


def check_sampling(p: dict, samples: list[dict]) -> None:
    """A sampling prompt's JSON against its saved samples: the seeded count from the bytes and ids, each
    position's sample sizes and TVD by hand (no pooling, an ended sample its own category), no position's
    p below the whole test's, and the verdict its rule gives."""
    assert p["samples"] == len(samples)
    same = [
        s["baseline"]["output"] == s["candidate"]["output"] and s["baseline"]["ids"] == s["candidate"]["ids"]
        for s in samples
    ]
    assert p["seeded_identical"] == sum(same)
    done = {side: [s[side] for s in samples if not s[side]["failed"]] for side in SIDES}
    with_ids = all(None not in d["ids"] for side in SIDES for d in done[side])
    assert p["compared"] == ("token ids" if with_ids else "token bytes") or not p["positions"]
    seqs = {side: [d["ids"] if with_ids else d["data"] for d in done[side]] for side in SIDES}
    for t in p["positions"]:
        k = t["position"]
        a, b = ([q[k] if len(q) > k else ENDED for q in seqs[side]] for side in SIDES)
        assert list(t["n"]) == [len(a), len(b)], t
        assert abs(t["tvd"] - tvd_by_hand(a, b)) < 1e-9, (t, tvd_by_hand(a, b))
        assert 0 < t["p_adjusted"] <= 1
        assert t["p_adjusted"] >= p["test"]["p"] - 1e-12  # the whole test's p is the smallest
    test = p["test"]
    if test is not None:
        if test["reason"]:
            want = "not enough samples to decide"
        else:
            want = "different" if test["p"] < p["level"] else "consistent"
        assert p["verdict"] == want


def sampling_exit(p: dict) -> int:
    """The exit status a sampling prompt's findings give: 3 for a difference (or a seeded mismatch where
    seeded bytes are, or may be, promised), 4 for not enough samples to decide, else 0."""
    if p["verdict"] == "different" or p["seeded_mismatch_is_failure"]:
        return 3
    return 4 if p["verdict"] == "not enough samples to decide" else 0


# Student's t, two-sided 95 % (the 0.975 quantile), by degrees of freedom: from the printed tables
T975 = {1: 12.706204736, 2: 4.302652730, 3: 3.182446305, 4: 2.776445105, 5: 2.570581836, 6: 2.446911851, 7: 2.364624252}


def log_t_interval(values: list[float]) -> tuple[float, float, float]:
    """README: a speed-up over paired runs is the geometric mean of the ratios with a 95 % t-interval on
    their logarithms, written out."""
    import math

    logs = [math.log(v) for v in values]
    n = len(logs)
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = T975[n - 1] * sd / math.sqrt(n)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)
