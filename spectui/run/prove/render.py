"""A certificate (run.prove.certificate's JSON document) as text for the console, as Markdown and as one
self-contained HTML page. Every value is read from the document; nothing is judged here. Values that came
from outside (builds, models, URLs, prompt ids, excerpts) are escaped for the format they land in.
"""

from __future__ import annotations

import html

from spectui.core import terms_table
from spectui.core.headline import from_certificate
from spectui.core.markdown import md_cell
from spectui.core.types import SIDES
from spectui.run.prove.conditions import STATED_WORDS
from spectui.run.prove.setstats import interval_text


def _iv(d: dict | None, spec: str = ".2f", unit: str = "") -> str:
    return interval_text(d, spec, unit)


def _size(n) -> str:
    return f"{n / 1024**3:.1f} GiB" if isinstance(n, (int, float)) else "?"


def _pairs(d) -> str:
    """A server-reported dict as words ("type draft-simple, n_max 8"), never Python's repr."""
    if not isinstance(d, dict):
        return str(d) if d else ""
    return ", ".join(f"{k} {v}" for k, v in d.items() if v is not None and v != "" and k != "enabled")


def _spec(spec) -> str:
    if not isinstance(spec, dict) or (spec.get("type") in (None, "none") and not spec.get("draft_model")):
        return "none"
    return _pairs(spec)


def _file(f: dict | None) -> str:
    if not f:
        return "—"
    folder = f" (a folder of {f['files']} files, {f.get('identity')})" if f.get("files") is not None else ""
    if f.get("sha256"):
        return f"{f['path']} sha256 {f['sha256']}{folder}"
    if folder:
        return f"{f['path']} {f['bytes']} bytes{folder}"
    if f.get("bytes") is not None:
        return f"{f['path']} {f['bytes']} bytes, modified {f.get('mtime')} ({f.get('identity')})"
    return f"{f['path']} ({f.get('identity')})"


def sections(doc: dict) -> list[tuple[str, list[list[str]] | list[str]]]:
    """The certificate's content as (title, rows) — tables (lists of cells, first row the header) or lines —
    shared by the three renderings, so they say the same things."""
    d = doc["derived"]
    out: list = [("What was run", _what_was_run(doc)), _greedy_identity(d["greedy"])]
    if d["differences"]:
        out.append(("Differences", [_difference_line(x) for x in d["differences"]]))
    if d.get("sampled"):
        out.append(_sampled_identity(d["sampled"]))
    out.append(("Speed-up, beside its acceptance", _speedup_lines(d["speedup"], d.get("acceptance"))))
    out.append(("By category", _by_category(d["by_category"])))
    out += terms_table.sections(doc.get("terms"))  # measured on the servers after the run
    out.append(("Measured on", _measured_on(doc)))
    out.append(
        (
            "Derived from (raw sessions, replayable: spectui verify re-derives every figure from them)",
            [f"{r['path']} ({r['phase']}, {r['bytes']} bytes) sha256 {r['sha256']}" for r in doc["sessions"]],
        )
    )
    if d.get("problems"):
        out.append(("Problems found while deriving", list(d["problems"])))
    return out


def _what_was_run(doc: dict) -> list[str]:
    """The prompt set (and shard), the greedy parameters, one-at-a-time and the sampled seeds."""
    d, inp = doc["derived"], doc["inputs"]
    ps, shard, p = inp["prompt_set"], inp.get("shard"), inp["params"]
    scope = [
        f"prompt set {ps.get('name')} ({ps['count']} prompts, sha256 {ps['sha256']})"
        + (f"; shard {shard['index']}/{shard['of']}: {len(inp.get('share') or [])} of them" if shard else ""),
        f"greedy: temperature 0, max_tokens {p.get('max_tokens')}, {inp['runs']} interleaved run(s) per prompt "
        f"(B C / C B), prompt cache {_cache(p.get('cache_prompt'))}, order {p.get('order')}",
    ]
    alone = d.get("one_at_a_time")
    if alone:  # one server at a time (run.phased): why, and what could not run
        why = (inp.get("one_at_a_time") or {}).get("why")
        scope.append(f"one server at a time{f' ({why})' if why else ''}: {alone['line']}")
        if (inp.get("one_at_a_time") or {}).get("triage"):
            scope.append(f"triage {inp['one_at_a_time']['triage']}")
    s = inp.get("sampled")
    if s and s.get("ids"):
        scope.append(
            f"sampled: {len(s['ids'])} prompt(s), {s['samples']} seeds each from {s['seed_base']}, temperature "
            f"{s['temperature']}, max_tokens {s['max_tokens']}"
        )
    return scope


def _greedy_identity(g: dict) -> tuple[str, list[list[str]]]:
    """One row a prompt: identical or not, where and why it parted, its speed-up and acceptance."""
    rows = [["prompt", "category", "greedy", "first difference", "cause", "speed-up", "acceptance", "mean len"]]
    for pp in g["per_prompt"]:
        diff = pp.get("difference")
        a = pp.get("acceptance")
        rows.append(
            [
                pp["id"],
                pp["category"],
                f"{pp['status']} ({pp['runs']} run{'s' if pp['runs'] != 1 else ''})",
                f"byte {diff['byte']} ({diff['kind']}, run {diff['run']})" if diff else "",
                (diff.get("cause") or "not triaged") if diff else "",
                _iv(pp["speedup"], unit="×") if pp.get("speedup") else "— (not measured)",
                f"{a['accepted']}/{a['drafted']}" if a and a.get("drafted") else ("no drafts" if a else "—"),
                f"{1 + a['accepted'] / a['steps']:.2f}" if a and a.get("steps") else "—",
            ]
        )
    return (f"Greedy identity: {g['identical']}/{g['prompts']} identical", rows)


def _difference_line(x: dict) -> str:
    return (
        f"{x['id']}: {x['reason']} — baseline …{x['baseline_excerpt']}… | candidate …{x['candidate_excerpt']}…"
        f" — cause: {x.get('cause') or 'not triaged'}"
        + (f" ({x['cause_summary']})" if x.get("cause_summary") else "")
        + (
            f"; prompt tokens from cache {x['prompt_cached'][0]} | {x['prompt_cached'][1]}"
            if x.get("prompt_cached")
            else ""
        )
    )


def _sampled_identity(sm: dict) -> tuple[str, list[list[str]]]:
    """One row a sampled prompt: seeds identical, the drafting's promise, the two-sample test."""
    rows = [["prompt", "seeds identical", "drafting", "promise", "verdict", "test", "detectable TVD"]]
    for x in sm["prompts"]:
        t = x.get("test") or {}
        rows.append(
            [
                x["id"],
                f"{x['seeded_identical']}/{x['samples']}",
                x["guarantee"]["drafting"],
                x["guarantee"]["promise"],
                f"{x['status']}: {x['why']}",
                f"p {t['p']:.3g} over {t['positions_tested']} varying positions" if t else "not needed",
                f"{t['smallest_detectable_tvd']:.2f}" if t and t.get("smallest_detectable_tvd") is not None else "—",
            ]
        )
    return (f"Identity under sampling: {sm['passed']}/{sm['total']}", rows)


def _speedup_lines(sp: dict, acc: dict | None) -> list[str]:
    """The overall speed-up (and over prompts), then the acceptance that explains it."""
    o = sp["overall"]
    lines = [
        f"speed-up {_iv(o, unit='×')}: {sp['speed']} (candidate decode tok/s over the baseline's, paired within "
        f"each run" + (f"; {o['method']})" if o["method"] else ")")
        if o
        else "speed-up: not measured (no run where both sides finished)"
    ]
    if o and o.get("over_prompts"):
        lines.append(f"over prompts (the set as a sample of prompts like these): {_iv(o['over_prompts'], unit='×')}")
    if sp.get("note"):
        lines.append(f"note: {sp['note']}")
    if acc and acc.get("drafted"):
        a = acc["alpha"]
        lines.append(
            f"acceptance {acc['accepted']}/{acc['drafted']} drafted tokens ({acc['acceptance_rate']:.1%}) in "
            f"{acc['steps']} verification steps; mean accepted length {_iv(acc['mean_accepted_length'])} "
            f"(over prompts {_iv(acc['mean_accepted_length']['over_prompts'])}); α {_iv(a)} at γ {a['gamma']:.2f} "
            f"(counts from {acc['source']})"
        )
        if acc.get("per_position"):
            lines.append(
                "per-position acceptance: "
                + ", ".join(f"{q['position'] + 1}: {_iv(q, '.1%')}" for q in acc["per_position"])
            )
        elif acc.get("per_position_note"):
            lines.append(f"per-position acceptance: — ({acc['per_position_note']})")
    elif acc:
        lines.append("acceptance: the candidate drafted nothing")
    return lines


def _by_category(by_category: dict) -> list[list[str]]:
    rows = [["category", "prompts", "identical", "speed-up", "", "mean accepted length", "α"]]
    for cat, c in by_category.items():
        ca = c.get("acceptance") or {}
        rows.append(
            [
                cat,
                str(c["prompts"]),
                str(c["identical"]),
                _iv(c["speedup"], unit="×") if c.get("speedup") else "—",
                c["speed"],
                _iv(ca.get("mean_accepted_length")) if ca.get("drafted") else "no drafts",
                _iv(ca.get("alpha")) if ca.get("drafted") else "—",
            ]
        )
    return rows


def _measured_on(doc: dict) -> list[str]:
    """Each server as the sessions state it, the cache reuse, the hardware, the shards, and what is stated."""
    mo, c = doc["measured_on"], doc["derived"]["cache"]
    lines = []
    for side in SIDES:
        lines += _server_lines(side, mo["servers"][side])
    lines.append(
        f"cache: prompt cache {_cache(c['requested'])} per request; prompt tokens reused from the cache: baseline "
        f"{c['baseline']['prompt_cached']} of {c['baseline']['prompt_tokens'] + c['baseline']['prompt_cached']}, "
        f"candidate {c['candidate']['prompt_cached']} of {c['candidate']['prompt_tokens'] + c['candidate']['prompt_cached']}"
    )
    hw = mo.get("hardware") or {}
    gpus = ", ".join(f"{x['name']} ({_size(x.get('memory_total'))})" for x in hw.get("gpus") or []) or (
        f"none ({hw.get('gpu_note')})"
    )
    lines.append(
        f"hardware: {hw.get('cpu')}, {hw.get('cores_logical')} logical cores ({hw.get('cores_physical')} physical), "
        f"{_size(hw.get('memory_total'))} RAM, {hw.get('system')}; GPUs: {gpus}"
    )
    if mo.get("hardware_note"):
        lines.append(f"note: {mo['hardware_note']}")
    for sh in mo.get("shards") or []:
        lines.append(
            f"shard {sh['shard']['index']}/{sh['shard']['of']}: {sh['date']} on {(sh.get('hardware') or {}).get('cpu')} "
            f"(certificate sha256 {sh['certificate_sha256']})"
        )
    lines.append(f"spectui {mo.get('spectui')}; made {mo.get('date')}")
    lines.append(
        f"{STATED_WORDS} from the sessions (verify cannot check them): the URLs, launch command lines and flags, "
        "model and draft files, the CPU's name, physical cores and system, the prompt set's name"
        + (
            "; the prompt set's sha256 (a shard's sessions hold only its share's texts)"
            if doc["inputs"].get("shard")
            else ""
        )
        + "; every other condition (parameters, runs, seeds, prompt texts, GPUs, logical cores and memory where "
        "probed, spectui version, date) is checked against the sessions by spectui verify"
    )
    return lines


def _server_lines(side: str, sv: dict) -> list[str]:
    lines = [
        f"{side}: {sv.get('backend')} build {sv.get('build') or '?'}, model {sv.get('model') or '?'}, "
        f"speculative {_spec(sv.get('speculative'))}, KV cache {_pairs(sv.get('kv_cache')) or 'default'}, "
        f"at {sv.get('url')}"
    ]
    if sv.get("launch_argv"):
        lines.append(f"  launched as: {' '.join(sv['launch_argv'])} ({STATED_WORDS})")
    lines.append(f"  model file: {_file(sv.get('model_file'))} ({STATED_WORDS})")
    if sv.get("draft_file"):
        lines.append(f"  draft file: {_file(sv.get('draft_file'))} ({STATED_WORDS})")
    return lines


def _cache(v) -> str:
    return "server default" if v is None else ("on" if v else "off")


def render_text(doc: dict) -> str:
    """The console form: the verdict line first, then each section."""
    lines = [doc["verdict"]["line"], from_certificate(doc["derived"]).line]
    for title, rows in sections(doc):
        lines += ["", title]
        if rows and isinstance(rows[0], list):
            widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
            for r in rows:
                lines.append("  " + "  ".join(f"{str(c):<{w}}" for c, w in zip(r, widths)).rstrip())
        else:
            lines += [f"  {x}" for x in rows]
    return "\n".join(lines) + "\n"


def render_markdown(doc: dict) -> str:
    head = from_certificate(doc["derived"]).line
    lines = ["# spectui certificate", "", f"**{md_cell(doc['verdict']['line'])}**", "", md_cell(head), ""]
    for title, rows in sections(doc):
        lines += [f"## {md_cell(title)}", ""]
        if rows and isinstance(rows[0], list):
            lines.append("| " + " | ".join(md_cell(c) for c in rows[0]) + " |")
            lines.append("|" + "---|" * len(rows[0]))
            for r in rows[1:]:
                lines.append("| " + " | ".join(md_cell(c) for c in r) + " |")
        else:
            lines += [f"- {md_cell(x)}" for x in rows]
        lines.append("")
    lines.append(
        f"Certificate format {doc['format']} version {doc['version']}; check it with `spectui verify` beside its sessions."
    )
    return "\n".join(lines) + "\n"


_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em; color: #1d1d1f; }
h1 { font-size: 1.3em; } h2 { font-size: 1.05em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
.verdict { font-size: 1.15em; font-weight: 600; padding: .6em .8em; border-radius: 6px; }
.identical { background: #e6f4ea; color: #0b5d1e; } .different { background: #fde7e9; color: #8a1020; }
.incomplete { background: #fff4ce; color: #6b4e00; }
.headline { font-weight: 600; } .headline .yes { color: #0b5d1e; } .headline .no { color: #8a1020; }
table { border-collapse: collapse; margin: .5em 0; } td, th { border: 1px solid #ddd; padding: .25em .6em; text-align: left; }
th { background: #f4f4f6; } li { margin: .15em 0; } code, .mono { font-family: ui-monospace, monospace; font-size: .92em; }
"""


def _headline_html(h) -> str:
    """Both halves of the answer (core.headline), each coloured by its own: yes green, no red, unknown plain."""
    cls = {True: "yes", False: "no", None: "unknown"}
    return (
        f'<p class="headline"><span class="{cls[h.same]}">{html.escape(h.same_text)}</span> · '
        f'<span class="{cls[h.faster]}">{html.escape(h.faster_text)}</span></p>'
    )


def render_html(doc: dict) -> str:
    """One page, no external resources: styles inline, every value escaped."""
    e = html.escape
    status = doc["verdict"]["status"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>spectui certificate</title>',
        f"<style>{_CSS}</style></head><body>",
        "<h1>spectui certificate</h1>",
        f'<p class="verdict {e(status)}">{e(doc["verdict"]["line"])}</p>',
        _headline_html(from_certificate(doc["derived"])),
    ]
    for title, rows in sections(doc):
        parts.append(f"<h2>{e(title)}</h2>")
        if rows and isinstance(rows[0], list):
            parts.append("<table><tr>" + "".join(f"<th>{e(str(c))}</th>" for c in rows[0]) + "</tr>")
            for r in rows[1:]:
                parts.append("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>")
            parts.append("</table>")
        else:
            parts.append("<ul>" + "".join(f'<li class="mono">{e(str(x))}</li>' for x in rows) + "</ul>")
    parts.append(
        f"<p>Certificate format {e(doc['format'])} version {e(str(doc['version']))}; "
        "check it with <code>spectui verify</code> beside its sessions.</p></body></html>"
    )
    return "\n".join(parts) + "\n"
