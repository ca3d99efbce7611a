"""The formula's measured terms as one table and a few lines, read from their JSON record
(labs.theory.record: each prompt's TheoryCheck.to_json and its raw measurement): the same rows in the
certificate (text, Markdown, HTML) and in `spectui report` (text, Markdown, HTML). Nothing is judged here.
"""

from __future__ import annotations

import html as h

from spectui.core.markdown import md_cell

TITLE = "The formula's terms, measured on the servers"
HEADER = [
    "prompt",
    "c",
    "V(k), k = 1…γ+1",
    "R(k), k = 1…γ+1",
    "α per position",
    "γ",
    "E",
    "predicted",
    "measured [95 %]",
    "prediction",
]


def _measured(source: str | None) -> bool:
    return bool(source) and str(source).startswith("measured")


def _curve(values: dict | None) -> str:
    if not values:
        return "0"
    return " ".join(f"{float(v):.2f}" for _, v in sorted(values.items(), key=lambda kv: int(kv[0])))


def _c_cell(chk: dict) -> str:
    src = str(chk.get("sources", {}).get("c") or "")
    c = chk["draft_cost_c"]
    if src.startswith("n-gram"):
        return "0 (n-gram: no draft model)"
    return f"{c:.3f}" if _measured(src) else f"{c:.3f} (not measured)"


def _r_cell(r: str, src: str) -> str:
    if src.startswith("n-gram"):
        return "0 (n-gram: no model re-evaluates)"
    return r if _measured(src) else f"{r} (not measured)"


def predicted_words(predicted: float, rng) -> str:
    """The prediction from each term's median over the repeats, and beside it the range that each repeat's
    terms alone predict, labelled as such: the point is not the middle of that range."""
    if not rng:
        return f"{predicted:.2f}×"
    return f"{predicted:.2f}× (each repeat's terms: {rng[0]:.2f}–{rng[1]:.2f}×)"


def outside_note(predicted: float, rng) -> str | None:
    """Why the prediction can lie outside the repeats' own range (compared as printed, to 2 places)."""
    if not rng or round(rng[0], 2) <= round(predicted, 2) <= round(rng[1], 2):
        return None
    return (
        f"the prediction {predicted:.2f}× takes each term's median over the repeats (c, each V(k), each R(k) "
        f"apart); each repeat's terms alone predict {rng[0]:.2f}–{rng[1]:.2f}×: the medians come from "
        "different repeats, so the point can lie outside that range"
    )


def _measured_cell(chk: dict) -> str:
    m, lo, hi = chk["measured_speedup"], chk.get("measured_low"), chk.get("measured_high")
    if lo is None or hi is None:
        return f"{m:.2f}× (1 run: no interval)"
    return f"{m:.2f}× [{lo:.2f}–{hi:.2f}] ({chk.get('runs')} runs)"


def _verdict_cell(chk: dict) -> str:
    if chk.get("agree"):
        return "agrees"
    if chk.get("agree") is False:
        return "misses (below)"
    return "not judged (1 run)" + ("; gap explained below" if chk.get("miss") else "")


def rows(entries: list[dict]) -> list[list[str]]:
    """The table: a header, then one row per prompt (a prompt whose candidate drafted nothing says so)."""
    out = [list(HEADER)]
    for e in entries:
        chk = e.get("check")
        if chk is None:
            out.append([str(e.get("id")), "—", "—", "—", "—", "—", "—", "—", "—", e.get("why_none") or "not measured"])
            continue
        src = chk.get("sources", {})
        v = _curve(chk.get("verification_cost"))
        r = _curve(chk.get("draft_reevaluation_cost"))
        predicted = predicted_words(chk["predicted_speedup"], chk.get("predicted_range"))
        out.append(
            [
                str(e.get("id")),
                _c_cell(chk),
                v if _measured(src.get("verify")) else f"{v} (ideal, not measured)",
                _r_cell(r, str(src.get("reeval") or "")),
                f"{chk['alpha_per_position']:.3f}",
                f"{chk['gamma']:.2f}",
                f"{chk['tokens_per_step']:.2f}",
                predicted,
                _measured_cell(chk),
                _verdict_cell(chk),
            ]
        )
    return out


def lines(entries: list[dict]) -> list[str]:
    """Per prompt: how each term was measured (or why the ideal stands in), acceptance at each position,
    the waterfall from the ideal formula to the run's own steps, and agreement or the term that misses."""
    out: list[str] = []
    for e in entries:
        chk, pid = e.get("check"), e.get("id")
        if chk is None:
            continue
        src = chk.get("sources", {})
        out.append(f"{pid}: c — {src.get('c', '?')}; V(k) — {src.get('verify', '?')}; R(k) — {src.get('reeval', '?')}")
        pos = chk.get("accepted_by_position")
        if pos:
            out.append(
                f"{pid}: α {chk['alpha_per_position']:.3f} per position; share of steps accepting position i "
                f"({chk.get('accepted_by_position_source')}): "
                + ", ".join(f"{i}: {v:.2f}" for i, v in enumerate(pos, 1))
            )
        steps = chk.get("terms") or []
        if steps:
            out.append(f"{pid}: " + " → ".join(f"{t['term']} {t['speedup']:.2f}×" for t in steps))
        if chk.get("agree"):
            # a pair whose terms were not measured (vLLM, SGLang) agrees on the ideal formula's terms alone
            measured = any(_measured(str(v)) for v in src.values())
            if measured:
                out.append(f"{pid}: the measured terms account for the measured speed-up ({chk.get('agreement')})")
            else:  # assumed terms explain nothing: said beside, never "account for"
                out.append(
                    f"{pid}: the ideal formula's terms (none measured) lie within the measured interval "
                    f"({chk.get('agreement')}): nothing measured, not a test of the formula"
                )
        elif chk.get("miss"):
            out.append(f"{pid}: {chk['miss']}")
        if note := outside_note(chk["predicted_speedup"], chk.get("predicted_range")):
            out.append(f"{pid}: {note}")
        for note in list(chk.get("notes") or []) + list((e.get("measurement") or {}).get("notes") or []):
            out.append(f"{pid}: {note}")
    return out


def sections(record: dict | None) -> list[tuple[str, list]]:
    """(title, rows or lines) for a terms record (or none: no section)."""
    if not isinstance(record, dict):
        return []
    if record.get("skipped"):
        return [(TITLE, [f"not measured: {record['skipped']}"])]
    entries = list(record.get("prompts") or [])
    if not entries:
        return [(TITLE, ["no prompt finished on both sides: nothing measured"])]
    head = [record.get("how") or ""] + ([record["merged"]] if record.get("merged") else [])
    return [
        (TITLE + " (in target decode steps; the ideal formula: c = 0, V(k) = 1, R = 0)", rows(entries)),
        ("How each term was measured, and what the prediction says", [h for h in head if h] + lines(entries)),
    ]


def text(record: dict | None) -> list[str]:
    """The sections as plain text lines (columns padded)."""
    out: list[str] = []
    for title, body in sections(record):
        out += ["", title]
        if body and isinstance(body[0], list):
            widths = [max(len(str(r[i])) for r in body) for i in range(len(body[0]))]
            out += ["  " + "  ".join(f"{str(c):<{w}}" for c, w in zip(r, widths)).rstrip() for r in body]
        else:
            out += [f"  {x}" for x in body]
    return out


def markdown(record: dict | None) -> list[str]:
    out: list[str] = []
    for title, body in sections(record):
        out += ["", f"## {md_cell(title)}", ""]
        if body and isinstance(body[0], list):
            out.append("| " + " | ".join(md_cell(c) for c in body[0]) + " |")
            out.append("|" + "---|" * len(body[0]))
            out += ["| " + " | ".join(md_cell(c) for c in r) + " |" for r in body[1:]]
        else:
            out += [f"- {md_cell(x)}" for x in body]
    return out


def html(record: dict | None) -> str:
    e = h.escape
    parts: list[str] = []
    for title, body in sections(record):
        parts.append(f"<h2>{e(title)}</h2>")
        if body and isinstance(body[0], list):
            parts.append("<table><tr>" + "".join(f"<th>{e(str(c))}</th>" for c in body[0]) + "</tr>")
            parts += ["<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in body[1:]]
            parts.append("</table>")
        else:
            parts.append("<ul>" + "".join(f"<li>{e(str(x))}</li>" for x in body) + "</ul>")
    return "\n".join(parts)
