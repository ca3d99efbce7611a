"""The formula's terms on a vLLM pair, from a session recorded on real vLLM servers (the vLLM audit): vLLM
reports no per-request prompt timings, so no term is measured; the label says that is the missing term
(not "does not tokenize text", which vLLM does), and no rendering says "the measured terms" account for
the speed-up when none was measured."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from spectui.backends.vllm import VLLMBackend
from spectui.core import terms_table
from spectui.core.runner import grouped
from spectui.labs.html_report import terms_table_html
from spectui.labs.theory import record as terms_record
from spectui.labs.theory.costs import check_prompt
from spectui.store.session import load_session, results_for

SESSION = Path(__file__).parent.parent / "data" / "session-vllm-ngram-quick2-runs2.jsonl"


async def _checks():
    session = load_session(SESSION)
    groups = [g for g in grouped(results_for(session)) if any(r.speedup for r in g.runs)]
    assert [g.prompt.id for g in groups] == ["code-fizzbuzz", "qa-capital"]

    def refuse(request: httpx.Request) -> httpx.Response:  # nothing may be asked of the servers
        raise AssertionError(f"a request was sent: {request.method} {request.url}")

    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as client:
        base = VLLMBackend("http://127.0.0.1:18101", client)
        cand = VLLMBackend("http://127.0.0.1:18102", client)
        return [(g.prompt.id, *(await check_prompt(client, base, cand, g.runs))) for g in groups]


def test_a_vllm_pair_falls_back_to_the_ideal_terms_naming_the_missing_timings():
    out = asyncio.run(_checks())
    for pid, chk, curve in out:
        assert chk is not None and curve is not None and not curve.measured
        for key in ("c", "verify", "reeval"):
            src = chk.costs.sources[key]
            assert src.startswith("not measured") and "reports no per-request prompt timings" in src, (pid, src)
            assert "tokenize" not in src
        assert chk.costs.verify == (1.0,) and chk.costs.none_measured
    entries = [terms_record.entry(pid, chk, curve) for pid, chk, curve in out]
    text = "\n".join(terms_table.lines(entries))
    assert "the measured terms" not in text
    agreeing = [pid for pid, chk, _ in out if chk.agree]
    assert agreeing, "the recorded runs' predictions fall inside their intervals"
    for pid in agreeing:
        assert f"{pid}: the ideal formula's terms (none measured) lie within the measured interval" in text
    assert "account for" not in text  # assumed terms explain nothing
    for _, chk, _ in out:
        html = terms_table_html(chk)
        assert "the measured terms" not in html
        assert "none measured" in html or not chk.agree
        assert "the measured terms" not in chk.text()
