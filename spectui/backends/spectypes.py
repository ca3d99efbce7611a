"""llama.cpp's speculation types (`--spec-type`, b11434) in one table: what each needs, which servers serve it,
and whether its drafter keeps state from one request to the next, each with how that was decided.

A chain (`--spec-type ngram-mod,ngram-map-k4v`, repeated `--spec-type` flags append: common/arg.cpp:4274-4281)
keeps state when any of its types does. llama-server makes its drafters once, when it loads
(tools/server/server-context.cpp:1394 `common_speculative_init`), and each request only calls their begin():
what begin() does not clear is carried from one request to the next. `--spec-default` is ngram-mod with n_match 24, n_min 48, n_max 64
(common/arg.cpp:4748-4754). A request's final event names the configured types, `none` first
(`speculative.types`, tools/server/server-task.cpp:140: "none,ngram-mod"); GET /props answers "none" for
every server, so the final event, the launch command or the process's command line say what runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spectui.backends.launchspec import flag_value, has_flag

# where the source lines below are: llama.cpp b11434, the build `spectui setup` makes
_SPEC = "common/speculative.cpp"


@dataclass(frozen=True)
class SpecType:
    """One `--spec-type` value."""

    name: str
    drafts_with: str  # what it drafts with, in a few words
    needs: str  # what a server needs to run it
    servers: str  # which servers serve it (llama.cpp's name; the counterpart elsewhere where there is one)
    state: str  # "across requests" | "per slot" | "none": what its drafter keeps between requests
    how: str  # how that was decided: a source file and line, or a measurement

    @property
    def stateful(self) -> bool:
        return self.state != "none"


SPEC_TYPES: dict[str, SpecType] = {
    t.name: t
    for t in (
        SpecType(
            "draft-simple",
            "a smaller draft model of the target's vocabulary",
            "-md DRAFT.gguf (a model sharing the target's tokenizer)",
            "llama.cpp; vLLM `draft_model`, SGLang STANDALONE",
            "none",
            f"{_SPEC}:299-301 begin() resets the draft's sampler each request; its KV cache is a prompt cache",
        ),
        SpecType(
            "draft-eagle3",
            "an EAGLE-3 head reading the target's hidden states",
            "-md HEAD.gguf converted with convert_hf_to_gguf.py --target-model-dir",
            "llama.cpp; vLLM `eagle3`, SGLang EAGLE3",
            "none",
            f"{_SPEC}:636-650 begin() only checks the draft context covers the prompt",
        ),
        SpecType(
            "draft-mtp",
            "the target's own multi-token-prediction layers",
            f"a target GGUF that carries MTP (nextn) layers; no -md (a draft context on the target, {_SPEC}:2599-2650)",
            "llama.cpp; vLLM `mtp`, SGLang NEXTN",
            "none",
            f"{_SPEC}:1518-1520 begin() resets the sampler: 'or two identical requests differ'",
        ),
        SpecType(
            "draft-dflash",
            "a DFlash block-diffusion draft fed the target's hidden states",
            "-md DFLASH.gguf (a DFlash draft trained for this target)",
            "llama.cpp; vLLM `dflash` (recent releases)",
            "none",
            f"{_SPEC}:1139-1150 begin() only checks the draft context covers the prompt",
        ),
        SpecType(
            "draft-dspark",
            "DFlash with a sidecar Markov head (anchor-first blocks)",
            "-md DSPARK.gguf (a DSpark draft for this target)",
            "llama.cpp; vLLM `dspark` (DeepSeek checkpoints)",
            "none",
            f"shares draft-dflash's implementation ({_SPEC}:982, 1139-1150)",
        ),
        SpecType(
            "ngram-simple",
            "the request's own tokens: the last N repeated earlier",
            "nothing (sizes: --spec-ngram-simple-size-n/-m)",
            "llama.cpp; vLLM `ngram`, SGLang NGRAM",
            "none",
            f"{_SPEC}:1849-1851 begin() is a no-op and draft() reads only the request's tokens",
        ),
        SpecType(
            "ngram-map-k",
            "an n-gram → position map over the slot's context",
            "nothing (sizes: --spec-ngram-map-k-size-n/-m)",
            "llama.cpp only",
            "per slot",
            "common/ngram-map.cpp:121-215 begin() prunes the slot's map to the previous prompt's length, keeping "
            "what lies before it",
        ),
        SpecType(
            "ngram-map-k4v",
            "an n-gram → 4 values map over the slot's context",
            "nothing (sizes: --spec-ngram-map-k4v-size-n/-m)",
            "llama.cpp only",
            "per slot",
            "common/ngram-map.cpp:121-215 (as ngram-map-k)",
        ),
        SpecType(
            "ngram-mod",
            "a hashed n-gram pool fed by every request",
            "nothing (--spec-ngram-mod-n-match/-n-min/-n-max; --spec-default turns it on)",
            "llama.cpp only",
            "across requests",
            f"{_SPEC}:1933-1934 one pool 'shared across all sequences'; begin() adds each prompt's n-grams "
            f"(:1975-2000) and clears it only past 25 % occupancy or after 5 low-acceptance drafts (:2083-2095); "
            "measured: drafted on 1 of 8 prompts fresh, 24-110 tokens a request from the second pass",
        ),
        SpecType(
            "ngram-cache",
            "n-gram caches: the context's, a dynamic and a static file",
            "nothing; --lookup-cache-static/-dynamic FILE (llama-lookup-create) to start from a corpus",
            "llama.cpp only",
            "per slot",
            f"{_SPEC}:2172-2197 begin() is a no-op and the slot's context cache and its length carry over to "
            "the next request; the dynamic file is read, never saved (save_dynamic false, :2274-2276)",
        ),
    )
}

# --spec-default: common/arg.cpp:4748-4754
SPEC_DEFAULT = ("ngram-mod",)


def chain_of(types: str | Sequence[str] | None) -> tuple[str, ...]:
    """The types of a chain as llama.cpp names them, `none` left out: 'none,ngram-mod,ngram-map-k4v' →
    ('ngram-mod', 'ngram-map-k4v'). Unknown names are kept (a newer build's type is still a type)."""
    if types is None:
        return ()
    parts = types.split(",") if isinstance(types, str) else list(types)
    out: list[str] = []
    for p in parts:
        t = str(p).strip()
        if t and t not in ("none", "on") and t not in out:
            out.append(t)
    return tuple(out)


def chain_from_argv(argv: Sequence[str] | None) -> tuple[str, ...]:
    """The chain a llama-server command line configures: every --spec-type (they append), --spec-default."""
    args = list(argv or ())
    found: list[str] = []
    for i, a in enumerate(args):
        name, eq, value = a.partition("=")
        if name == "--spec-type":
            found += chain_of(value if eq else (args[i + 1] if i + 1 < len(args) else ""))
    if has_flag(args, "--spec-default"):
        found += SPEC_DEFAULT
    return chain_of(found)


def stateful_types(chain: Sequence[str]) -> list[SpecType]:
    return [SPEC_TYPES[t] for t in chain if t in SPEC_TYPES and SPEC_TYPES[t].stateful]


def keeps_state(chain: Sequence[str]) -> bool:
    """The chain's drafter carries something from one request to the next (a warm server may draft otherwise)."""
    return bool(stateful_types(chain))


def state_note(chain: Sequence[str]) -> str | None:
    """One line beside the label: which types keep state and how far ('ngram-mod keeps state across
    requests'); None for a chain that keeps none."""
    kept = stateful_types(chain)
    if not kept:
        return None
    parts = [f"{t.name} keeps state {t.state}" if t.state == "across requests" else f"{t.name} {t.state}" for t in kept]
    return "stateful: " + ", ".join(parts)


def label(chain: Sequence[str]) -> str:
    """Each type of the chain, joined as llama.cpp joins them: 'ngram-mod,ngram-map-k4v'."""
    return ",".join(chain) if chain else "none"


def draft_model_unused(argv: Sequence[str] | None) -> str | None:
    """A draft model given while no type uses one: llama-server loads it and drafts nothing (llama.cpp issue
    25345; -md only sets the path, common/arg.cpp:4266-4271, and no type is added). One line, else None."""
    model = flag_value(argv, "-md", "--spec-draft-model", "--model-draft")
    if not model:
        return None
    chain = chain_from_argv(argv)
    if any(t.startswith("draft-") for t in chain):  # draft-mtp may take its MTP layers from -md too (:2618-2636)
        return None
    what = f"--spec-type {label(chain)}" if chain else "no --spec-type"
    return (
        f"a draft model ({model.rsplit('/', 1)[-1]}) is given with {what}: llama-server loads it and drafts "
        "nothing with it; add --spec-type draft-simple to use it"
    )


def table_rows() -> list[tuple[str, str, str, str, str]]:
    """(type, drafts with, needs, servers, state) for `drafts cost` and the docs."""
    return [(t.name, t.drafts_with, t.needs, t.servers, t.state) for t in SPEC_TYPES.values()]
