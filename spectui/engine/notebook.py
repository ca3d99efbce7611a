"""The lab notebook: a TOML file with one [[measurement]] per finished comparison.

Appending adds text after what is there (earlier entries stay byte for byte), through a temporary file
and an atomic replace. A notebook that is not valid TOML is never overwritten: the measurement goes to
a side file next to it, and spectui says where.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
import tomllib
from pathlib import Path

import tomli_w

from spectui.engine.errors import InputError


def notebook_path(explicit: str | None = None) -> Path:
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("SPECTUI_NOTEBOOK")
    if env:
        return Path(env).expanduser()
    from spectui.engine.config import data_dir

    return data_dir() / "notebook.toml"


def measurement(result, infos, profile: str | None = None) -> dict:
    """One [[measurement]] from a PromptResult and both servers' identities (None values left out)."""
    b, c = result.baseline.figures, result.candidate.figures
    m = {
        "date": dt.datetime.now(dt.timezone.utc).replace(microsecond=0),
        "profile": profile,
        "prompt_id": result.prompt.id,
        "baseline_build": infos["baseline"].build,
        "candidate_build": infos["candidate"].build,
        "baseline_model": infos["baseline"].model,
        "candidate_model": infos["candidate"].model,
        "baseline_config": infos["baseline"].describe_speedup(),
        "candidate_config": infos["candidate"].describe_speedup(),
        "acceptance_rate": c.acceptance_rate,
        "drafted": c.drafted,
        "accepted": c.accepted,
        "mean_accepted_length": c.mean_accepted_length,
        "baseline_tokens_per_s": b.decode_tps,
        "candidate_tokens_per_s": c.decode_tps,
        "speedup": result.speedup,
        "identical": result.identical,
        "first_divergence_byte": result.divergence.byte if result.divergence else None,
        "prompt_cached": [b.prompt_cached, c.prompt_cached] if b.prompt_cached is not None and c.prompt_cached is not None else None,
    }
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items() if v is not None}


def atomic_write(path: Path, text: str) -> None:
    """Write a file users keep: a temporary beside it, fsync, then an atomic rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def append(path: Path, measurements: list[dict]) -> tuple[Path, str | None]:
    """Append measurements; returns (where they went, a warning or None)."""
    block = tomli_w.dumps({"measurement": measurements})
    existing = ""
    if path.exists():
        try:
            existing = path.read_text(encoding="utf-8")
            tomllib.loads(existing)
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            side = path.with_name(path.name + ".pending.toml")
            prior = side.read_text(encoding="utf-8") if side.exists() else ""
            atomic_write(side, prior + ("\n" if prior and not prior.endswith("\n\n") else "") + block)
            return side, (f"notebook {path} is not valid TOML ({exc}); left it untouched and "
                          f"wrote the measurement to {side}")
    sep = "" if not existing or existing.endswith("\n\n") else ("\n" if existing.endswith("\n") else "\n\n")
    atomic_write(path, existing + sep + block)
    return path, None


def read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    try:
        return tomllib.loads(path.read_text(encoding="utf-8")).get("measurement", [])
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"notebook {path} is not valid TOML: {exc}") from None


def show_text(path: Path) -> str:
    rows = read(path)
    if not rows:
        return f"{path}: no measurements yet (spectui compare --notebook appends one per prompt)"
    lines = [f"{path}: {len(rows)} measurements", ""]
    lines.append(f"{'date':<20} {'prompt':<16} {'speed-up':>8} {'accept':>7} {'mean len':>8} {'same':<9} candidate")
    for m in rows:
        acc = f"{m['acceptance_rate']:.0%}" if "acceptance_rate" in m else "—"
        sp = f"{m['speedup']:.2f}×" if "speedup" in m else "—"
        ml = f"{m['mean_accepted_length']:.2f}" if "mean_accepted_length" in m else "—"
        same = {True: "identical", False: "DIFFERS"}.get(m.get("identical"), "—")
        lines.append(f"{str(m.get('date', '?'))[:19]:<20} {m.get('prompt_id', '?'):<16} {sp:>8} {acc:>7} {ml:>8} "
                     f"{same:<9} {m.get('candidate_config', '')} ({m.get('candidate_build', '?')})")
    return "\n".join(lines)
