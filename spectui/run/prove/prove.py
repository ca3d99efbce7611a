"""`spectui prove`: the run session, driven to make a certificate (run.prove.certificate).

    Prover.run()
      1. greedy: RunSession over the share of the prompt set, `runs` interleaved runs each (B C / C B),
         recorded to greedy.jsonl; then RunSession.triage on the first differing run of each prompt
      2. sampled: RunSession per seed on the sampled prompts (temperature T, seeds S, S+1, …), recorded to
         sampled.jsonl; nothing is triaged there (sampled outputs may differ by design)
      3. measured_on (run.prove.provenance), then certificate.build: every figure derived from the files just
         written, exactly as `spectui verify` will derive them again

One server at a time (`OneAtATime`: a GPU that cannot hold both): the greedy runs and the sampled pass
go through run.phased (each side started alone; whole phases alternate B C | C B, the sampled pass last);
triage, which reruns a prompt on both servers at once, is skipped and the certificate says why.

Nothing here has a loop over requests of its own: each request goes through RunSession (core.runner).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spectui.backends import spectypes
from spectui.backends.launchspec import LaunchSpec
from spectui.core.errors import InputError, SpectuiError
from spectui.core.findings import NEAR_TIE_NATS
from spectui.core.runner import PromptResult, Source
from spectui.core.types import SIDES, GenerationParams, Prompt, ServerInfo
from spectui.labs.formats import nway
from spectui.run.alone import OneAtATime
from spectui.run.events import (
    CertificateWritten,
    PhaseStarted,
    Progressed,
    PromptFinished,
    PromptStarted,
    ProveEvent,
    RunEvent,
)
from spectui.run.phased import ORDER, Pass, PhasedRun
from spectui.run.prove import certificate
from spectui.run.prove.provenance import measured_on, prompt_set_hash
from spectui.run.prove.shard import Shard, sampled_positions
from spectui.run.session import RunOptions, RunSession
from spectui.store import spec_profile
from spectui.store.locations import data_dir
from spectui.store.session_writer import SessionWriter

GREEDY, SAMPLED = "greedy.jsonl", "sampled.jsonl"
TRIAGE_SKIPPED = (
    "skipped: triage reruns a differing prompt on both servers and asks both for log-probabilities, "
    "and the two were never up together"
)


class SessionNotWritten(SpectuiError):
    """A session (or the certificate) stopped being written — a full disk, a file-size limit: no certificate
    is made over a cut session. `results`: every prompt run that finished, for the text report."""

    hint = "free some space (or give -o a folder on another disk) and run prove again"

    def __init__(self, message: str, results: list[PromptResult]) -> None:
        super().__init__(message)
        self.results = results


@dataclass
class ProveOptions:
    runs: int = 2
    sampled: int = 0  # prompts of the set that the sampled pass covers
    samples: int = 16  # seeds per sampled prompt and side
    temperature: float = 0.8  # the sampled pass's (greedy is always 0)
    sample_max_tokens: int = 16
    seed_base: int = 1000
    triage: bool = True
    triage_limit: int = 10  # differing prompts triaged (each costs reruns and a log-probability request)
    near_tie: float = NEAR_TIE_NATS
    order: str = "sequential"
    shard: Shard | None = None
    hash_files: bool = True

    def check(self) -> None:
        if self.runs < 1:
            raise InputError(f"--runs must be at least 1, not {self.runs}")
        if self.sampled < 0:
            raise InputError(f"--sampled must be 0 or more, not {self.sampled}")
        if self.sampled and self.samples < 2:
            raise InputError(
                f"--samples must be at least 2 (two samples per side make a distribution), not {self.samples}"
            )
        if self.sampled and not self.temperature > 0:
            raise InputError(f"--temperature for the sampled pass must be above 0, not {self.temperature}")
        if self.sample_max_tokens < 1:
            raise InputError(f"--sample-max-tokens must be at least 1, not {self.sample_max_tokens}")


def default_dir(shard: Shard | None = None) -> Path:
    """Where a certificate goes when no -o is given: the data folder's certificates/, one folder each."""

    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    tail = f"-shard-{shard.index}-of-{shard.of}" if shard else ""
    return data_dir() / "certificates" / f"certificate-{stamp}-{os.getpid()}{tail}"


def prepare_dir(out: Path) -> Path:
    """The certificate's folder: new or empty of spectui's files; never overwrites raw sessions."""

    out = out.expanduser()
    if out.exists() and not out.is_dir():
        raise InputError(f"-o {out} is a file", hint="give -o a folder for the certificate and its sessions")
    folder = out
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # the nearest folder that exists: the missing ones are made in it
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(
            f"-o {out}: cannot write in {folder} (permission denied)",
            hint="give -o a folder you may write in; checked before any server is started",
        )
    for name in (GREEDY, SAMPLED, certificate.CERT_NAME, spec_profile.FILE_NAME, nway.FILE_NAME):
        if (out / name).exists():
            raise InputError(
                f"{out / name} exists: not overwriting a certificate's raw data", hint="give -o a new folder"
            )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create {out}: {exc.strerror}") from None

    try:  # written to, not only asked: a read-only mount says yes to access() for root
        with tempfile.NamedTemporaryFile(dir=out, prefix=".spectui-write-check-"):
            pass
    except OSError as exc:
        raise InputError(
            f"-o {out}: cannot write in it ({exc.strerror or exc})",
            hint="give -o a folder you may write in; checked before any server is started",
        ) from None
    return out


class Prover:
    def __init__(
        self,
        baseline: Source | None,
        candidate: Source | None,
        params: GenerationParams,
        prompts: list[Prompt],
        set_name: str,
        out_dir: Path,
        options: ProveOptions,
        *,
        emit: Callable[[RunEvent | ProveEvent], None] | None = None,
        machine: Callable[[], tuple[list, object]] | None = None,
        client: object | None = None,
        launched: dict[str, LaunchSpec] | None = None,
        argvs: dict[str, list[str] | None] | None = None,
        gpu_probe=None,
        one_at_a_time: OneAtATime | None = None,
    ) -> None:
        if not prompts:
            raise InputError("the prompt set is empty")
        options.check()
        self.baseline, self.candidate = baseline, candidate
        self.params = dataclasses.replace(params, temperature=0.0)  # the greedy pass is greedy
        self.prompts, self.set_name = prompts, set_name
        self.out = out_dir
        self.options = options
        self._emit = emit
        self.machine = machine
        self.client = client
        self.launched = launched or {}
        self.argvs = argvs or {}
        self.gpu_probe = gpu_probe
        self.alone = one_at_a_time
        if one_at_a_time is None and (baseline is None or candidate is None):
            raise InputError("prove needs both servers, or one_at_a_time to start each alone")
        self.infos: dict = {}  # one at a time: each side's server as it answered when it was up
        self.results: list[PromptResult] = []  # every prompt run that finished, in order
        self.profile_path: Path | None = None  # the speculation_profile.json written beside the certificate
        self.write_errors: list[str] = []
        if one_at_a_time is not None:
            self.options = options = dataclasses.replace(options, order=ORDER)
        shard = options.shard
        self.share = [p for i, p in enumerate(prompts) if shard is None or shard.takes(i)]
        picked = sampled_positions(len(prompts), options.sampled)
        self.sampled_all = [prompts[i] for i in picked]
        self.sampled = [prompts[i] for i in picked if shard is None or shard.takes(i)]
        if not self.share:
            raise InputError(f"shard {shard.text() if shard else ''} of a {len(prompts)}-prompt set holds no prompt")
        self._check_warm(options.runs)

    def _check_warm(self, runs: int) -> None:
        """A drafter that keeps state between requests (backends.spectypes) needs a warm run of each prompt."""
        note = spectypes.state_note(spectypes.chain_from_argv(self._argv("candidate")))
        if note is not None and runs < 2:
            raise InputError(
                f"--runs {runs}: the candidate's drafter keeps state between requests ({note}), so one run of "
                "each prompt is cold only",
                hint="give --runs 2 or more: every run after the first is a warm one, and the certificate covers all",
            )

    def emit(self, ev) -> None:
        if isinstance(ev, PromptFinished):
            self.results.append(ev.result)
        if self._emit is not None:
            self._emit(ev)

    def _closed(self, writer) -> None:
        """A writer closed: where its file stopped taking lines (SessionWriter.error), remembered."""
        writer.close()
        if writer.error and writer.path is not None:
            self.write_errors.append(f"the session {writer.path} stopped being written ({writer.error})")

    def inputs(self) -> dict:
        o, p = self.options, self.params
        return {
            "prompt_set": {
                "name": self.set_name,
                "sha256": _set_hash(self.prompts),
                "count": len(self.prompts),
                "prompts": [{"id": q.id, "category": q.category} for q in self.prompts],
            },
            "shard": o.shard.to_json() if o.shard else None,
            "share": [q.id for q in self.share],
            "params": {"max_tokens": p.max_tokens, "seed": p.seed, "cache_prompt": p.cache_prompt, "order": o.order},
            "runs": o.runs,
            "sampled": {
                "ids": [q.id for q in self.sampled_all],
                "samples": o.samples,
                "temperature": o.temperature,
                "max_tokens": o.sample_max_tokens,
                "seed_base": o.seed_base,
            }
            if self.sampled_all
            else None,
            **({"one_at_a_time": {"why": self.alone.why, "triage": TRIAGE_SKIPPED}} if self.alone is not None else {}),
        }

    def _session(self, params: GenerationParams, writer, repeat: int, emit=None) -> RunSession:
        assert self.baseline is not None and self.candidate is not None  # both up: not one at a time
        opts = RunOptions(
            order=self.options.order,
            repeat=repeat,
            triage=False,
            near_tie=self.options.near_tie,
            launched=self.launched,
        )
        return RunSession(
            self.baseline,
            self.candidate,
            params,
            opts,
            writer=writer,
            emit=emit or self.emit,
            machine=self.machine,
            client=self.client,
        )

    async def run(self) -> dict:
        o = self.options
        out = prepare_dir(self.out)
        refs_paths = [(out / GREEDY, "greedy")] + ([(out / SAMPLED, "sampled")] if self.sampled else [])
        if self.alone is not None:
            await self._one_at_a_time(out)
        else:
            await self._together(out)
        if self.write_errors:  # a cut session would give a certificate of what it kept: none at all
            raise SessionNotWritten(
                f"{self.write_errors[0]}: the disk is full or the file too large; no certificate was made",
                self.results,
            )

        self.emit(PhaseStarted("certificate", 1))

        infos = {side: self._info(side) for side in SIDES}
        argvs = {side: self._argv(side) for side in SIDES}
        mo = measured_on(infos, argvs, self.prompts, self.set_name, o.hash_files, self.gpu_probe)
        refs = [certificate.session_ref(p, out, phase) for p, phase in refs_paths]
        doc = certificate.build(self.inputs(), mo, refs, out)
        path = out / certificate.CERT_NAME
        try:
            certificate.write(doc, path)
        except OSError as exc:
            raise SessionNotWritten(
                f"the certificate could not be written in {out} ({exc.strerror or exc}): the disk is full or the "
                "file too large",
                self.results,
            ) from None
        self.profile_path = self._write_profile(out, infos["candidate"])
        self.emit(CertificateWritten(path, doc))
        return doc

    def _write_profile(self, out: Path, candidate: ServerInfo) -> Path | None:
        """NVIDIA Model-Optimizer's speculation_profile.json beside the certificate (store.spec_profile), from the
        greedy runs' verification steps; None where the candidate drafted nothing. Extra to the certificate:
        a failure to write it is said, never fatal."""
        greedy = [r for r in self.results if r.params is None or r.params.temperature == 0]
        conditions = {"prompt_set": self.set_name, "runs": self.options.runs, "temperature": 0.0}
        profile = spec_profile.from_results(greedy, candidate.model, conditions)
        if profile is None:
            return None
        try:
            return spec_profile.write(profile, out)
        except OSError as exc:
            self.write_errors.append(f"{out / spec_profile.FILE_NAME} was not written ({exc.strerror or exc})")
            return None

    async def _together(self, out: Path) -> None:
        o = self.options
        total = len(self.share) * o.runs
        self.emit(PhaseStarted("greedy", total))
        writer = SessionWriter(out / GREEDY)
        try:
            done = 0

            def counted(ev) -> None:
                nonlocal done
                self.emit(ev)
                if isinstance(ev, PromptFinished):
                    done += 1
                    self.emit(Progressed("greedy", done, total, ev.result.prompt.id))

            session = self._session(self.params, writer, o.runs, counted)
            results = await session.run(self.share, triage=False)
            if o.triage:
                first: dict[str, PromptResult] = {}
                for r in results:
                    if r.verdict is not None and r.verdict.status == "differs":
                        first.setdefault(r.prompt.id, r)
                todo = list(first.values())[: o.triage_limit]
                if todo:
                    self.emit(PhaseStarted("triage", len(todo)))
                for k, r in enumerate(todo, 1):
                    await session.triage(r)
                    self.emit(Progressed("triage", k, len(todo), r.prompt.id))
        finally:
            self._closed(writer)
        if self.sampled:
            total = len(self.sampled) * o.samples
            self.emit(PhaseStarted("sampled", total))
            writer = SessionWriter(out / SAMPLED)
            try:
                done = 0
                for prompt in self.sampled:
                    for i in range(o.samples):
                        await self._session(self.sampled_params(i), writer, 1).run([prompt], triage=False)
                        done += 1
                        self.emit(Progressed("sampled", done, total, prompt.id))
            finally:
                self._closed(writer)

    async def _one_at_a_time(self, out: Path) -> None:
        """Both passes one server at a time: the greedy runs, then the sampled pass (each seed its own
        parameters), on one schedule of whole phases, each pair judged as side by side."""
        assert self.alone is not None
        o = self.options
        greedy_total = len(self.share) * o.runs
        sampled_total = len(self.sampled) * o.samples
        done = {"greedy": 0, "sampled": 0}

        def counted(phase: str, total: int):
            def emit(ev) -> None:
                if phase == "sampled" and isinstance(ev, PromptStarted) and not began:
                    began.append(True)  # its first pair: the sampled pass's candidate side is up
                    self.emit(PhaseStarted("sampled", total))
                self.emit(ev)
                if isinstance(ev, PromptFinished):
                    done[phase] += 1
                    self.emit(Progressed(phase, done[phase], total, ev.result.prompt.id))

            return emit

        began: list[bool] = []
        self.emit(PhaseStarted("greedy", greedy_total))
        writers = {"greedy": SessionWriter(out / GREEDY)}
        try:
            passes = [
                Pass(
                    [(p, self.params) for p in self.share],
                    k,
                    o.runs,
                    writers["greedy"],
                    counted("greedy", greedy_total),
                )
                for k in range(1, o.runs + 1)
            ]
            if self.sampled:
                writers["sampled"] = SessionWriter(out / SAMPLED)
                items = [(p, self.sampled_params(i)) for p in self.sampled for i in range(o.samples)]
                passes.append(Pass(items, 1, 1, writers["sampled"], counted("sampled", sampled_total), "sampled pass"))
            assert self.alone.open_side is not None, "prove opens each side through its driver's open_side"
            run = PhasedRun(self.alone.open_side, self.params, o.runs, say=self.alone.say)
            try:
                await run.run_passes(passes)
            finally:
                self.infos = run.infos()
        finally:
            for w in writers.values():
                self._closed(w)

    def sampled_params(self, i: int) -> GenerationParams:
        o = self.options
        return dataclasses.replace(
            self.params,
            temperature=o.temperature,
            seed=o.seed_base + i,
            max_tokens=o.sample_max_tokens,
            cache_prompt=False,
        )

    def _info(self, side: str):
        source = self.baseline if side == "baseline" else self.candidate
        if source is None:  # one at a time: as the side answered while it was up
            return self.infos.get(side) or ServerInfo("?")
        return source.info or ServerInfo(source.url)

    def _argv(self, side: str) -> list[str] | None:
        """How the side was started: as spectui launched it, as the caller says, or as the local process
        listening on its port was started (None: not on this machine)."""
        spec = self.launched.get(side)
        if spec is not None and spec.launched:
            return list(spec.argv)
        if side in self.argvs:
            return self.argvs[side]
        from spectui.machine.probes import local_argv  # lazy: psutil (~20 ms cold)

        source = self.baseline if side == "baseline" else self.candidate
        return local_argv(source.url) if source is not None else None


def _set_hash(prompts: list[Prompt]) -> str:
    return prompt_set_hash(prompts)
