"""`spectui regress OLD NEW`: two certificates of the same prompt set (another build, draft or flag), judged
as a CI gate must: a new divergence, fewer prompts identical or compared (a candidate that no longer
completes), a sampled prompt that passed and now is different, undecided or failed, a figure measured
before and not now, per-position acceptance lower beyond the intervals on the positions both drafted, the
speed-up lower beyond its intervals (judged only on the same hardware and mode). Mean accepted length
(1 + Σᵢ P(positions 1…i accepted)) falls by itself when fewer positions are drafted: it is judged only when
both drafted the same n-max. Exit 0, 4, or 2, with the reason on one line.

Comparability rests on what the sessions show (verify re-derives them): the servers' models as recorded,
the machine as the probes sampled it, the order the pairs ran in. A stated field (the model file's
sha256, the CPU's name) may only refuse a comparison, never allow one. A figure that cannot be judged (the
speed-up on different machines or modes, or without any interval) never gives exit 0: with nothing else
worse the pair is INCOMPARABLE (2). At temperature 0 the acceptance counts are exact (every run drafts and
accepts the same), so without an interval a lower count is judged as it is; a speed-up measured once per
prompt is judged on its interval over the prompts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from spectui.core.errors import InputError
from spectui.core.types import SIDES
from spectui.run.prove.certificate import load, machine_names, verify
from spectui.run.prove.derive import load_sessions
from spectui.run.prove.setstats import interval_text

EXIT_NO_REGRESSION, EXIT_REGRESSION, EXIT_INCOMPARABLE = 0, 4, 2


@dataclass
class RegressRow:
    what: str
    old: str
    new: str
    change: str
    regression: bool = False


@dataclass
class Regression:
    code: int
    reason: str
    rows: list[RegressRow] = field(default_factory=list)

    def text(self) -> str:
        head = {0: "NO REGRESSION", 4: "REGRESSION", 2: "INCOMPARABLE"}[self.code] + f": {self.reason}"
        if not self.rows:
            return head
        w = max(len(r.what) for r in self.rows)
        wo = max(len(r.old) for r in self.rows)
        wn = max(len(r.new) for r in self.rows)
        lines = [head, "", f"{'':<{w}}  {'old':<{wo}}  {'new':<{wn}}  change"]
        for r in self.rows:
            mark = "  ◀ REGRESSION" if r.regression else ""
            lines.append(f"{r.what:<{w}}  {r.old:<{wo}}  {r.new:<{wn}}  {r.change}{mark}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {
            "code": self.code,
            "reason": self.reason,
            "rows": [r.__dict__ for r in self.rows],
        }


def _stated_sha256(doc: dict, side: str) -> str | None:
    f = doc["measured_on"].get("servers", {}).get(side, {}).get("model_file") or {}
    return f.get("sha256")


def _recorded_model(doc: dict, side: str) -> str | None:
    """The model the side's server reported, as its sessions recorded it (derived.servers)."""
    return (doc["derived"].get("servers", {}).get(side) or {}).get("model")


def machine_recorded(doc: dict) -> str | None:
    """The machine as the sessions' probes sampled it (logical cores, memory, system, GPUs); None where no
    probe was recorded (or the sessions cannot be read)."""
    base = Path(doc["_path"]).parent
    try:
        sessions = load_sessions(doc["sessions"], base)
    except (InputError, OSError, KeyError, TypeError, ValueError):  # compared --no-verify: the machine is unknown
        return None
    seen = set()
    for phase in sessions.values():
        for s in phase:
            for sp in s.prompts:
                for _, gpus, host in sp.probes:
                    h = (host.cpu_count, host.memory_total, host.machine, host.system) if host is not None else None
                    seen.add((h, tuple(sorted(g.name for g in gpus))))
    return repr(sorted(seen, key=repr)) if seen else None


def not_same_machine(old: dict, new: dict) -> str | None:
    """Why the speed-ups were not measured on one machine: the probes' records differ, or (where they do
    not tell) the stated hardware differs. None: the same as far as the sessions and statements show."""
    a, b = machine_recorded(old), machine_recorded(new)
    if a is not None and b is not None and a != b:
        return "measured on different machines (the sessions' probes: cores, memory, system or GPUs differ)"
    if machine_names(old["measured_on"].get("hardware")) != machine_names(new["measured_on"].get("hardware")):
        return "measured on different hardware (stated: measured_on.hardware)"
    return None


def incomparable(old: dict, new: dict) -> str | None:
    a, b = old["inputs"], new["inputs"]
    if a["prompt_set"]["sha256"] != b["prompt_set"]["sha256"]:
        return (
            f"different prompt sets ({a['prompt_set'].get('name')} {a['prompt_set']['sha256'][:12]} vs "
            f"{b['prompt_set'].get('name')} {b['prompt_set']['sha256'][:12]})"
        )
    if sorted(a.get("share") or []) != sorted(b.get("share") or []):
        return "different shares of the prompt set (merge the shards first, or compare the same shard)"
    for key in ("max_tokens", "cache_prompt"):
        if a["params"].get(key) != b["params"].get(key):
            return f"different {key} ({a['params'].get(key)} vs {b['params'].get(key)})"
    for side in SIDES:
        x, y = _recorded_model(old, side), _recorded_model(new, side)
        if x and y and x != y:
            return f"different {side} models as the servers reported them ({x} vs {y})"
        x, y = _stated_sha256(old, side), _stated_sha256(new, side)
        if x and y and x != y:
            return f"different {side} model files (stated sha256 {_short_id(x)} vs {_short_id(y)})"
    return None


def compared(g: dict) -> int:
    """Prompts with a verdict on every scheduled run: identical or differing."""
    return int(g["identical"]) + int(g["differs"])


def identity_rows(old: dict, new: dict) -> list[RegressRow]:
    """Greedy: a new divergence, fewer prompts identical or fewer compared (a candidate that no longer
    completes is the worst regression a gate can see); sampled: a prompt that passed and now is different,
    undecided or failed."""
    rows = _greedy_rows(old["derived"]["greedy"], new["derived"]["greedy"])
    sampled = _sampled_row(old["derived"].get("sampled"), new["derived"].get("sampled"))
    return rows + ([sampled] if sampled is not None else [])


def _greedy_rows(og: dict, ng: dict) -> list[RegressRow]:
    ostat = {p["id"]: p["status"] for p in og["per_prompt"]}
    new_div = [p["id"] for p in ng["per_prompt"] if p["status"] == "differs" and ostat.get(p["id"]) != "differs"]
    fixed = [p["id"] for p in ng["per_prompt"] if p["status"] == "identical" and ostat.get(p["id"]) == "differs"]
    n_old = og["prompts"] + len([i for i in og.get("not_run") or [] if i not in ostat])
    nstat = {p["id"]: p["status"] for p in ng["per_prompt"]}
    n_new = ng["prompts"] + len([i for i in ng.get("not_run") or [] if i not in nstat])
    fewer = ng["identical"] < og["identical"]
    rows = [
        RegressRow(
            "greedy identical",
            f"{og['identical']}/{n_old}",
            f"{ng['identical']}/{n_new}",
            (
                f"new divergence on {', '.join(new_div)}"
                if new_div
                else f"fewer identical ({og['identical']} → {ng['identical']})"
                if fewer
                else "no new divergence"
            )
            + (f"; identical again on {', '.join(fixed)}" if fixed else ""),
            bool(new_div) or fewer,
        )
    ]
    if compared(ng) < compared(og):
        lost = [
            i
            for i, st in ostat.items()
            if st in ("identical", "differs") and nstat.get(i) not in ("identical", "differs")
        ]
        rows.append(
            RegressRow(
                "greedy compared",
                f"{compared(og)}/{n_old}",
                f"{compared(ng)}/{n_new}",
                f"no longer compared: {', '.join(lost[:5]) or 'fewer prompts'} (a side failed, was cut off or not run)",
                True,
            )
        )
    return rows


def _sampled_row(os_: dict | None, ns: dict | None) -> RegressRow | None:
    if os_ and ns:
        opass = {p["id"] for p in os_["prompts"] if p["status"] in ("identical", "consistent")}
        nst = {p["id"]: p["status"] for p in ns["prompts"]}
        worse = [
            f"{i} ({nst.get(i, 'not run')})" for i in sorted(opass) if nst.get(i) not in ("identical", "consistent")
        ]
        return RegressRow(
            "sampled",
            f"{os_['passed']}/{os_['total']}",
            f"{ns['passed']}/{ns['total']}",
            f"passed before, not now: {', '.join(worse)}" if worse else "no new difference",
            bool(worse),
        )
    if os_ and os_["passed"] and not ns:
        return RegressRow("sampled", f"{os_['passed']}/{os_['total']}", "—", "measured before and not now", True)
    return None


def acceptance_rows(old: dict, new: dict) -> list[RegressRow]:
    """Mean accepted length (judged only at the same n-max), acceptance per drafted token (shown), and
    per-position acceptance on the positions both drafted, each lower beyond the intervals or not."""
    rows: list[RegressRow] = []
    oa, na = old["derived"].get("acceptance") or {}, new["derived"].get("acceptance") or {}
    if oa.get("drafted") and not na.get("drafted"):
        rows.append(RegressRow("acceptance", "measured", "not measured", "measured before and not now", True))
    elif oa.get("drafted") or na.get("drafted"):
        low, how = _lower(oa.get("mean_accepted_length"), na.get("mean_accepted_length"), exact=True)
        same, drafts = _same_draft(old, new)
        if not same:  # 1 + Σᵢ P(positions 1…i accepted): it falls by itself when fewer positions are drafted
            low, how = False, f"{drafts}: not judged"
        rows.append(
            RegressRow(
                "mean accepted length",
                interval_text(oa.get("mean_accepted_length")),
                interval_text(na.get("mean_accepted_length")),
                how,
                low,
            )
        )
        rows.append(
            RegressRow(
                "acceptance per drafted token",
                f"{oa['acceptance_rate']:.1%}" if oa.get("acceptance_rate") is not None else "—",
                f"{na['acceptance_rate']:.1%}" if na.get("acceptance_rate") is not None else "—",
                "shown, not judged (it falls with a longer draft by design)",
            )
        )
        opos, npos = oa.get("per_position") or [], na.get("per_position") or []
        for i in range(min(len(opos), len(npos))):
            low, how = _lower(opos[i], npos[i], exact=True)
            rows.append(
                RegressRow(
                    f"acceptance at position {i + 1}",
                    interval_text(opos[i], ".1%"),
                    interval_text(npos[i], ".1%"),
                    how,
                    low,
                )
            )
        if len(opos) != len(npos):
            rows.append(RegressRow("positions drafted", str(len(opos)), str(len(npos)), "the draft length changed"))
    return rows


def draft_length(doc: dict) -> int | None:
    """The candidate's n-max as its server reported it (derived from the sessions), else the positions its
    per-position counters cover."""
    spec = (doc["derived"].get("servers", {}).get("candidate") or {}).get("speculative") or {}
    n = spec.get("n_max") if isinstance(spec, dict) else None
    if isinstance(n, int) and not isinstance(n, bool) and n > 0:
        return n
    pos = (doc["derived"].get("acceptance") or {}).get("per_position")
    return len(pos) if pos else None


def _same_draft(old: dict, new: dict) -> tuple[bool, str]:
    a, b = draft_length(old), draft_length(new)
    if a is None or b is None:
        return False, "draft length not recorded (no n_max, no per-position counters)"
    if a != b:
        return False, f"draft length changed ({a} → {b})"
    return True, f"draft length {a} on both"


def _short_id(v: str) -> str:
    return v[:12] + "…" if len(v) == 64 else v


def _lower(old: dict | None, new: dict | None, exact: bool = False) -> tuple[bool, str]:
    """Lower beyond the intervals: the new figure's 95 % interval entirely below the old one's (each this
    set's, from its interleaved runs). Without an interval on both sides a change is shown, not judged —
    except an `exact` count (acceptance at temperature 0: every run drafts and accepts alike), judged as
    it is."""
    if not old or not new or old.get("value") is None or new.get("value") is None:
        return False, "not measured on both"
    change = f"{new['value'] - old['value']:+.3f}"
    if old.get("low") is None or new.get("high") is None:
        if exact:
            low = new["value"] < old["value"] - 1e-9
            return low, f"{change}, {'lower' if low else 'not lower'} (exact counts at temperature 0; no interval)"
        return False, f"{change} (no interval: 1 run; not judged)"
    apart = new["high"] < old["low"]
    if apart:
        return True, f"{change}, lower beyond the intervals"
    return False, f"{change}, intervals " + ("apart (higher)" if new["low"] > old["high"] else "overlap")


def unverified(path: str | Path, which: str) -> str | None:
    """Why a certificate cannot be compared as it is: it does not verify (a session changed or missing, a
    figure edited). regress compares only what `spectui verify` would accept."""
    v = verify(path)
    if v.ok:
        return None
    more = f" (and {len(v.problems) - 1} more)" if len(v.problems) > 1 else ""
    return (
        f"the {which} certificate does not verify: {v.problems[0]}{more}; `spectui verify {path}` names every "
        "problem, --no-verify compares it as it is"
    )


def regress(old_path: str | Path, new_path: str | Path, check: bool = True) -> Regression:
    """Two certificates of the same prompt set: new divergences, acceptance (mean accepted length,
    per-position) lower beyond its intervals, the speed-up's change with its intervals. Both are verified
    first (check=False: compared as they are, said in the reason)."""
    old, new = load(old_path), load(new_path)
    if check:
        for path, which in ((old_path, "old"), (new_path, "new")):
            if why := unverified(path, which):
                return Regression(EXIT_INCOMPARABLE, why)
    why = incomparable(old, new)
    if why:
        return Regression(EXIT_INCOMPARABLE, why)
    rows = identity_rows(old, new)
    rows += acceptance_rows(old, new)
    osp, nsp = old["derived"]["speedup"]["overall"], new["derived"]["speedup"]["overall"]
    unjudged: list[str] = []
    if osp and not nsp:
        rows.append(RegressRow("speed-up", interval_text(osp, unit="×"), "—", "measured before and not now", True))
    if osp and nsp:
        row, why = speed_row(old, new, osp, nsp)
        rows.append(row)
        if why:
            unjudged.append(f"speed-up {why}")
    bad = [r for r in rows if r.regression]
    unchecked = "" if check else " (certificates not verified: --no-verify)"
    if bad:
        what = f"{', '.join(r.what for r in bad)} worse than in {old['_path']}"
        return Regression(EXIT_REGRESSION, f"{what} ({'; '.join(r.change for r in bad)}){unchecked}", rows)
    if unjudged:
        return Regression(
            EXIT_INCOMPARABLE, f"nothing worse found, but {'; '.join(unjudged)}: not judged{unchecked}", rows
        )
    return Regression(EXIT_NO_REGRESSION, f"nothing worse beyond its interval{unchecked}", rows)


def speed_row(old: dict, new: dict, osp: dict, nsp: dict) -> tuple[RegressRow, str | None]:
    """The speed-up's row, and why it could not be judged (None: judged). Judged on the interval from the
    runs where both have one, else on the interval over the prompts (a speed-up measured once per prompt
    still has the prompts' spread); only on one machine, in one mode."""
    low, how = _lower(osp, nsp)
    if "not judged" in how:
        o, n = osp.get("over_prompts") or {}, nsp.get("over_prompts") or {}
        if o.get("low") is not None and n.get("high") is not None:
            low = n["high"] < o["low"]
            how = "lower beyond the intervals over the prompts" if low else "intervals over the prompts overlap"
    how = f"{nsp['value'] / osp['value'] - 1:+.1%}, {how.split(', ', 1)[-1] if ', ' in how else how}"
    why = None
    if "not judged" in how:
        why = "has no interval on one side (1 run and too few prompts)"
    apart_old, apart_new = bool(old["derived"].get("one_at_a_time")), bool(new["derived"].get("one_at_a_time"))
    if (machine := not_same_machine(old, new)) is not None:
        why = machine
    elif apart_old != apart_new:
        modes = {True: "one server at a time", False: "both servers up"}
        why = f"measured {modes[apart_old]} vs {modes[apart_new]}"
    if why is not None and "not judged" not in how:
        how += f"; {why}: not judged"
    row = RegressRow("speed-up", interval_text(osp, unit="×"), interval_text(nsp, unit="×"), how, low and why is None)
    return row, why
