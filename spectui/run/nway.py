"""Measure the n-way table (labs.formats.nway) beside a certificate: each format of the formats lesson's kept
table started plain on 127.0.0.1 with the baseline's threads, run against the proof's baseline (its prompts,
parameters and runs, B C / C B), one format at a time; the speculative row from the certificate itself."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from spectui.backends.launchspec import flag_value
from spectui.core.runner import grouped, run_prompts
from spectui.core.stats import over_units, ratio_interval
from spectui.labs.formats.nway import FILE_NAME, NWay, NWayRow
from spectui.labs.formats.table import FormatsLesson
from spectui.machine.assets import find_llama_server
from spectui.run.lesson_serving import Serving, Tools, backends_for
from spectui.store.locations import atomic_write


def _paired(results) -> tuple[float | None, float | None, float | None, int]:
    """(geometric mean, low, high, runs) of the candidate-over-baseline ratios: over prompts where there are
    two or more, over the runs of one prompt otherwise."""
    units = [u for g in grouped(results) if (u := [r.speedup for r in g.runs if r.speedup])]
    if not units:
        return None, None, None, 0
    s = over_units(units) if len(units) >= 2 else ratio_interval(units[0])
    return s.median, s.low, s.high, sum(len(u) for u in units)


def _spec_row(doc: dict) -> tuple[NWayRow, float | None]:
    d = doc["derived"]
    sp = (d.get("speedup") or {}).get("overall") or {}
    rates: dict[str, list] = {"baseline": [], "candidate": []}
    for pp in d["greedy"]["per_prompt"]:
        for side in rates:
            rates[side] += [x for x in (pp.get("decode_tps") or {}).get(side) or [] if x]
    value = sp.get("value", sp.get("median"))
    runs = d["greedy"].get("runs") or 0
    row = NWayRow(
        "speculative (the candidate)", _median(rates["candidate"]), value, sp.get("low"), sp.get("high"), runs
    )
    return row, _median(rates["baseline"])


def _threads(doc: dict) -> int:
    """The baseline's -t as the certificate recorded its command line (1 where not known)."""
    argv = doc["measured_on"]["servers"]["baseline"].get("launch_argv") or []
    t = flag_value(argv, "-t", "--threads")
    return int(t) if t and str(t).isdigit() else 1


def _median(xs) -> float | None:
    return statistics.median(xs) if xs else None


async def beside(doc: dict, baseline, prompts, params, runs: int, table: FormatsLesson, out: Path, say=None) -> NWay:
    """The n-way table, written to out/n-way.json."""
    spec, base_tps = _spec_row(doc)
    base_path = baseline.info.model_path if baseline.info else None
    base_name = Path(base_path).name if base_path else "the baseline"
    plain: list[NWayRow] = []
    notes: list[str] = []
    server = find_llama_server()
    for row in table.rows:
        label = f"plain {row.format}"
        if row.refused is not None or not row.file:
            notes.append(f"{row.format}: not made in the formats lesson — {row.refused}")
            continue
        path = Path(row.file)
        if base_path and path.resolve() == Path(base_path).resolve():
            plain.append(NWayRow(f"{label} (the baseline)", base_tps, 1.0, None, None, spec.runs))
            continue
        if not path.is_file() or server is None:
            plain.append(NWayRow(label, None, None, note=f"{path.name} is not here" if server else "no llama-server"))
            continue
        if say is not None:
            say(f"n-way: plain {row.format} ({path.name}) against the proof's baseline, {runs} run(s) a prompt …")
        async with Serving(Tools(server, path, path), _threads(doc), [(row.format, path, [])]) as srv:
            (q,) = await backends_for(baseline.client, srv.urls)
            results = await run_prompts(baseline, q, prompts, params, repeat=max(1, runs))
        value, low, high, n = _paired(results)
        tps = _median(
            [r.candidate.figures.decode_tps for r in results if r.measured and r.candidate.figures.decode_tps]
        )
        plain.append(NWayRow(label, tps, value, low, high, n))
    if not any(r.label.endswith("(the baseline)") for r in plain):
        plain.insert(0, NWayRow(f"plain {base_name} (the baseline)", base_tps, 1.0, None, None, spec.runs))
    nway = NWay(base_name, plain, spec, notes)
    atomic_write(out / FILE_NAME, json.dumps(nway.to_json(), indent=2) + "\n")
    return nway
