"""The prefix-cache lab: cold vs warm prompts, per turn, with the byte comparison beside the saving.

The baseline runs with its prompt cache off (llama.cpp: `cache_prompt: false` per request, so every turn
recomputes the whole prompt; vLLM and SGLang: start the baseline with `--no-enable-prefix-caching` /
`--disable-radix-cache`); the candidate with it on, so from the second turn it reuses the conversation. Each side's
own figures say how many prompt tokens it processed and how many it reused (llama.cpp `timings.cache_n`,
`prompt_n`, and the /metrics `prompt_tokens_cached_total` delta). Both sides get the same conversation:
the baseline's reply is appended for the next turn, so the prompts stay identical.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from spectui.backends.base import Backend
from spectui.core.compare import Divergence
from spectui.core.figures import SideRecorder
from spectui.core.findings import Triage
from spectui.core.report import fmt
from spectui.core.runner import counters_or_none, run_side, same_tokenizer
from spectui.core.types import GenerationParams
from spectui.core.verdict import Verdict, judge

FOLLOW_UPS = [
    "Tell me about the history of the bicycle in a short paragraph.",
    "Which of those inventors mattered most, and why?",
    "Summarise your two previous answers in one sentence.",
    "Now give me three safety tips for riding one in a city.",
    "Which of the tips is most important for a beginner?",
    "Thank you. Write a one-line slogan about cycling.",
]


@dataclass
class Turn:
    n: int
    baseline: SideRecorder
    candidate: SideRecorder
    verdict: Verdict  # THE verdict (core.verdict.judge) on this turn's two outputs
    metrics_cached: dict

    @property
    def divergence(self) -> Divergence | None:
        return self.verdict.divergence

    @property
    def ttft_speedup(self) -> float | None:
        b, c = self.baseline.figures.ttft_ms, self.candidate.figures.ttft_ms
        return b / c if b and c else None

    def to_json(self) -> dict:
        def side(rec: SideRecorder, name: str) -> dict:
            f = rec.figures
            return {
                "ttft_ms": f.ttft_ms,
                "prompt_tokens_processed": f.prompt_tokens,
                "prompt_tokens_reused": f.prompt_cached,
                "metrics_prompt_tokens_cached": self.metrics_cached.get(name),
                "tokens": f.tokens,
                "decode_tps": f.decode_tps,
                "failed": rec.failed.message if rec.failed else None,
            }

        return {
            "turn": self.n,
            "baseline": side(self.baseline, "baseline"),
            "candidate": side(self.candidate, "candidate"),
            "ttft_speedup": self.ttft_speedup,
            "verdict": self.verdict.to_json(),
            "identical": self.verdict.identical,
            "first_divergence": self.divergence.to_json() if self.divergence else None,
        }


# why reusing cached prompt tokens can change greedy bytes, per server kind: one line under the lab's table and
# in a differing turn's triage
REUSE_WHY = {
    "llama.cpp": (
        "llama.cpp reads a reused prefix from its KV cache instead of prefilling it with the rest of the prompt, "
        "so the remaining tokens run in other batch shapes, and its logits are not guaranteed bit-for-bit "
        "identical across batch sizes (tools/server/README.md, cache_prompt): a near-tie can then flip"
    ),
    "vllm": (
        "vLLM skips the prefill of cached blocks and computes the rest in another batch shape; without "
        "batch-invariant kernels (VLLM_BATCH_INVARIANT=1) the logits can differ in their last bits and flip a "
        "near-tie"
    ),
    "sglang": (
        "SGLang's radix cache skips the prefill of a matched prefix and computes the rest in another batch "
        "shape; its logits can then differ in their last bits and flip a near-tie"
    ),
}
REUSE_WHY_ANY = (
    "this server reused cached prompt tokens instead of recomputing them; the two paths compute the rest of the "
    "prompt in different batch shapes, whose last bits can differ and flip a near-tie"
)


def why_reuse_differs(kind: str | None) -> str:
    """One line: why prefix reuse can change greedy output on a server of this kind."""
    return REUSE_WHY.get(kind or "", REUSE_WHY_ANY)


def turn_triage(turn: Turn, kind: str | None) -> Triage | None:
    """A differing turn's finding: which request, where the bytes part, and the cause. The two requests of a
    turn differ only in the prompt cache (the same conversation, model, seed and temperature; the baseline
    recomputes, the candidate reuses), so a difference is the cache's; None for a turn that does not differ."""
    d = turn.divergence
    if d is None or turn.verdict.status != "differs":
        return None
    c = turn.candidate.figures
    reused = "an unknown number of" if c.prompt_cached is None else str(c.prompt_cached)
    summary = (
        f"turn {turn.n} (request {turn.n} of the conversation, {2 * turn.n - 1} messages): the candidate reused "
        f"{reused} cached prompt tokens, the baseline recomputed its whole prompt; the bytes part at byte {d.byte} "
        f"(token {d.baseline_token} / {d.candidate_token}). The cache is the one difference between the two requests"
    )
    return Triage("cache", summary, notes=[f"why: {why_reuse_differs(kind)}"])


def same_server(baseline_url: str, candidate_url: str) -> str | None:
    """Why a prefix comparison of a server with itself measures nothing (None where the URLs differ): its cold
    request fills the very cache the warm one then reads, so "warm" is the cold run's echo (a 19.76× was
    reported so). localhost and 127.0.0.1 are the same host; a trailing slash or /v1 names the same server."""

    def where(url: str) -> tuple[str, int | None]:
        u = urlsplit(url if "://" in url else f"http://{url}")
        host = (u.hostname or "").lower()
        host = "127.0.0.1" if host in ("localhost", "::1", "0.0.0.0") else host
        return host, u.port or (443 if u.scheme == "https" else 80)

    if where(baseline_url) != where(candidate_url):
        return None
    return (
        f"--baseline and --candidate are the same server ({baseline_url}): its cold request would fill the cache "
        "its warm one reads, so the speed-up would measure nothing. Start a second llama-server on another port "
        "(with --no-cache-prompt for the cold side) and give its URL as --baseline"
    )


async def clear_cache(backend: Backend) -> str:
    """Clear the prompt cache where the server allows it, and say what was done."""
    if not backend.capabilities.cache_reset:
        return "this server offers no way to clear its cache; the first turn may not be cold"
    return await backend.reset_cache()


async def run_prefix(
    baseline: Backend, candidate: Backend, turns: list[str], params: GenerationParams, on_turn=None
) -> tuple[list[Turn], dict[str, str]]:
    cleared = {"baseline": await clear_cache(baseline), "candidate": await clear_cache(candidate)}
    messages: list[dict] = []
    out: list[Turn] = []
    for n, text in enumerate(turns, 1):
        messages.append({"role": "user", "content": text})
        recs, cached = {}, {}
        for name, backend, cache in (("baseline", baseline, False), ("candidate", candidate, True)):
            prompt = await backend.render_chat(messages)
            before = await counters_or_none(backend)
            recs[name] = await run_side(
                name, backend, prompt, GenerationParams(params.max_tokens, params.temperature, params.seed, cache)
            )
            after = await counters_or_none(backend)
            cached[name] = after.minus(before).prompt_cached if after is not None and before is not None else None
        verdict = judge(recs["baseline"], recs["candidate"], same_tokenizer(baseline.info, candidate.info))
        turn = Turn(n, recs["baseline"], recs["candidate"], verdict, cached)
        out.append(turn)
        if on_turn:
            on_turn(turn)
        reply = recs["baseline"].output().decode("utf-8", errors="replace")
        messages.append({"role": "assistant", "content": reply})
    return out, cleared


def prefix_table(turns: list[Turn], kind: str | None = None) -> str:
    head = f"{'turn':>4} {'TTFT ms cold':>12} {'TTFT ms warm':>12} {'processed cold/warm':>20} {'reused warm':>11} {'TTFT speed-up':>13}  output"
    lines = [head, "-" * len(head)]
    for t in turns:
        b, c = t.baseline.figures, t.candidate.figures
        v = t.verdict
        same = {
            "identical": "identical",
            "differs": f"DIFFERS at byte {t.divergence.byte if t.divergence else '?'} ({v.reason})",
        }.get(v.status, f"not compared: {v.reason}")
        lines.append(
            f"{t.n:>4} {fmt(b.ttft_ms, '.0f'):>12} {fmt(c.ttft_ms, '.0f'):>12} "
            f"{fmt(b.prompt_tokens, 'd') + ' / ' + fmt(c.prompt_tokens, 'd'):>20} {fmt(c.prompt_cached, 'd'):>11} "
            f"{(fmt(t.ttft_speedup, '.2f') + '×') if t.ttft_speedup else '—':>13}  {same}"
        )
    if any(t.divergence for t in turns):
        lines.append(
            "a turn that reused cached prompt tokens gave different bytes than recomputing them: reuse is "
            "not guaranteed bit-exact on this server; the reused-token count is beside each verdict"
        )
        lines.append(f"why: {why_reuse_differs(kind)}")
    return "\n".join(lines)


# -- saved conversation caches (llama.cpp /slots) -------------------------------------------------------
async def restore_experiment(
    backend: Backend,
    messages: list[dict],
    params: GenerationParams,
    filename: str = "spectui-restore-check.bin",
    slot: int = 0,
) -> dict:
    """Save the conversation's cache, then time its next turn recomputed (slot erased) and restored."""
    p = GenerationParams(params.max_tokens, params.temperature, params.seed, True)
    first = await run_side("candidate", backend, await backend.render_chat(messages), p)
    convo = messages + [
        {"role": "assistant", "content": first.output().decode("utf-8", errors="replace")},
        {"role": "user", "content": "Please go on."},
    ]
    nxt = await backend.render_chat(convo)
    t0 = time.perf_counter()
    saved = await backend.slot_action("save", slot, filename)
    save_ms = saved.ms if saved.ms is not None else (time.perf_counter() - t0) * 1000
    await backend.slot_action("erase", slot, None)
    # recompute for real: the server can also keep prompts in a host-memory cache beyond the slot
    recomputed = await run_side("candidate", backend, nxt, GenerationParams(p.max_tokens, p.temperature, p.seed, False))
    await backend.slot_action("erase", slot, None)
    t0 = time.perf_counter()
    restored = await backend.slot_action("restore", slot, filename)
    restore_ms = restored.ms if restored.ms is not None else (time.perf_counter() - t0) * 1000
    after = await run_side("candidate", backend, nxt, p)
    return {
        "tokens_saved": saved.tokens,
        "file_bytes": saved.file_bytes,
        "save_ms": save_ms,
        "restore_ms": restore_ms,
        "tokens_restored": restored.tokens,
        "recomputed": {
            "ttft_ms": recomputed.figures.ttft_ms,
            "prompt_tokens_processed": recomputed.figures.prompt_tokens,
            "prompt_tokens_reused": recomputed.figures.prompt_cached,
        },
        "restored": {
            "ttft_ms": after.figures.ttft_ms,
            "prompt_tokens_processed": after.figures.prompt_tokens,
            "prompt_tokens_reused": after.figures.prompt_cached,
        },
        "identical": recomputed.output() == after.output(),
    }
