"""The lab notebook: a TOML file with one [[measurement]] per finished comparison.

Appending adds text after what is there (earlier entries stay byte for byte), through a temporary file
and an atomic replace. A notebook that is not valid TOML is never overwritten: the measurement goes to
a side file next to it, and spectui says where.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import math
import os
from pathlib import Path

import tomli_w

from spectui.core import runner
from spectui.core.errors import InputError
from spectui.store.bounded import load_toml_file, parse_toml_text, read_text_bounded
from spectui.store.locations import atomic_write, data_dir
from spectui.store.session import info_from_json

NOTEBOOK_MAX = 64 << 20  # years of measurements are a few MiB


def notebook_path(explicit: str | None = None) -> Path:
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("SPECTUI_NOTEBOOK")
    if env:
        return Path(env).expanduser()
    return data_dir() / "notebook.toml"


def measurements(results, infos, profile: str | None = None) -> list[dict]:
    """One measurement per prompt; repeated runs become one entry with the speed-up (the geometric mean
    of the paired ratios), its interval and N."""
    out = []
    for g in runner.grouped(results):
        m = measurement(g.runs[0], infos, profile)
        if len(g.runs) > 1:
            sp, db, dc = g.speedup, g.decode("baseline"), g.decode("candidate")
            m.update(
                {
                    k: v
                    for k, v in {
                        "runs": len(g.runs),
                        "failed_runs": len(g.failed_runs) or None,  # never measured
                        "speedup": sp.median if sp else None,
                        "speedup_low": sp.low if sp else None,
                        "speedup_high": sp.high if sp else None,
                        "speedup_verdict": g.verdict,
                        "identical": all(r.identical for r in g.runs)
                        if all(r.identical is not None for r in g.runs)
                        else None,
                        "divergent_runs": g.divergent_runs or None,
                        "acceptance_moved": g.acceptance_moved or None,
                        "baseline_tokens_per_s": db.median if db else None,
                        "candidate_tokens_per_s": dc.median if dc else None,
                    }.items()
                    if v is not None
                }
            )
            m = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items()}
        else:
            m["runs"] = 1
        out.append(m)
    return out


def measurement(result, infos, profile: str | None = None) -> dict:
    """One [[measurement]] from a PromptResult and both servers' identities (None values left out)."""
    b, c = result.baseline.figures, result.candidate.figures
    v = result.verdict
    # a figure exists only where it was measured: a side that failed or never finished gives no rate,
    # and the candidate's acceptance and the speed-up need it to have finished too
    b_done, c_done = result.baseline.finished is not None, result.candidate.finished is not None
    m = {
        "date": dt.datetime.now(dt.UTC).replace(microsecond=0),
        "profile": profile,
        "prompt_id": result.prompt.id,
        "baseline_build": infos["baseline"].build,
        "candidate_build": infos["candidate"].build,
        "baseline_model": infos["baseline"].model,
        "candidate_model": infos["candidate"].model,
        "baseline_config": infos["baseline"].describe_speedup(),
        "candidate_config": infos["candidate"].describe_speedup(),
        "acceptance_rate": c.acceptance_rate if c_done else None,
        "drafted": c.drafted if c_done else None,
        "accepted": c.accepted if c_done else None,
        "mean_accepted_length": c.mean_accepted_length if c_done else None,
        "baseline_tokens_per_s": b.decode_tps if b_done else None,
        "candidate_tokens_per_s": c.decode_tps if c_done else None,
        "speedup": result.speedup,
        "verdict": v.status if v is not None else None,
        "verdict_reason": v.reason or None if v is not None else None,
        "compared": v.compared if v is not None and v.identical is not None else None,
        "identical": result.identical,
        "first_divergence_byte": result.divergence.byte if result.divergence else None,
        "cause": result.triage.cause if result.triage is not None else None,
        "prompt_cached": [b.prompt_cached, c.prompt_cached]
        if b.prompt_cached is not None and c.prompt_cached is not None
        else None,
    }
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items() if v is not None}


def _flat(m: dict, prefix: str = "") -> dict:
    """A measurement as one flat table (nested values get dotted-free compound keys)."""
    out: dict = {}
    for k, v in m.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat(v, key + "_"))
        elif v is not None:
            out[key] = v
    return out


def entries_text(measurements: list[dict]) -> str:
    """Each measurement as its own `[[measurement]]` table; never the inline `measurement = [...]` form,
    which a later append would turn into a duplicate key."""
    return "\n".join("[[measurement]]\n" + tomli_w.dumps(_flat(m)) for m in measurements)


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock on a file beside the notebook, held across read-append-rename: two terminals
    appending at once both land (the rename replaces the inode, so the notebook itself cannot be locked)."""
    real = path.resolve() if path.is_symlink() else path
    real.parent.mkdir(parents=True, exist_ok=True)
    lock = real.with_name(f".{real.name}.lock")
    with open(lock, "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def append(path: Path, measurements: list[dict]) -> tuple[Path, str | None]:
    """Append measurements; returns (where they went, a warning or None).

    The old text stays byte for byte; the new text is parsed before it replaces the file, so a notebook
    that would not parse afterwards is left alone and the measurements go to a side file instead. A
    notebook that cannot be written (a read-only folder, a full disk) is one InputError; nothing of it
    changed.
    """
    if path.is_dir():
        raise InputError(f"notebook {path} is a folder", hint="give --notebook a file name")
    try:
        return _append(path, measurements)
    except OSError as exc:
        raise InputError(
            f"cannot write notebook {path}: {exc.strerror or exc}", hint="nothing was appended; it is as it was"
        ) from None


def _append(path: Path, measurements: list[dict]) -> tuple[Path, str | None]:
    block = entries_text(measurements)
    with _locked(path):
        existing = ""
        problem = None
        if path.exists():
            try:
                existing = read_text_bounded(path, "notebook", NOTEBOOK_MAX)
                parse_toml_text(existing, f"notebook {path}")
            except InputError as exc:
                problem = f"cannot take the new entries ({exc})"
        sep = "" if not existing or existing.endswith("\n\n") else ("\n" if existing.endswith("\n") else "\n\n")
        text = existing + sep + block
        if problem is None:
            try:
                parsed = parse_toml_text(text, f"notebook {path}")
                if not isinstance(parsed.get("measurement"), list):
                    raise ValueError("measurement is not a list of tables")
            except (InputError, ValueError) as exc:
                problem = f"would not parse with the new entries ({exc}; does it use the key 'measurement' itself?)"
        if problem is not None:
            side = path.with_name(path.name + ".pending.toml")
            prior = side.read_text(encoding="utf-8") if side.exists() else ""
            atomic_write(side, prior + ("\n" if prior and not prior.endswith("\n\n") else "") + block)
            return side, f"notebook {path} {problem}; left it untouched and wrote the measurement to {side}"
        atomic_write(path, text)
    return path, None


def read(path: Path) -> list[dict]:
    if path.is_dir():
        raise InputError(f"notebook {path} is a folder", hint="give --notebook a file name")
    if not path.exists():
        return []
    rows = load_toml_file(path, "notebook", NOTEBOOK_MAX).get("measurement", [])
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def _figure(m: dict, key: str, spec: str, missing: str = "—") -> str:
    """A figure as the table shows it: '—' when absent, '?' when the notebook holds something that is not
    a finite number there (a hand edit, an old import): `notebook show` survives any value."""
    v = m.get(key)
    if v is None:
        return missing
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return "?"
    return format(v, spec)


def _word(m: dict, key: str, missing: str = "") -> str:
    v = m.get(key, missing)
    return " ".join(str(v).split())[:60]  # one line, whatever the value (a table, a list, a date)


def _described(server) -> str | None:
    """A recorded server's speed-up configuration as every other entry names it."""
    try:
        return info_from_json(server).describe_speedup() if server else None
    except (TypeError, ValueError, AttributeError):
        return None


def show_text(path: Path) -> str:
    rows = read(path)
    if not rows:
        return f"{path}: no measurements yet (spectui compare --notebook appends one per prompt)"
    lines = [f"{path}: {len(rows)} measurements", ""]
    lines.append(f"{'date':<20} {'prompt':<16} {'speed-up':>8} {'accept':>7} {'mean len':>8} {'same':<9} candidate")
    for m in rows:
        date = _word(m, "date", "?")[:19]
        if m.get("kind") == "import":  # another tool's result: its throughput and latencies, and which tool
            acc = f"  accept {_figure(m, 'acceptance_rate', '.0%')}" if "acceptance_rate" in m else ""
            lines.append(
                f"{date:<20} {'(' + _word(m, 'source_tool', '?') + ')':<16} "
                f"out {_figure(m, 'output_tokens_per_s', '.1f')} tok/s  TTFT {_figure(m, 'ttft_ms_mean', '.0f')} ms"
                f"  ITL {_figure(m, 'itl_ms_mean', '.1f')} ms{acc}  {_word(m, 'source_version')} "
                f"{_word(m, 'source_file')}"
            )
            continue
        acc = _figure(m, "acceptance_rate", ".0%")
        sp = _figure(m, "speedup", ".2f")
        sp = sp + "×" if sp not in ("—", "?") else sp
        ml = _figure(m, "mean_accepted_length", ".2f")
        identical = m.get("identical")
        same = {"identical": "identical", "differs": "DIFFERS", "failed": "FAILED", "incomplete": "incomplete"}.get(
            _word(m, "verdict"), "identical" if identical is True else ("DIFFERS" if identical is False else "—")
        )
        lines.append(
            f"{date:<20} {_word(m, 'prompt_id', '?'):<16} {sp:>8} {acc:>7} {ml:>8} "
            f"{same:<9} {_word(m, 'candidate_config')} ({_word(m, 'candidate_build', '?')})"
        )
    return "\n".join(lines)


def certificate_entry(doc: dict) -> dict:
    """One [[measurement]] for a `spectui prove` certificate: its verdict line and headline figures (the
    certificate itself, beside its sessions, holds the rest)."""
    d, mo = doc["derived"], doc["measured_on"]
    sp, acc = d["speedup"]["overall"] or {}, d.get("acceptance") or {}
    servers = mo.get("servers", {})
    m = {
        "date": dt.datetime.now(dt.UTC).replace(microsecond=0),
        "kind": "certificate",
        "prompt_id": f"({doc['inputs']['prompt_set'].get('name')})",
        "certificate": doc.get("_path"),
        "verdict": {"identical": "identical", "different": "differs"}.get(doc["verdict"]["status"], "incomplete"),
        "verdict_line": doc["verdict"]["line"],
        "prompt_set_sha256": doc["inputs"]["prompt_set"]["sha256"],
        "prompts": d["greedy"]["prompts"],
        "identical_prompts": d["greedy"]["identical"],
        "speedup": sp.get("value"),
        "speedup_low": sp.get("low"),
        "speedup_high": sp.get("high"),
        "acceptance_rate": acc.get("acceptance_rate"),
        "mean_accepted_length": (acc.get("mean_accepted_length") or {}).get("value"),
        "alpha": (acc.get("alpha") or {}).get("value"),
        "baseline_build": servers.get("baseline", {}).get("build"),
        "candidate_build": servers.get("candidate", {}).get("build"),
        # in compare's words (ServerInfo.describe_speedup: "spec draft-simple"), not the dict's repr
        "candidate_config": _described(servers.get("candidate")),
    }
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items() if v is not None}
