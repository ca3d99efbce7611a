"""A report a person can send: one self-contained HTML file (inline CSS and SVG, no network).

Both outputs side by side with the TUI's marks (accepted drafts, the target's own tokens, ✗n where drafts
were rejected, the rejected text where the draft probe rebuilt it, the first difference), the figures
with the acceptance rate beside every speed-up, both builds, the verdict and triage, and for each prompt
the arithmetic's S(α) curve with the measured point as an inline SVG.
"""

from __future__ import annotations

import html
from string import Template

from spectui.core import terms_table
from spectui.core.report import (
    MIXED,
    acceptance_text,
    conditions_caveats,
    fmt,
    mixed_params,
    params_words,
    prompt_params,
    speedup_text,
    verdict_text,
    whole_set,
)
from spectui.core.runner import PromptResult
from spectui.core.types import GenerationParams, ServerInfo
from spectui.labs.theory import formula as theory
from spectui.labs.theory import terms

MARKS = {"accepted": "#1a7f37", "target": "#0550ae", "first": "#57606a", "rejected": "#cf222e", "diverge": "#cf222e"}

CSS = Template(
    """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1400px; color: #1f2328; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #d0d7de; }
table { border-collapse: collapse; margin: .5em 0; } td, th { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; }
.out { white-space: pre-wrap; font: 13px/1.5 ui-monospace, monospace; border: 1px solid #d0d7de; padding: .6em;
       border-radius: 6px; overflow-wrap: anywhere; }
.t-accepted { color: $accepted; text-decoration: underline; } .t-target { color: $target; }
.t-first { color: $first; } .t-unknown { color: #8c959f; }
.rej { color: $rejected; font-weight: bold; } .guess { color: $rejected; text-decoration: line-through; }
.div { background: $diverge; color: white; }
.ok { color: #1a7f37; font-weight: bold; } .bad { color: #cf222e; font-weight: bold; } .note { color: #57606a; }
.legend span { margin-right: 1.2em; }
"""
).substitute(MARKS)


def _e(s: str) -> str:
    return html.escape(s, quote=True)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def output_html(rec, marked: bool, diverge_token: int | None, rejected_at: dict[int, str]) -> str:
    """One side's output as spans with the same marks as the TUI."""
    out = []
    for t in rec.tokens:
        if marked and t.rejected:
            out.append(f'<span class="rej">✗{t.rejected}</span>')
            guess = rejected_at.get(t.index)
            if guess:
                shown = _e(guess.replace("\n", "⏎"))
                out.append(f'<span class="guess" title="the draft proposed this">⟨{shown}⟩</span>')
        cls = f"t-{t.label}" if marked else ""
        if diverge_token is not None and t.index == diverge_token:
            cls += " div"
        text = _e(_text(t.data))
        out.append(f'<span class="{cls.strip()}">{text}</span>' if cls.strip() else text)
    if rec.tail:
        out.append(_e(_text(rec.tail)))
    return "".join(out)


LABEL_GAP = 13.0  # px between two curve labels' baselines at font-size 11: none is drawn over another


def spread_labels(labels: list[tuple[float, str, str]], gap: float, top: float) -> list[tuple[float, str, str]]:
    """Labels (y, colour, text) moved down where needed so each baseline is ≥ `gap` below the one above it
    (two curves that end close together once printed their labels over each other), none above `top`."""
    out: list[tuple[float, str, str]] = []
    for yl, colour, text in sorted(labels):
        yl = max(yl, top, out[-1][0] + gap if out else top)
        out.append((yl, colour, text))
    return out


def theory_svg(r: PromptResult, chk: terms.TheoryCheck | None = None) -> str:
    """S(α) for the measured chain length with a free draft and with the implied draft cost, and the
    measured point: why the payoff is what it is on this hardware. With a TheoryCheck (the terms
    measured, labs.theory.costs): the ideal curve at the measured c, the curve with the measured cost terms, the
    predicted point and the measured one with its interval."""
    m = theory.from_result(r)
    if m is None:
        return ""
    g = max(1, round(m["gamma"]))
    W, H, L, B = 360, 220, 40, 30
    alphas = [i / 50 for i in range(50)]
    curves = {"free draft (c = 0)": 0.0, f"implied c = {m['implied_cost']:.2f}": m["implied_cost"]}
    if chk is not None:
        curves = {f"ideal, measured c = {chk.costs.c:.2f}": chk.costs.c}
    measured_curve = [chk.costs.speedup(a, g) for a in alphas] if chk is not None else []
    extra = [chk.predicted, chk.measured_high or chk.measured] if chk is not None else []
    ys = [theory.speedup(a, g, c) for c in curves.values() for a in alphas] + [m["measured_speedup"], 1.0]
    top = max(ys + measured_curve + extra) * 1.1

    def x(a):
        return L + a * (W - L - 10)

    def y(s):
        return H - B - s / top * (H - B - 10)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-size="11" font-family="sans-serif">',
        f'<line x1="{L}" y1="{y(1):.1f}" x2="{W - 10}" y2="{y(1):.1f}" stroke="#8c959f" stroke-dasharray="4 3"/>',
        f'<text x="{W - 12}" y="{y(1) - 3:.1f}" text-anchor="end" fill="#57606a">break-even 1×</text>',
        f'<line x1="{L}" y1="{H - B}" x2="{W - 10}" y2="{H - B}" stroke="#1f2328"/>',
        f'<line x1="{L}" y1="10" x2="{L}" y2="{H - B}" stroke="#1f2328"/>',
        f'<text x="{(W + L) / 2:.0f}" y="{H - 5}" text-anchor="middle">acceptance rate α (γ = {g})</text>',
        f'<text x="5" y="12">{top:.1f}×</text>',
    ]
    labels: list[tuple[float, str, str]] = []  # (wanted y, colour, text): placed apart below
    for (label, c), colour in zip(curves.items(), ("#0550ae", "#bc4c00")):
        pts = " ".join(f"{x(a):.1f},{y(theory.speedup(a, g, c)):.1f}" for a in alphas)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        labels.append((y(theory.speedup(alphas[-1], g, c)) - 4, colour, label))
    if chk is not None:
        pts = " ".join(f"{x(a):.1f},{y(v):.1f}" for a, v in zip(alphas, measured_curve))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="#8250df" stroke-width="1.5"/>')
        labels.append((y(measured_curve[-1]) + 12, "#8250df", "measured costs (c, V, R)"))
    for yl, colour, label in spread_labels(labels, gap=LABEL_GAP, top=12.0):
        parts.append(f'<text x="{x(0.97):.1f}" y="{yl:.1f}" text-anchor="end" fill="{colour}">{_e(label)}</text>')
    if chk is not None:
        px, py = x(min(chk.alpha, 0.98)), y(chk.predicted)
        parts.append(f'<rect x="{px - 4:.1f}" y="{py - 4:.1f}" width="8" height="8" fill="none" stroke="#8250df"/>')
        if chk.measured_low is not None and chk.measured_high is not None:
            lo, hi = y(chk.measured_low), y(chk.measured_high)
            parts.append(f'<line x1="{px:.1f}" y1="{lo:.1f}" x2="{px:.1f}" y2="{hi:.1f}" stroke="#cf222e"/>')
    mx, my = x(min(m["alpha"], 0.98)), y(m["measured_speedup"])
    parts.append(f'<circle cx="{mx:.1f}" cy="{my:.1f}" r="4" fill="#cf222e"/>')
    parts.append(
        f'<text x="{mx + 6:.1f}" y="{my - 6:.1f}" fill="#cf222e">measured {m["measured_speedup"]:.2f}× '
        f"at α {m['alpha']:.2f} per position ({m['acceptance_per_drafted_token']:.0%} per drafted token)</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


NONE_MEASURED = "the ideal formula's terms (none measured)"


def terms_table_html(chk: terms.TheoryCheck) -> str:
    """The formula's terms, ideal against measured, with the speed-up each step predicts, and the verdict
    of prediction against measurement (the table `spectui theory --from` prints)."""
    rows = "".join(
        f"<tr><td>{_e(t.name)}</td><td>{_e(t.ideal)}</td><td>{_e(t.measured)}</td><td>{t.speedup:.2f}×</td>"
        f'<td class="note">{_e(t.source)}</td></tr>'
        for t in chk.terms
    )
    ks = " ".join(f"{k}:{v:.2f}" for k, v in enumerate(chk.costs.verify, 1))
    meas = (
        f"{chk.measured:.2f}× [{chk.measured_low:.2f}–{chk.measured_high:.2f}] over {chk.runs} runs "
        f"(width {chk.measured_high - chk.measured_low:.2f}×)"
        if chk.measured_low is not None and chk.measured_high is not None
        else f"{chk.measured:.2f}× (1 run: no interval)"
    )
    verdict = (
        f'<p class="ok">{NONE_MEASURED}: nothing measured, not a test of the formula</p>'
        if chk.agree and chk.costs.none_measured
        else '<p class="ok">the measured terms account for the measured speed-up</p>'
        if chk.agree
        else (f'<p class="bad">{_e(chk.miss)}</p>' if chk.miss else "")
    )
    note = terms_table.outside_note(chk.predicted, chk.predicted_range)
    outside = f'<p class="note">{_e(note)}</p>' if note else ""
    return (
        "<table><tr><th>term</th><th>ideal</th><th>measured</th><th>predicted speed-up</th><th>how</th></tr>"
        f"{rows}</table>"
        f"<p>V(k) in target steps: {_e(ks)}. Predicted {_e(terms_table.predicted_words(chk.predicted, chk.predicted_range))}, "
        f"measured {_e(meas)}.</p>{outside}{verdict}"
    )


def html_report(
    infos: dict[str, ServerInfo],
    results: list[PromptResult],
    params: GenerationParams,
    order: str,
    source: str | None = None,
    checks: dict[str, terms.TheoryCheck | None] | None = None,
    terms_record: dict | None = None,
) -> str:
    """One self-contained page; `checks`: each prompt's formula check (its SVG point and terms table),
    `terms_record`: the measured terms (labs.theory.record) as the one table the certificate shows too."""

    b, c = infos["baseline"], infos["candidate"]
    done = [r for r in results if r.identical is not None]
    same = sum(1 for r in done if r.identical)
    rows = [_summary_row(r) for r in results]
    body = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>spectui report{': ' + _e(source) if source else ''}</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>spectui comparison</h1>",
        f'<p class="note">Session: <code>{_e(source)}</code></p>' if source else "",
        "<table><tr><th></th><th>URL</th><th>build</th><th>model</th><th>configuration</th></tr>",
    ]
    for role, info in (("baseline", b), ("candidate", c)):
        body.append(
            f"<tr><td>{role}</td><td>{_e(info.url)}</td><td>{_e(info.build or '?')}</td>"
            f"<td>{_e(info.model or '?')}</td><td>{_e(info.describe_speedup())}</td></tr>"
        )
    body += [
        "</table>",
        f"<p>Parameters: {_e(params_words(params, order))}.</p>"
        if not mixed_params(results)
        else f"<p>Parameters {_e(MIXED)}.</p>",
        *(f'<p class="note">Note: {_e(c)}.</p>' for c in conditions_caveats(params, order, results)),
        f'<p class="{"ok" if same == len(done) == len(results) else "bad"}">{same}/{len(done)} outputs identical'
        f"{f', {len(results) - len(done)} not compared' if len(done) < len(results) else ''}. "
        f"Builds: baseline {_e(b.build or '?')}, candidate {_e(c.build or '?')}.</p>",
        # the whole set's figure, as the text, JSON and Markdown reports give it (core.report.whole_set)
        *([f"<p>Whole set: {_e(ws.text())}.</p>"] if (ws := whole_set(results)) is not None else []),
        "<table><tr><th>prompt</th><th>baseline tok/s</th><th>candidate tok/s</th><th>speed-up</th>"
        "<th>acceptance per drafted token</th><th>mean accepted length</th><th>α per position</th>"
        "<th>TTFT ms (b / c)</th><th>output</th></tr>",
        *rows,
        "</table>",
        _terms_html(terms_record),
        '<p class="legend">Marks: <span class="t-accepted">accepted draft</span><span class="t-target">target\'s own '
        'token</span><span class="t-first">first token</span><span class="rej">✗n drafts rejected</span>'
        '<span class="guess">what the draft guessed</span><span class="div">first difference</span></p>',
    ]
    for r in results:
        body += _prompt_section(r, (checks or {}).get(r.prompt.id))
    body.append("</body></html>")
    return "\n".join(x for x in body if x) + "\n"


def _summary_row(r: PromptResult) -> str:
    """The prompt's row in the summary table: both sides' speeds, speed-up, acceptance, TTFT and verdict."""
    fb, fc = r.baseline.figures, r.candidate.figures
    cls = "ok" if r.identical else ("bad" if r.identical is False else "note")
    return (
        f"<tr><td>{_e(r.prompt.id)}{' (run ' + str(r.run) + ')' if r.runs > 1 else ''}</td>"
        f"<td>{fmt(fb.decode_tps)}</td><td>{fmt(fc.decode_tps)}</td>"
        f"<td>{_e(speedup_text(r))}</td><td>{_e(acceptance_text(r.candidate))}</td>"
        f"<td>{fmt(fc.mean_accepted_length, '.2f')}</td>"
        f"<td>{fmt(fc.alpha_per_position if r.candidate.finished is not None else None, '.2f')}</td>"
        f"<td>{fmt(fb.ttft_ms, '.0f')} / {fmt(fc.ttft_ms, '.0f')}</td>"
        f'<td class="{cls}">{_e(verdict_text(r))}</td></tr>'
    )


def _prompt_section(r: PromptResult, chk: terms.TheoryCheck | None) -> list[str]:
    """The prompt's own section: its verdict, cause and drafts, both outputs marked, and its formula check."""
    out: list[str] = []
    d = r.divergence
    found = r.drafts
    rejected_at = found.rejected_at() if found is not None else {}
    out.append(f"<h2>{_e(r.prompt.id)}{' — run ' + str(r.run) if r.runs > 1 else ''}: {_e(verdict_text(r))}</h2>")
    fc = r.candidate.figures
    out.append(
        f"<p>speed-up {_e(speedup_text(r))} · labels {_e(fc.labels or '—')} · "
        f"/metrics {_e(fc.metrics_check or '—')}</p>"
    )
    if r.params is not None:  # this prompt's own parameters (a session may mix them)
        out.append(f'<p class="note">Parameters: {_e(prompt_params(r))}.</p>')
    if r.triage:
        t = r.triage
        out.append(f"<p><b>cause: {_e(t.cause)}</b> — {_e(t.summary)}</p>")
    if found is not None:
        out.append(f'<p class="note">drafts: {_e(found.summary())}</p>')
    out.append('<div class="pair">')
    for side, rec in (("baseline", r.baseline), ("candidate", r.candidate)):
        tok = None if d is None else (d.baseline_token if side == "baseline" else d.candidate_token)
        marks = rejected_at if side == "candidate" else {}
        out.append(
            f'<div><b>{side}</b><div class="out" id="out-{_e(r.prompt.id)}-{r.run}-{side}">'
            f"{output_html(rec, side == 'candidate', tok, marks)}</div></div>"
        )
    out.append("</div>")
    svg = theory_svg(r, chk)
    if svg:
        out.append(
            f"<p>The arithmetic for this prompt (Leviathan et al.): S(α) = (1−α^(γ+1)) / ((1−α)(γc+1)).</p>{svg}"
        )
    if chk is not None and r.run == r.runs:  # once per prompt, after its last run
        out.append(terms_table_html(chk))
    return out


def _terms_html(record: dict | None) -> str:
    return terms_table.html(record)
