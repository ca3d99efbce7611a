"""NVIDIA Model-Optimizer's `speculation_profile.json` (schema 1.0, specdec_bench/speculation_profile.py, its PR
2247): a draft's measured acceptance per draft position, so it travels to other tools (dynamo's simulator reads
the conditional vector, vLLM's synthetic sampler the marginal one).

Per draft position i (0-based), from the histogram of acceptance lengths L (tokens a verification step emits:
accepted drafts + the target's own token, so L = 1 when nothing was accepted):

    marginal[i]    = P(L ≥ i + 2)                  every one of the first i+1 drafts accepted
    conditional[i] = P(L ≥ i + 2) / P(L ≥ i + 1)   draft i+1 accepted given the first i were
    mean_accept_length = Σ L·n(L) / Σ n(L)  =  1 + Σ marginal  (longest-prefix verification)

spectui writes one beside prove's certificate and the drafts lesson's result, from the verification steps of
the candidate's streams, and `spectui theory --profile FILE` reads one (its marginal vector as α per position).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from spectui.core.errors import InputError
from spectui.store.bounded import load_json_object
from spectui.store.locations import atomic_write

SCHEMA_VERSION = "1.0"
FILE_NAME = "speculation_profile.json"
# Model-Optimizer's chain drafters (a K=n draft is a prefix of the K=n+1 one): their vectors extrapolate over K
_CHAIN_METHODS = {"draft-simple", "draft-eagle3", "draft-mtp", "eagle", "eagle3", "draft_model", "mtp"}
_MAX_BYTES = 1 << 20  # a profile is a few kB; a bigger file is not one


def histogram_of(accepted_per_step: Iterable[int]) -> dict[int, int]:
    """{acceptance length: steps}, L = accepted + 1 per verification step."""
    hist: dict[int, int] = {}
    for a in accepted_per_step:
        hist[a + 1] = hist.get(a + 1, 0) + 1
    return dict(sorted(hist.items()))


def vectors(hist: Mapping[int, int], k: int) -> tuple[list[float], list[float]]:
    """(conditional, marginal) over draft positions 0..k−1 from an acceptance-length histogram."""
    n = sum(hist.values())
    if not n:
        return [0.0] * k, [0.0] * k

    def survival(length: int) -> float:
        return sum(c for ln, c in hist.items() if ln >= length) / n

    marginal = [survival(i + 2) for i in range(k)]
    conditional = [(survival(i + 2) / s) if (s := survival(i + 1)) else 0.0 for i in range(k)]
    return conditional, marginal


def build(
    hist: Mapping[int, int],
    k: int,
    method: str | None,
    target_model: str | None = None,
    draft_model: str | None = None,
    conditions: dict | None = None,
    per_request_mean: float | None = None,
) -> dict:
    """The profile, field for field as Model-Optimizer's build_profile writes it."""
    n = sum(hist.values())
    mean = sum(ln * c for ln, c in hist.items()) / n if n else 0.0
    conditional, marginal = vectors(hist, k)
    implied = 1.0 + sum(marginal)
    violations = [
        {"position": i, "value": marginal[i], "previous": marginal[i - 1]}
        for i in range(1, len(marginal))
        if marginal[i] > marginal[i - 1] + 1e-9
    ]
    return {
        "schema_version": SCHEMA_VERSION,
        "measured": bool(n),
        "method": method,
        "draft_checkpoint": {"id": draft_model} if draft_model else None,
        "target_model": {"id": target_model} if target_model else None,
        "num_speculative_tokens": k,
        "block_size": None,
        "max_supported_k": k,
        "verification_method": "longest_prefix",
        "conditional_accept_rates": [round(x, 6) for x in conditional],
        "marginal_accept_rates": [round(x, 6) for x in marginal],
        "mean_accept_length": round(mean, 6),
        "mean_accept_length_per_request": round(per_request_mean if per_request_mean is not None else mean, 6),
        "accept_length_model": "chain_analytic" if (method or "") in _CHAIN_METHODS else "measured_per_k",
        "accept_length_by_k": {str(k): round(mean, 6)},
        "acceptance_length_histogram": {str(ln): c for ln, c in sorted(hist.items())},
        "per_category": None,
        "measurement_conditions": {"producer": "spectui", **(conditions or {})},
        "validation": {
            "mean_consistency": {
                "implied_mean_accept_length": round(implied, 6),
                "reported_mean_accept_length": round(mean, 6),
                "abs_delta": round(abs(implied - mean), 6),
                "tolerance": 0.02,
                "passed": abs(implied - mean) <= 0.02,
            },
            "marginal_monotonicity": {"passed": not violations, "violations": violations},
        },
    }


def from_results(results, target_model: str | None = None, conditions: dict | None = None) -> dict | None:
    """The candidate's profile over finished prompt results (core.runner.PromptResult): its verification steps'
    accepted counts, K the largest `speculative.n_max` its final events named (else the most drafted in a step),
    the method the chain llama.cpp named. None where it drafted nothing."""
    steps = [st for r in results if r.candidate.finished is not None for st in r.candidate.steps]
    if not steps:
        return None
    k, types = 0, ""
    for r in results:
        fin = r.candidate.finished
        if fin is None:
            continue
        v = fin.settings.get("speculative.n_max")
        if isinstance(v, int) and not isinstance(v, bool):
            k = max(k, v)
        types = str(fin.settings.get("speculative.types") or types)
    k = k or max(st.drafted for st in steps)
    method = ",".join(t for t in types.split(",") if t and t != "none") or None
    per_request = [
        sum(st.accepted + 1 for st in r.candidate.steps) / len(r.candidate.steps)
        for r in results
        if r.candidate.finished is not None and r.candidate.steps
    ]
    mean_req = sum(per_request) / len(per_request) if per_request else None
    return build(histogram_of(st.accepted for st in steps), k, method, target_model, None, conditions, mean_req)


def write(profile: dict, folder: Path) -> Path:
    """The profile as `speculation_profile.json` in `folder`, written atomically."""
    path = folder / FILE_NAME
    atomic_write(path, json.dumps(profile, indent=2, sort_keys=False) + "\n")
    return path


@dataclass(frozen=True)
class Profile:
    """What theory reads of a profile."""

    path: str
    method: str | None
    k: int
    conditional: list[float]
    marginal: list[float]
    mean_accept_length: float | None

    @property
    def alpha_by_position(self) -> list[float]:
        """P(draft i accepted | the ones before were): the conditional vector."""
        return list(self.conditional)


def read(path: str | Path) -> Profile:
    """A speculation_profile.json, checked at the boundary: one-line errors naming the file and the key."""
    p = Path(path).expanduser()
    if not p.exists():
        raise InputError(f"{p}: no such file", hint="give the speculation_profile.json prove or drafts wrote")
    doc = load_json_object(p, "speculation profile", _MAX_BYTES)  # a FIFO, size, depth, NaN: one line
    if not isinstance(doc, dict) or "marginal_accept_rates" not in doc:
        raise InputError(f"{p}: not a speculation profile (no marginal_accept_rates)")
    version = str(doc.get("schema_version", ""))
    if version.split(".")[0] != "1":
        raise InputError(f"{p}: schema_version {version!r}; spectui reads 1.x")

    def rates(key: str) -> list[float]:
        v = doc.get(key)
        if not isinstance(v, list) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1 for x in v
        ):
            raise InputError(f"{p}: {key} must be a list of rates between 0 and 1")
        return [float(x) for x in v]

    marginal, conditional = rates("marginal_accept_rates"), rates("conditional_accept_rates")
    if len(marginal) != len(conditional):
        raise InputError(f"{p}: conditional_accept_rates and marginal_accept_rates differ in length")
    mean = doc.get("mean_accept_length")
    return Profile(
        str(p),
        doc.get("method") if isinstance(doc.get("method"), str) else None,
        len(marginal),
        conditional,
        marginal,
        float(mean) if isinstance(mean, (int, float)) and not isinstance(mean, bool) else None,
    )
