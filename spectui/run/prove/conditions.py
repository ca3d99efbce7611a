"""The conditions a certificate states (`inputs`, `measured_on`), checked against what its sessions recorded:
each greedy record's parameters, the sampled pass's seeds, temperature and length, the prompt texts (→ the
prompt set's sha256 where the share is the whole set), the probes' GPUs and host, the session headers'
spectui version and start times, and the share against its shard's index. `verify` fails naming the field
on a mismatch. What the sessions cannot show (model files, launch command lines, URLs, the CPU's name) is
STATED: renderings label it so. The figures themselves are cross-checked in run.prove.crosscheck.

regress and merge decide comparability from these checked fields and from what the sessions recorded (the
servers' build, model and speculation from every servers record and request, the machine from the probes,
the order from the start times), so a certificate whose conditions were edited does not verify. A STATED
field is used only to refuse (merge: shards whose command lines or model files differ; regress: different
stated hardware or model file sha256 leaves the speed-up unjudged, exit 2), never to let a pair through.
"""

from __future__ import annotations

import datetime as dt
import json

from spectui.core.types import Prompt
from spectui.run.prove.provenance import prompt_set_hash
from spectui.run.prove.shard import Shard
from spectui.store.session import Session

# what the sessions cannot show: said "stated, not derivable" in every rendering
STATED = (
    "measured_on.servers.*.url",
    "measured_on.servers.*.launch_argv",
    "measured_on.servers.*.launch_flags",
    "measured_on.servers.*.prefix_cache_flag",
    "measured_on.servers.*.model_file",
    "measured_on.servers.*.draft_file",
    "measured_on.hardware.cpu",
    "measured_on.hardware.cores_physical",
    "measured_on.hardware.system",
    "measured_on.hardware.gpu_note",
    "measured_on.prompt_set.name",
    "inputs.prompt_set.name",
    "inputs.one_at_a_time.why",
    "inputs.shard",
)
STATED_WORDS = "stated, not derivable"
RUN_WINDOW = dt.timedelta(days=2)  # a certificate is made within this long of its last session's start


def _short(v) -> str:
    text = json.dumps(v, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "…"


def _one(field: str, stated, recorded: set, problems: list[str]) -> None:
    if recorded and recorded != {json.dumps(stated, default=str)}:
        seen = ", ".join(sorted(recorded))
        problems.append(f"{field}: the certificate says {_short(stated)}, the sessions recorded {seen}")


def _values(sessions: list[Session], get) -> set:
    return {json.dumps(get(sp), default=str) for s in sessions for sp in s.prompts}


def check(doc: dict, sessions: dict[str, list[Session]]) -> tuple[list[str], list[str]]:
    """(problems, checked): every stated condition the sessions can show, compared with them."""
    problems: list[str] = []
    greedy, sampled = sessions.get("greedy", []), sessions.get("sampled", [])
    inp, mo = doc["inputs"], doc["measured_on"]
    p = inp["params"]
    for key in ("max_tokens", "seed", "cache_prompt"):
        _one(f"inputs.params.{key}", p.get(key), _values(greedy, lambda sp, k=key: getattr(sp.params, k)), problems)
    _one("greedy temperature", 0.0, _values(greedy, lambda sp: sp.params.temperature), problems)
    _one("inputs.params.order", p.get("order"), _values(greedy + sampled, lambda sp: sp.order), problems)
    problems += _share(inp)
    problems += _sampled(inp, sampled)
    problems += _prompts(inp, mo, greedy + sampled)
    problems += _machine(mo, greedy + sampled)
    problems += _headers(mo, greedy + sampled)
    checked = (
        []
        if problems
        else [
            "conditions re-derived from the sessions: params, runs per prompt, the sampled seeds, temperature and "
            "length, prompt texts, probes, spectui version and date agree"
        ]
    )
    return problems, checked


def _share(inp: dict) -> list[str]:
    """The share is the shard's, derived from its index (round robin over the set, run.prove.shard): a
    certificate cannot say it is shard 2/2 and hold shard 1's prompts, nor be unsharded and hold fewer."""
    ids = [q.get("id") for q in inp["prompt_set"].get("prompts") or []]
    sh = inp.get("shard")
    if sh is None:
        want, what = ids, "the whole set (no shard)"
    elif not (isinstance(sh.get("index"), int) and isinstance(sh.get("of"), int) and 1 <= sh["index"] <= sh["of"]):
        return [f"inputs.shard: {_short(sh)} is not shard I of N with 1 ≤ I ≤ N"]
    else:
        s = Shard(sh["index"], sh["of"])
        want, what = [i for k, i in enumerate(ids) if s.takes(k)], f"shard {s.text()}'s prompts"
    if inp.get("share") != want:
        return [f"inputs.share: the certificate says {_short(inp.get('share'))}; {what} are {_short(want)}"]
    return []


def _sampled(inp: dict, sessions: list[Session]) -> list[str]:
    cfg = inp.get("sampled")
    problems: list[str] = []
    by_id: dict[str, list] = {}
    for s in sessions:
        for sp in s.prompts:
            by_id.setdefault(sp.prompt.id, []).append(sp.params)
    if not cfg:
        if by_id:
            problems.append("inputs.sampled: the certificate says none, the sessions hold a sampled pass")
        return problems
    share = set(inp.get("share") or [q["id"] for q in inp["prompt_set"]["prompts"]])
    want = [i for i in cfg.get("ids") or [] if i in share]
    if sorted(by_id) != sorted(want):
        problems.append(
            f"inputs.sampled.ids: the certificate says {_short(want)}, the sessions sampled {_short(sorted(by_id))}"
        )
    base, n = cfg.get("seed_base"), cfg.get("samples")
    for pid, params in sorted(by_id.items()):
        seeds = sorted(x.seed for x in params)
        if isinstance(base, int) and isinstance(n, int) and seeds != list(range(base, base + n)):
            problems.append(
                f"inputs.sampled.seed_base/samples: the certificate says {n} seeds from {base}, the sessions recorded "
                f"{len(seeds)} for {pid} from {seeds[0] if seeds else '—'}"
            )
        for key in ("temperature", "max_tokens"):
            vals = {json.dumps(getattr(x, key)) for x in params}
            stated = (
                float(cfg.get(key)) if key == "temperature" and isinstance(cfg.get(key), (int, float)) else cfg.get(key)
            )
            _one(f"inputs.sampled.{key}", stated, vals, problems)
    return problems


def _prompts(inp: dict, mo: dict, sessions: list[Session]) -> list[str]:
    """Each recorded prompt's id and category in the set; the set's sha256 from the texts where the share is
    the whole set (a shard's sessions hold only its share's texts: the hash is then stated)."""
    ps = inp["prompt_set"]
    listed = {q.get("id"): q.get("category") for q in ps.get("prompts") or []}
    problems: list[str] = []
    if ps.get("count") != len(ps.get("prompts") or []):
        problems.append(f"inputs.prompt_set.count: says {ps.get('count')}, the set lists {len(listed)} prompts")
    mps = mo.get("prompt_set") or {}
    for key in ("sha256", "count"):
        if mps.get(key) != ps.get(key):
            problems.append(
                f"measured_on.prompt_set.{key}: says {_short(mps.get(key))}, inputs say {_short(ps.get(key))}"
            )
    texts: dict[str, Prompt] = {}
    for s in sessions:
        for sp in s.prompts:
            q = sp.prompt
            if texts.setdefault(q.id, q) != q:
                problems.append(f"prompt {q.id}: recorded with two different texts")
            if q.id in listed and listed[q.id] != q.category:
                problems.append(
                    f"inputs.prompt_set.prompts[{q.id}].category: says {_short(listed[q.id])}, recorded {_short(q.category)}"
                )
    if listed and set(texts) == set(listed):
        digest = prompt_set_hash([texts[i] for i in listed])
        if digest != ps.get("sha256"):
            problems.append(
                f"inputs.prompt_set.sha256: the certificate says {str(ps.get('sha256'))[:16]}…, the recorded prompt "
                f"texts give {digest[:16]}…"
            )
    return problems


def _machine(mo: dict, sessions: list[Session]) -> list[str]:
    """The GPUs, logical cores and memory the probes sampled during the run (where they were sampled)."""
    gpus: set[str] = set()
    hosts: set[tuple] = set()
    probed = False
    for s in sessions:
        for sp in s.prompts:
            for _, gs, host in sp.probes:
                probed = True
                gpus |= {g.name for g in gs}
                if host is not None:
                    hosts.add((host.cpu_count, host.memory_total))
    if not probed:
        return []
    hws = [mo.get("hardware") or {}] + [sh.get("hardware") or {} for sh in mo.get("shards") or []]
    stated = {str(g.get("name")) for hw in hws for g in hw.get("gpus") or [] if isinstance(g, dict)}
    problems = []
    if stated != gpus:
        problems.append(
            f"measured_on.hardware.gpus: the certificate says {_short(sorted(stated)) if stated else 'none'}, the "
            f"sessions' probes recorded {_short(sorted(gpus)) if gpus else 'no GPU'}"
        )
    said = {(hw.get("cores_logical"), hw.get("memory_total")) for hw in hws}
    if hosts and not hosts <= said:
        problems.append(
            f"measured_on.hardware.cores_logical/memory_total: the certificate says {_short(sorted(said, key=str))}, "
            f"the sessions' probes recorded {_short(sorted(hosts))}"
        )
    return problems


def _headers(mo: dict, sessions: list[Session]) -> list[str]:
    """spectui's version from each session's header; the certificate's date within RUN_WINDOW after the
    last session began (never before it)."""
    problems: list[str] = []
    versions = set()
    starts = []
    for s in sessions:
        try:
            with open(s.path, "rb") as fh:
                head = json.loads(fh.readline())
            versions.add(str(head.get("spectui")))
        except (OSError, ValueError, AttributeError):
            problems.append(f"session {s.path.name}: its header cannot be read")
        starts.append(_when(s.created))
    if versions and mo.get("spectui") != ", ".join(sorted(versions)):
        problems.append(
            f"measured_on.spectui: the certificate says {_short(mo.get('spectui'))}, the sessions were written by "
            f"{', '.join(sorted(versions))}"
        )
    date = _when(mo.get("date"))
    # a merged certificate: each shard was made on its own date, the earliest bounds its sessions' starts
    dates = [d for d in [date] + [_when(sh.get("date")) for sh in mo.get("shards") or []] if d is not None]
    known = [t for t in starts if t is not None]
    if known:
        first, last = min(known), max(known)
        if date is None or not (last <= date <= last + RUN_WINDOW and min(dates) - RUN_WINDOW <= first):
            problems.append(
                f"measured_on.date: the certificate says {_short(mo.get('date'))}, its sessions began between "
                f"{first.isoformat(timespec='seconds')} and {last.isoformat(timespec='seconds')} (a certificate is "
                f"made after its sessions began, within {RUN_WINDOW.days} days)"
            )
    return problems


def _when(text) -> dt.datetime | None:
    try:
        t = dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.UTC)
