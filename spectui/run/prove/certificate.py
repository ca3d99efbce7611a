"""The certificate: one versioned JSON document (schema: certificate.schema.json beside this module) that
says a candidate server is identical to its baseline and how much faster, derived only from the raw
session files it sits next to, each referenced by its sha256.

    sessions (greedy.jsonl, sampled.jsonl)  ──derive──▶  "derived" (every verdict and figure)
    inputs (prompt set, shard, runs, sampled subset) ┘        │
    measured_on (servers, files, hardware, version, date)     └──▶ verdict line, Markdown, HTML

`derive` is a pure function of the session files and the inputs: `prove` calls it on the files it has
just written, `verify` calls it again (no servers) and compares, and `merge` calls it on the union of
shard runs, so a merged certificate is the one a single run over the same raw data gives. Per prompt,
the verdict is THE verdict (core.verdict.judge) of each recorded run, judged from its recorded events.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from spectui.core.errors import InputError
from spectui.core.types import SIDES
from spectui.labs.theory.record import rederive, runs_by_prompt
from spectui.run.prove import conditions
from spectui.run.prove.derive import derive, load_sessions, normalised
from spectui.run.prove.provenance import sha256_file
from spectui.run.prove.render import render_html, render_markdown
from spectui.store.bounded import check_depth, read_text_bounded
from spectui.store.locations import atomic_write
from spectui.store.strict_json import StrictJSONError, first_duplicate_key, loads_strict

FORMAT = "spectui-certificate"
VERSION = 1
KNOWN_VERSIONS = (1,)  # exactly the versions this spectui reads (0, 1.5, a future 2: refused)
SCHEMA = Path(__file__).with_name("certificate.schema.json")
CERT_NAME, MD_NAME, HTML_NAME = "certificate.json", "certificate.md", "certificate.html"
# a certificate lists its prompts, shards and figures, never the sessions' events: far below this
MAX_BYTES = 64 * 1024 * 1024


# -- files -----------------------------------------------------------------------------------------
def sha256_of(path: Path) -> str:
    """In chunks: a session of any size is hashed in constant memory."""
    return sha256_file(path)


def session_ref(path: Path, base: Path, phase: str) -> dict:
    """A session as the certificate references it: its path relative to the certificate, and its sha256."""

    return {
        "path": os.path.relpath(path.resolve(), base.resolve()),
        "phase": phase,
        "sha256": sha256_of(path),
        "bytes": path.stat().st_size,
    }


def load(path: str | Path) -> dict:
    """A certificate document; a one-line error for a file that is not one (or a newer version)."""
    if "\x00" in str(path):
        raise InputError("a certificate path with a NUL byte is refused", hint="give the path of a certificate.json")
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / CERT_NAME
    if not p.is_file():
        raise InputError(f"certificate {p} does not exist")
    try:
        text = read_text_bounded(p, "certificate", MAX_BYTES)  # a regular file, its size checked before reading
        check_depth(text, f"certificate {p}")  # the one bounded loader's checks; then read strictly
        doc = loads_strict(text)
    except StrictJSONError as exc:
        raise InputError(f"{p} is not a valid certificate: {exc}", hint="the file was edited or damaged") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{p} is not a spectui certificate (not JSON: {exc})") from None
    except RecursionError:
        raise InputError(f"{p} is not a spectui certificate (JSON nested too deeply to read)") from None
    except OSError as exc:
        raise InputError(f"cannot read {p}: {exc.strerror}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError(f'{p} is not a spectui certificate (no "format": "{FORMAT}")')
    version = doc.get("version")
    if isinstance(version, bool) or version not in KNOWN_VERSIONS:
        known = ", ".join(map(str, KNOWN_VERSIONS))
        raise InputError(f"{p}: certificate version {_short(version)}; this spectui reads version {known}")
    doc.pop("_path", None)
    if why := schema_error(doc):
        raise InputError(f"{p} is not a valid certificate: {why}", hint="the file was edited or damaged")
    doc["_path"] = str(p)
    return doc


def schema_error(doc: dict) -> str | None:
    """The shipped JSON schema (certificate.schema.json) applied to a document: its first error, one line."""
    import jsonschema  # lazy: jsonschema (~266 ms cold)

    # "integer" is a whole number as JSON writes one: 3e8 is a float here (JSON Schema would take it)
    checker = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, v: isinstance(v, int) and not isinstance(v, bool)
    )
    validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=checker)
    try:
        schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
        error = jsonschema.exceptions.best_match(validator(schema).iter_errors(doc))
    except RecursionError:
        return "nested too deeply"
    if error is None:
        return None
    where = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in error.absolute_path).lstrip(".")
    return f"{where or 'the document'}: {_short(error.message)}"


def canonical(doc: dict) -> str:
    """The certificate as written: JSON, keys in a fixed order, without the reader's own `_path`."""
    return json.dumps({k: v for k, v in doc.items() if k != "_path"}, indent=2, ensure_ascii=False) + "\n"


# -- verify ------------------------------------------------------------------------------------------
@dataclass
class Verification:
    ok: bool
    problems: list[str]
    checked: list[str]


def differences(a, b, path: str = "derived", limit: int = 12) -> list[str]:
    """Where two JSON values differ, as `path: certificate says X, the sessions give Y` lines."""
    out: list[str] = []

    def walk(x, y, p):
        if len(out) >= limit:
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for k in list(x) + [k for k in y if k not in x]:
                walk(x.get(k, _MISSING), y.get(k, _MISSING), f"{p}.{k}")
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for i, (u, v) in enumerate(zip(x, y)):
                walk(u, v, f"{p}[{i}]")
        elif _nan(x) and _nan(y):  # a step cost where no step was made: NaN both times
            return
        elif x != y or type(x) is not type(y) and not (_num(x) and _num(y)):
            out.append(f"{p}: the certificate says {_short(x)}, the sessions give {_short(y)}")

    walk(a, b, path)
    return out


_MISSING = object()


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _nan(v) -> bool:
    return isinstance(v, float) and v != v


def _short(v) -> str:
    if v is _MISSING:
        return "nothing"
    text = json.dumps(v, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "…"


def verify(path: str | Path) -> Verification:
    """Every hash checked and every figure and verdict re-derived from the referenced sessions (no servers)."""
    doc = load(path)
    cert_path = Path(doc["_path"])
    base = cert_path.parent
    problems, checked, readable = _check_session_files(doc["sessions"], base)
    if len(readable) == len(doc["sessions"]):
        bad, ok = _rederive(doc, readable, base)
        problems += bad
        checked += ok
    bad, ok = check_renderings(doc, cert_path)
    return Verification(not (problems + bad), problems + bad, checked + ok)


def _check_session_files(refs: list[dict], base: Path) -> tuple[list[str], list[str], list[dict]]:
    """(problems, checked, readable): each referenced session inside the folder, there, and of its sha256
    and size; the ones that can be read (a changed one still is: its derivation says what changed)."""
    problems: list[str] = listed_twice(refs)
    checked: list[str] = []
    readable = []
    for ref in refs:
        p = base / str(ref.get("path"))
        if why := outside(str(ref.get("path")), base):
            problems.append(f"session {ref.get('path')}: {why}; not read")
            continue
        if not p.is_file():
            problems.append(f"session {ref.get('path')}: missing (the certificate references it)")
            continue
        digest = sha256_of(p)
        if digest != ref.get("sha256"):
            problems.append(
                f"session {ref.get('path')}: sha256 {digest[:16]}… does not match the certificate's "
                f"{str(ref.get('sha256'))[:16]}… (the file was changed after the certificate was made)"
            )
        elif p.stat().st_size != ref.get("bytes"):
            problems.append(
                f"session {ref.get('path')}: {p.stat().st_size} bytes, the certificate says {ref.get('bytes')}"
            )
        elif (twice := first_duplicate_key(p)) is not None:
            # readers disagree on which of two equal keys counts: the record says two things at once
            problems.append(f"session {ref.get('path')}: {twice}")
        else:
            checked.append(f"session {ref.get('path')}: sha256 ok")
        readable.append(ref)
    return problems, checked, readable


def _rederive(doc: dict, readable: list[dict], base: Path) -> tuple[list[str], list[str]]:
    """(problems, checked): the certificate's figures, verdict, conditions, terms and servers against what
    its sessions give now."""
    problems: list[str] = []
    checked: list[str] = []
    loaded: dict = {}
    try:
        loaded = load_sessions(readable, base)
        fresh = derive(loaded, doc["inputs"], doc["measured_on"])
    except InputError as exc:
        return [f"the sessions cannot be read: {exc.one_line()}"], []
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError) as exc:
        # a document the schema accepts whose values cannot describe a run (an id not in the set …)
        return [f"the certificate's inputs cannot be applied to its sessions ({type(exc).__name__}: {exc})"], []
    found = differences(doc["derived"], fresh)
    problems += found
    # what the sessions themselves say is wrong (a prompt of the share not run, a run recorded twice,
    # a recorded verdict its events contradict): a certificate over them proves nothing about it
    problems += [f"the sessions: {p}" for p in fresh.get("problems") or []]
    if not found:
        checked.append("every verdict and figure re-derived from the sessions: equal")
    top = doc.get("verdict")
    if top != fresh["verdict"]:
        problems.append(f"verdict: the certificate says {_short(top)}, the sessions give {_short(fresh['verdict'])}")
    bad, ok = conditions.check(doc, loaded)
    problems += bad
    checked += ok
    if isinstance(doc.get("terms"), dict):
        bad, ok = recheck_terms(doc["terms"], loaded.get("greedy", []))
        problems += bad
        checked += ok
    return problems + _servers_as_recorded(doc, fresh), checked


def _servers_as_recorded(doc: dict, fresh: dict) -> list[str]:
    """Each server the certificate states, against the one its sessions recorded."""
    problems = []
    for side in SIDES:
        claimed = doc["measured_on"].get("servers", {}).get(side, {})
        recorded = fresh["servers"].get(side, {})
        for key in sorted(set(recorded) | {"build", "model", "speculative", "kv_cache", "backend"}):
            if claimed.get(key) != recorded.get(key):
                problems.append(
                    f"measured_on.servers.{side}.{key}: the certificate says {_short(claimed.get(key))}, "
                    f"the sessions recorded {_short(recorded.get(key))}"
                )
    return problems


def check_renderings(doc: dict, cert_path: Path) -> tuple[list[str], list[str]]:
    """(problems, checked): the .md and .html beside the certificate, each equal to its rendering now."""
    problems: list[str] = []
    checked: list[str] = []
    for name, render in ((MD_NAME, render_markdown), (HTML_NAME, render_html)):
        r = cert_path.parent / rendering_name(cert_path, name)
        if not r.is_file():
            problems.append(f"{r.name}: missing (the rendering written beside the certificate)")
            continue
        try:
            same = r.read_text(encoding="utf-8") == render(doc)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, UnicodeDecodeError) as exc:
            problems.append(f"{r.name}: cannot be compared ({type(exc).__name__}: {exc})")
            continue
        if not same:
            problems.append(f"{r.name}: does not match the certificate JSON (edited after it was rendered)")
        else:
            checked.append(f"{r.name}: matches the certificate JSON")
    return problems, checked


def outside(path: str, base: Path) -> str | None:
    """Why a referenced session may not be read: a session is a regular file inside the certificate's
    folder (no absolute path, no `..`, no symbolic link out of it); anything else would let a certificate
    have any file on the machine hashed."""

    if any(ord(ch) < 32 or ch == "\x7f" for ch in path):
        return "a session path with a control character (a NUL byte, a newline …) is refused"
    rel = Path(path)
    if rel.is_absolute() or ".." in rel.parts:
        return "a session must be a file inside the certificate's folder (an absolute path or '..' is refused)"
    full = base / rel
    try:
        inside = full.resolve().is_relative_to(base.resolve())
        st = full.stat()
    except OSError:
        return None  # missing: said as such by the caller
    if not inside:
        return "a link out of the certificate's folder (refused)"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    return None


def listed_twice(refs: list[dict]) -> list[str]:
    """A session listed twice (by path or by content) would count its runs twice: a narrower interval
    from duplicated data."""
    out = []
    for key, what in (("path", "path"), ("sha256", "content (sha256)")):
        vals = [str(r.get(key)) for r in refs]
        for v in sorted({v for v in vals if vals.count(v) > 1}):
            out.append(
                f"sessions: the same {what} listed {vals.count(v)} times ({_short(v)}): its runs would count twice"
            )
    return out


def recheck_terms(terms: dict, greedy_sessions) -> tuple[list[str], list[str]]:
    """(problems, checked) for the certificate's measured terms (labs.theory.record): the raw times are
    recorded figures (no server to time again), and each prompt's check — α, γ, E, the prediction, the
    measured speed-up and its interval, agree or the term that misses — is derived again from those times
    and the greedy sessions' runs, and must be equal."""
    if terms.get("skipped"):
        return [], [f"terms: not measured ({terms['skipped']}): nothing to check"]
    runs = runs_by_prompt(greedy_sessions)
    problems: list[str] = []
    n = 0
    for e in terms.get("prompts") or []:
        pid = e.get("id")
        if pid not in runs:
            problems.append(f"terms: prompt {_short(pid)} has measured terms but no runs in the greedy sessions")
            continue
        try:
            chk = rederive(e, runs[pid])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            problems.append(f"terms.{pid}: the recorded measurement cannot be read ({exc!r})")
            continue
        found = differences(e.get("check"), chk.to_json() if chk is not None else None, f"terms.{pid}.check")
        problems += found
        n += not found
    checked = (
        [
            f"terms: the check of {n} prompt(s) re-derived from the recorded times and the sessions: equal "
            "(the times themselves are recorded figures)"
        ]
        if n
        else []
    )
    return problems, checked


def rendering_name(cert_path: Path, default: str) -> str:
    """certificate.json → certificate.md/.html; merged.json → merged.md/.html."""
    return cert_path.with_suffix(Path(default).suffix).name


# -- merge ---------------------------------------------------------------------------------------------
COMPARABLE_INPUTS = ("prompt_set", "params", "runs", "sampled")


def merge(paths: list[str | Path], out: str | Path) -> dict:
    """Shard certificates → the certificate a single run over the same raw data gives: identity counts
    add up and every interval is recomputed from the merged sessions, never averaged."""
    docs = [load(p) for p in paths]
    first = docs[0]
    _check_one_split(docs)
    for d in docs:
        v = verify(d["_path"])
        if not v.ok:
            raise InputError(f"{d['_path']} does not verify: {v.problems[0]}", hint="run spectui verify on it")
    for d in docs[1:]:
        if why := shards_differ(first, d):
            raise InputError(f"{d['_path']} and {first['_path']}: {why}: not shards of one certificate")
    out_path = Path(out).expanduser()
    if out_path.is_dir():
        raise InputError(f"-o {out} is a folder", hint="give -o a file name, e.g. merged.json")
    refuse_overwriting_inputs(out_path, docs)
    base = out_path.parent
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create {base}: {exc.strerror}") from None
    refs = []
    for d in docs:
        src = Path(d["_path"]).parent
        for ref in d["sessions"]:
            refs.append(session_ref(beside(src / ref["path"], base, d["inputs"]["shard"]), base, ref["phase"]))
    inputs = {**first["inputs"], "shard": None, "share": [p["id"] for p in first["inputs"]["prompt_set"]["prompts"]]}
    return build(inputs, _merged_measured_on(docs), refs, base, merged_terms(docs))


# what each shard states of its servers that its sessions cannot show: shards that state different ones are
# not one certificate's (used only to refuse, never to accept: the sessions' identities are compared too)
STATED_SAME = ("launch_argv", "launch_flags", "prefix_cache_flag")
FILE_IDENTITY = ("sha256", "bytes", "files", "file_sha256")


def shards_differ(a: dict, b: dict) -> str | None:
    """Why two shard certificates are not of one candidate, one baseline, one model: the servers as their
    sessions recorded them (build, model, speculation, cache), then what each states (command line, model
    and draft file contents)."""
    for side in SIDES:
        x, y = (d["derived"]["servers"].get(side, {}) for d in (a, b))
        if x != y:
            keys = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
            return f"the {side} server differs in {', '.join(keys)} (as the sessions recorded it)"
        sx, sy = (d["measured_on"]["servers"].get(side, {}) for d in (a, b))
        for key in STATED_SAME:
            if normalised(sx.get(key)) != normalised(sy.get(key)):
                return f"the {side} server's stated {key} differs ({_short(sx.get(key))} vs {_short(sy.get(key))})"
        for key in ("model_file", "draft_file"):
            fx, fy = sx.get(key) or {}, sy.get(key) or {}
            for k in FILE_IDENTITY:
                if fx.get(k) != fy.get(k):
                    return (
                        f"the {side}'s stated {key}.{k} differs ({_short(fx.get(k))} vs {_short(fy.get(k))}): "
                        "another file, whatever its name"
                    )
    if a["measured_on"].get("spectui") != b["measured_on"].get("spectui"):
        return "made by different spectui versions"
    return None


def _check_one_split(docs: list[dict]) -> None:
    """The certificates are shards of one prove command: the same inputs, and each shard of the split once."""
    first = docs[0]
    for d in docs[1:]:
        for key in COMPARABLE_INPUTS:
            if normalised(d["inputs"].get(key)) != normalised(first["inputs"].get(key)):
                raise InputError(
                    f"{d['_path']} and {first['_path']} differ in {key}: not shards of one certificate",
                    hint="merge shards of the same prove command (same prompt set, runs and options)",
                )
    shards = [d["inputs"].get("shard") for d in docs]
    if any(s is None for s in shards):
        raise InputError("merge takes shard certificates (made with --shard I/N); one given is not a shard")
    total = {s["of"] for s in shards}
    if len(total) != 1:
        raise InputError(f"the shards are of different splits ({', '.join(sorted(f'/{t}' for t in total))})")
    n = total.pop()
    seen = sorted(s["index"] for s in shards)
    if seen != list(range(1, n + 1)):
        missing = sorted(set(range(1, n + 1)) - set(seen))
        dup = sorted({i for i in seen if seen.count(i) > 1})
        raise InputError(
            f"shards {'missing: ' + ', '.join(f'{i}/{n}' for i in missing) if missing else ''}"
            f"{'; ' if missing and dup else ''}{'given twice: ' + ', '.join(f'{i}/{n}' for i in dup) if dup else ''}",
            hint="merge every shard of the split exactly once",
        )


def _merged_measured_on(docs: list[dict]) -> dict:
    """The first shard's conditions, dated when the last shard was made, with each shard's own listed."""
    mo = dict(docs[0]["measured_on"])
    # made when the last shard was: verify checks the date against the sessions' start times
    mo["date"] = max(str(d["measured_on"].get("date")) for d in docs)
    mo["shards"] = [
        {
            "shard": d["inputs"]["shard"],
            "certificate": d["_path"],
            "certificate_sha256": sha256_of(Path(d["_path"])),
            "hardware": d["measured_on"].get("hardware"),
            "date": d["measured_on"].get("date"),
            "urls": {s: d["measured_on"]["servers"][s].get("url") for s in SIDES},
        }
        for d in sorted(docs, key=lambda d: d["inputs"]["shard"]["index"])
    ]
    hws = {json.dumps(machine_names(d["measured_on"].get("hardware")), sort_keys=True) for d in docs}
    if len(hws) > 1:
        mo["hardware_note"] = f"the shards ran on {len(hws)} different machines: each speed-up is paired within one"
    return mo


def refuse_overwriting_inputs(out_path: Path, docs: list[dict]) -> None:
    """-o must not be (nor its .md/.html be) a certificate given, its renderings, or a session they reference."""
    taken: dict[Path, str] = {}
    for d in docs:
        cert = Path(d["_path"])
        for name in (cert.name, rendering_name(cert, MD_NAME), rendering_name(cert, HTML_NAME)):
            taken[(cert.parent / name).resolve()] = f"part of the input certificate {cert}"
        for ref in d["sessions"]:
            taken[(cert.parent / str(ref.get("path"))).resolve()] = f"a session {cert.name} references"
    for target in (out_path, out_path.with_suffix(".md"), out_path.with_suffix(".html")):
        what = taken.get(target.resolve())
        if what:
            raise InputError(
                f"-o {out_path}: writing it would replace {target} ({what})", hint="give -o a new file name"
            )


def beside(session: Path, base: Path, shard: dict) -> Path:
    """A shard's session as the merged certificate references it: where it is when that is inside the
    merged certificate's folder, else copied into it (shard-I-of-N/…), so verify reads only files inside."""

    if session.resolve().is_relative_to(base.resolve()):
        return session
    dest = base / f"shard-{shard['index']}-of-{shard['of']}" / session.name
    if dest.is_file():
        if sha256_of(dest) == sha256_of(session):
            return dest
        raise InputError(f"{dest} exists and is not {session}: not overwriting it", hint="give -o a new folder")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".part")
        shutil.copyfile(session, tmp)
        tmp.replace(dest)
    except OSError as exc:
        raise InputError(f"cannot copy {session} into {dest.parent}: {exc.strerror}") from None
    return dest


def merged_terms(docs: list[dict]) -> dict | None:
    """The shards' measured terms, never averaged: each prompt is in one shard, so each prompt's terms are
    the ones measured on the servers of the shard that ran it (its entry kept as it is). Where some shards
    measured and others did not, the merged certificate says which prompts have none."""
    parts = [d.get("terms") for d in sorted(docs, key=lambda d: d["inputs"]["shard"]["index"])]
    if all(not isinstance(t, dict) for t in parts):
        return None
    measured = [t for t in parts if isinstance(t, dict) and not t.get("skipped")]
    if not measured:
        return {"skipped": "; ".join(sorted({str(t.get("skipped")) for t in parts if isinstance(t, dict)}))}
    out = {k: v for k, v in measured[0].items() if k != "prompts"}
    out["prompts"] = [e for t in measured for e in t.get("prompts") or []]
    out["merged"] = (
        f"each prompt's terms from the shard that ran it ({len(measured)} of {len(parts)} shards measured them); "
        "not averaged"
    )
    return out


def machine_names(hw: dict | None) -> dict:
    hw = hw or {}
    return {"cpu": hw.get("cpu"), "gpus": [g.get("name") for g in hw.get("gpus") or []]}


# -- assembling and writing -------------------------------------------------------------------------------
def build(inputs: dict, measured_on: dict, refs: list[dict], base: Path, terms: dict | None = None) -> dict:
    """The certificate; `terms` (labs.theory.record, or {"skipped": why}) is kept beside "derived": its
    times were measured on the servers, its checks are derived again by verify."""
    derived = derive(load_sessions(refs, base), inputs, measured_on)
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "verdict": derived["verdict"],
        "inputs": normalised(inputs),
        "measured_on": normalised(measured_on),
        "sessions": refs,
        "derived": derived,
    }
    if terms is not None:
        doc["terms"] = normalised(terms)
    return doc


def write(doc: dict, path: Path) -> list[Path]:
    """The certificate JSON and its Markdown and HTML renderings beside it, each written atomically."""
    doc["_path"] = str(path)
    written = [atomic_write(path, canonical(doc))]
    written.append(atomic_write(path.with_suffix(".md"), render_markdown(doc)))
    written.append(atomic_write(path.with_suffix(".html"), render_html(doc)))
    return written
