"""`spectui drafts cost` as text: the summary table, then each method's figures with their formulas,
published figures beside them, and what data each method needs and which servers serve it."""

from __future__ import annotations

from spectui.labs.drafts.cost import DATA_AND_SERVERS, GIB, CostReport, n


def human_bytes(b: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= size:
            return f"{b / size:,.1f} {unit}"
    return f"{b:,.0f} B"


def human_params(x: float) -> str:
    return f"{x / 1e9:.2f}B" if x >= 1e9 else f"{x / 1e6:.1f}M"


def human_seconds(t: float) -> str:
    if t < 120:
        return f"{t:,.1f} s"
    if t < 7200:
        return f"{t / 60:,.1f} min"
    if t < 3 * 86400:
        return f"{t / 3600:,.1f} h"
    return f"{t / 86400:,.1f} days"


def text(r: CostReport, width: int | None = None) -> str:
    """The cost report: the target's shape, the inputs, one table row per method, then each method's working.
    `width` (the TUI's F3 screen): the method table fits it, one line a method (_method_table)."""
    out = _shape_and_inputs(r) + _method_table(r, width)
    for m in r.methods:
        out += ["", f"── {m.title}"] + _method_working(m, r.inputs)
    out += ["", "what each method needs, and which servers serve it:"]
    for name, data, servers in DATA_AND_SERVERS:
        out += [f"  {name:<22} data: {data}", f"  {'':<22} served by: {servers}"]
    return "\n".join(out)


def _shape_and_inputs(r: CostReport) -> list[str]:
    s, inp = r.shape, r.inputs
    out = [
        f"target {s.source}: {s.arch}, h={s.hidden}, {s.layers} layers, {s.heads} heads ({s.kv_heads} KV, "
        f"head {s.head_dim}), MLP {s.intermediate}, vocabulary {s.vocab}",
        f"  {n(s.params)} parameters ({s.params_how}); stored as {s.dtype}"
        + (f", {human_bytes(s.file_bytes)} on disk" if s.file_bytes else ""),
        f"inputs: sequence {inp.seq_len} × batch {inp.batch}; {n(inp.samples)} samples × "
        f"{inp.tokens_per_sample or inp.seq_len} tokens = {n(inp.tokens)} tokens; {inp.epochs} epoch(s); "
        f"frozen target at {inp.target_bytes} B/param",
    ]
    return out + [f"  note: {x}" for x in s.notes]


METHOD_MIN = 24  # the method column's narrowest: below it a figure column goes (disk, then memory), as fit_table


def _method_table(r: CostReport, width: int | None = None) -> list[str]:
    """One row a method: trainable parameters, training memory, disk a sample, and whether it fits the GPU.
    Narrower than the full row (an 80-column terminal wrapped each row onto two lines), the method's title is
    cut with "…" first, then disk a sample goes, then training memory; trainable and fits stay."""
    inp, fits = r.inputs, r.gpu_memory_gib
    figures = {"trainable": 10, "train memory": 13, "disk/sample": 12}
    extra = 6 if fits else 0
    for gone in ("disk/sample", "train memory"):
        if width is None or width - extra - sum(w + 1 for w in figures.values()) >= METHOD_MIN:
            break
        del figures[gone]
    title_w = 62 if width is None else max(METHOD_MIN, min(62, width - extra - sum(w + 1 for w in figures.values())))

    def row(title: str, cells: dict[str, str], fit: str = "") -> str:
        title = title if len(title) <= title_w else title[: title_w - 1] + "…"
        return f"{title:<{title_w}}" + "".join(f" {cells[k]:>{w}}" for k, w in figures.items()) + fit

    out = ["", row("method", {k: k for k in figures}, "  fits" if fits else "")]
    for m in r.methods:
        if not m.trainable:
            out.append(row(m.title, dict.fromkeys(figures, "—")))
            continue
        disk = m.disk_per_token.value * (inp.tokens_per_sample or inp.seq_len) if m.disk_per_token else 0
        fit = ""
        if fits:
            fit = "  yes" if m.memory_bytes <= fits * GIB else "  no"
        cells = {
            "trainable": human_params(m.trainable_params),
            "train memory": f"{m.memory_bytes / GIB:.1f} GiB",
            "disk/sample": human_bytes(disk),
        }
        out.append(row(m.title, cells, fit))
    if fits:
        out.append(
            f"(fits: online training, target resident, on one {fits:g} GiB GPU{f' ({r.profile})' if r.profile else ''})"
        )
    return out


def _method_working(m, inp) -> list[str]:
    """A method's figures with their formulas: parameters, memory, disk, FLOPs, time, published figures."""
    if not m.trainable:
        return [f"  {x}" for x in m.notes]
    out = [f"  trainable {n(m.trainable_params)}:"]
    out += [f"    {p.name:<44} {n(p.value):>15}  {p.formula}" for p in m.trainable]
    if m.frozen:
        out.append("  frozen, held by the draft:")
        out += [f"    {p.name:<44} {n(p.value):>15}  {p.formula}" for p in m.frozen]
    out.append(f"  training memory {m.memory_bytes / GIB:.2f} GiB (online; offline leaves out the target):")
    out += [f"    {p.name:<44} {p.value / GIB:>11.2f} GiB  {p.formula}" for p in m.memory]
    if m.disk_per_token:
        per = m.disk_per_token.value
        out.append(
            f"  disk for offline hidden states: {human_bytes(per)} a token ({m.disk_per_token.formula}); "
            f"{human_bytes(per * inp.tokens)} for {n(inp.tokens)} tokens"
        )
    out.append(
        f"  FLOPs a training token: {sum(p.value for p in m.flops_per_token):.3g} ("
        + "; ".join(f"{p.name} {p.formula}" for p in m.flops_per_token)
        + ")"
    )
    for p in m.time:
        out.append(f"  time, {p.name}: {human_seconds(p.value)}  [{p.formula}]")
    if not m.time:
        out.append("  time: give --baseline URL (measured here) or --gpu NAME / --profile (datasheet figures)")
    for pub in m.published:
        out.append(f"  published: {pub.figure} — {pub.source}")
    return out + [f"  note: {x}" for x in m.notes]
