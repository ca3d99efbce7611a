"""The draft probe on real llama-servers: rejected drafts rebuilt, and proven by the self-check.

The self-check compares each rebuilt proposal with what the server did (its accepted tokens, and the
target's token where a draft was rejected), so agreement is measured against the server, not against
the probe itself.
"""

from __future__ import annotations

import asyncio
import json

import httpx

from spectui.backends.llamacpp import LlamaCppBackend
from spectui.cli.main import main
from spectui.core import runner
from spectui.core.types import GenerationParams
from spectui.machine.drafter import start_drafter
from spectui.run import probe as drafts
from spectui.store import prompts as prompt_sets

COPY = "red green blue yellow, red green blue yellow, red green blue yellow, red green blue yellow, red green blue"


def compare(capsys, baseline, candidate, *extra):
    code = main(["compare", "--baseline", baseline, "--candidate", candidate, "--json", "--probe-drafts", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_draft_model_probe_agrees_on_the_default_set(llama_servers, capsys, tmp_path):
    session = tmp_path / "probe.jsonl"
    code, doc = compare(
        capsys,
        llama_servers["baseline"],
        llama_servers["draft"],
        "--prompts",
        "default",
        "--max-tokens",
        # every prompt of the set; the self-check is per step, whatever the length. At 24 tokens the set still
        # makes about 50 steps, rejections on every prompt, near-ties resolved and a stream ended by its
        # end-of-generation token (measured on SmolLM2-135M with its Q2_K draft)
        "24",
        "--save",
        str(session),
    )
    assert code == (0 if all(p["identical"] for p in doc["prompts"]) else 3)
    steps = [s for p in doc["prompts"] for s in p["drafts"]["steps"]]
    # every step the server reported is there: as many probe steps as the stream's exact step count
    assert len(steps) == sum(p["candidate"]["steps"] for p in doc["prompts"])
    agreed = [s for s in steps if s["agrees"]]
    assert len(agreed) >= 0.9 * len(steps), f"{len(agreed)}/{len(steps)} steps agreed"
    for s in agreed:
        # an agreeing step's first `accepted` drafts are the tokens the target kept (checked by the probe
        # against token ids); what is shown as rejected is the rest of what was drafted
        assert len(s["draft_ids"]) == s["drafted"]
        if s["drafted"] > s["accepted"]:
            assert s["rejected_text"] and s["target_text"], s
    # replay without any server shows the same reconstruction
    code = main(["replay", "--no-tui", "--json", str(session)])
    replayed = json.loads(capsys.readouterr().out)
    assert [p["drafts"] for p in replayed["prompts"]] == [p["drafts"] for p in doc["prompts"]]


def test_ngram_probe_agrees_on_every_step_it_drafted(llama_servers, capsys):
    code, doc = compare(
        capsys,
        llama_servers["ngram"],
        llama_servers["ngram"],
        "--raw",
        "--prompt",
        COPY,
        "--max-tokens",
        "48",
        "--ngram-size",
        "3,8",
    )
    assert code == 0
    d = doc["prompts"][0]["drafts"]
    assert d["steps_total"] == doc["prompts"][0]["candidate"]["steps"] >= 3
    assert d["agreed"] == d["steps_total"], d["summary"]


def test_ngram_probe_shows_rejected_text_on_the_default_set(llama_servers, capsys):
    code, doc = compare(
        capsys,
        llama_servers["baseline"],
        llama_servers["ngram"],
        "--prompts",
        "default",
        "--max-tokens",
        # 48: about 20 steps on 5 of the 7 prompts, rejections on 5 (96 made 37 steps; a history off by one
        # token or a copy one token short failed steps on every drafting prompt at both lengths)
        "48",
        "--ngram-size",
        "3,8",
    )
    steps = [s for p in doc["prompts"] for s in p["drafts"]["steps"]]
    assert steps and all(s["agrees"] for s in steps), [s for s in steps if not s["agrees"]]
    assert any(s["rejected_text"] for s in steps)


def test_a_wrong_draft_model_is_caught_by_the_self_check(llama_servers, assets_found):
    """The target's own model posing as the draft proposes the target's tokens: it would have been
    accepted where the server rejected, so most steps disagree, and the summary says so."""

    async def go():
        async with httpx.AsyncClient() as client:
            # the probe reads the candidate's side only: the plain baseline serves the other side
            base = LlamaCppBackend(llama_servers["baseline"], client)
            cand = LlamaCppBackend(llama_servers["draft"], client)
            await base.identify()
            await cand.identify()
            launcher, wrong = await start_drafter(client, assets_found.model)
            try:
                found = []
                # qa-capital and math-apples, whose drafts are rejected most often: ≥ 10 steps, enough to be
                # caught (19 at 24 tokens, 4 of them agreeing with the wrong model; the first two prompts made 10)
                picked = [p for p in prompt_sets.load_set("default")[1] if p.id in ("qa-capital", "math-apples")]
                assert len(picked) == 2, [p.id for p in picked]
                for p in picked:
                    r = await runner.compare_prompt(base, cand, p, GenerationParams(max_tokens=24, cache_prompt=False))
                    found.append(await drafts.probe_prompt(cand, r, wrong))
                return found
            finally:
                launcher.stop_all()

    found = asyncio.run(go())
    total = sum(len(f.steps) for f in found)
    agreed = sum(f.agreed for f in found)
    assert total >= 10
    assert agreed < 0.5 * total, f"{agreed}/{total} agreed with the wrong draft model"
    assert all(f"/{len(f.steps)} steps" in f.summary() for f in found)


def test_the_probe_never_moves_the_measured_figures(llama_servers, assets_found):
    from spectui.machine.launcher import Launcher
    from tests.conftest import server_spec

    # a draft candidate of its own: the counters of a server other tests share can still move from their
    # requests (a cancelled stream finishes generating after the test that cancelled it)
    with Launcher() as launcher:
        own = launcher.add(server_spec("draft", assets_found))
        own.argv[own.argv.index("--port") + 1] = str(own.port)
        launcher.start_all(timeout=120)
        figures, figures_after, before, after, found = asyncio.run(_probe_once(llama_servers["baseline"], own.url))
    assert found.steps and found.unavailable is None
    assert figures_after == figures
    # the probe's requests went to its own server: the candidate generated, drafted and verified nothing more
    assert (after.drafted, after.accepted, after.steps, after.prompt_tokens) == (
        before.drafted,
        before.accepted,
        before.steps,
        before.prompt_tokens,
    )


async def _probe_once(baseline_url: str, url: str):
    async with httpx.AsyncClient() as client:
        base = LlamaCppBackend(baseline_url, client)  # the other side: the counters read are the candidate's
        cand = LlamaCppBackend(url, client)
        await base.identify()
        await cand.identify()
        p = prompt_sets.single("Name three primary colours.")
        # any length with a step (12 tokens make 4): the probe's requests either reach the candidate or they do not
        r = await runner.compare_prompt(base, cand, p, GenerationParams(max_tokens=12, cache_prompt=False))
        figures = json.dumps(r.candidate.figures.to_json(), sort_keys=True)
        before = await cand.counters()
        launcher, drafter = await start_drafter(client, None)
        try:
            found = await drafts.probe_prompt(cand, r, drafter)
        finally:
            launcher.stop_all()
        after = await cand.counters()
        return figures, json.dumps(r.candidate.figures.to_json(), sort_keys=True), before, after, found


def test_the_draft_model_option_names_the_file_the_probe_asked(llama_servers, assets_found, capsys):
    code, doc = compare(
        capsys,
        llama_servers["baseline"],
        llama_servers["draft"],
        "--prompt",
        "Name three primary colours.",
        "--max-tokens",
        "12",  # 4 steps, all agreeing (measured)
        "--draft-model",
        str(assets_found.draft_model),
    )
    d = doc["prompts"][0]["drafts"]
    assert code == (0 if doc["prompts"][0]["identical"] else 3)
    assert d["method"] == f"draft model {assets_found.draft_model.name}, greedy"
    assert d["steps_total"] == doc["prompts"][0]["candidate"]["steps"] and d["agreed"] >= 1
