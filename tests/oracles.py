"""Expected values computed by the tests themselves, from the README's rules and the raw data."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

SIDES = ("baseline", "candidate")


def cause_by_the_evidence(t: dict, threshold: float = 0.05) -> str:
    """Triage's cause for a pair whose reruns both reproduced their side with no cache reused (README's
    order): a near-tie where the exact margin between the two chosen tokens is under the threshold
    (`--near-tie`, 0.05 nats), else the configuration."""
    assert [r["identical"] for r in t["reruns"]] == [True, True], t["reruns"]
    margin = (t.get("logprobs") or {}).get("margin")
    return "near-tie" if margin is not None and abs(margin) < threshold else "configuration"


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


def pooled_tvd(a: list, b: list, rare: int = 5) -> float:
    """README: rare tokens (fewer than 5 over both samples) pooled, then the total variation distance."""
    both = Counter(a) + Counter(b)
    pa = Counter(x if both[x] >= rare else "other" for x in a)
    pb = Counter(x if both[x] >= rare else "other" for x in b)
    return 0.5 * sum(abs(pa[k] / len(a) - pb[k] / len(b)) for k in pa.keys() | pb.keys())


def holm(p: list[float]) -> list[float]:
    """Holm's step-down adjustment, written out: the k-th smallest p times (m − k + 1), kept monotone."""
    m = len(p)
    out, running = [0.0] * m, 0.0
    for k, i in enumerate(sorted(range(m), key=lambda j: p[j])):
        running = max(running, min(1.0, (m - k) * p[i]))
        out[i] = running
    return out


def check_sampling(p: dict, samples: list[dict]) -> None:
    """A sampling prompt's JSON against its saved samples: the seeded count from the bytes and ids, each
    position's sample sizes and pooled TVD by hand, Holm's adjustment, and the verdict its rule gives."""
    assert p["samples"] == len(samples)
    same = [
        s["baseline"]["output"] == s["candidate"]["output"] and s["baseline"]["ids"] == s["candidate"]["ids"]
        for s in samples
    ]
    assert p["seeded_identical"] == sum(same)
    ok = [s for s in samples if not (s["baseline"]["failed"] or s["candidate"]["failed"])]
    for t in p["positions"]:
        k = t["position"]
        a = [s["baseline"]["seq"][k] for s in ok if len(s["baseline"]["seq"]) > k]
        b = [s["candidate"]["seq"][k] for s in ok if len(s["candidate"]["seq"]) > k]
        assert list(t["n"]) == [len(a), len(b)], t
        assert abs(t["tvd"] - pooled_tvd(a, b)) < 1e-9, (t, pooled_tvd(a, b))
        assert 0 < t["p"] <= 1
    adjusted = holm([t["p"] for t in p["positions"]])
    assert all(abs(t["p_holm"] - h) < 1e-9 for t, h in zip(p["positions"], adjusted))
    if p["positions"]:
        want = "different" if min(adjusted) < p["level"] else "consistent"
        assert p["verdict"] == want
