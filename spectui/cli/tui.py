"""`spectui tui` (and plain `spectui`): the app on two servers, or the profile picker; a session's replay."""

from __future__ import annotations

import argparse
import math
import signal

from spectui.backends.detect import api_key_from
from spectui.cli import options
from spectui.cli.commands import COMMANDS
from spectui.cli.common import params_from
from spectui.core.errors import InputError
from spectui.core.runner import SIDES
from spectui.store.config import load as load_settings
from spectui.store.replay import ReplayControl, SessionBackend
from spectui.tui.app import AppConfig, make_app


def run_replay(session, speed: str) -> int:
    try:
        rate = None if speed == "max" else float(speed.rstrip("x"))
    except ValueError:
        raise InputError(f"--speed must be a number (1, 2, 10, …) or max, not {speed!r}") from None
    if rate is not None and not (math.isfinite(rate) and rate > 0):
        raise InputError(f"--speed must be a positive finite number or max, not {speed!r}")
    first = session.prompts[0]
    control = ReplayControl(rate)
    config = AppConfig(
        session.infos["baseline"].url,
        session.infos["candidate"].url,
        params=first.params,
        order=first.order,
        prompts=[sp.prompt for sp in session.prompts],
        backends={s: SessionBackend(s, session, rate, control) for s in SIDES},
        replay_control=control,
        autorun_all=True,
        title=f"spectui replay · {session.path.name}",
    )
    app = make_app(config)
    app.run()
    return app_exit(app)


def app_exit(app) -> int:
    """The command's exit status after the app: non-zero when it died of an error (Textual's return code
    1), so a script sees the failure (`spectui tui` exited 0 after a traceback)."""
    return getattr(app, "return_code", 0) or 0


def cmd_tui(args) -> int:
    if bool(args.baseline) != bool(args.candidate):
        raise InputError("give both --baseline URL and --candidate URL, or neither (to pick a profile)")
    pick = not args.baseline

    settings, _ = load_settings()  # autosave = false, auto_notebook = true, notebook = "…" in config.toml
    config = AppConfig(
        args.baseline or "not started",
        args.candidate or "not started",
        prompt_set=args.prompts,
        params=params_from(args),
        order=args.order,
        triage=args.triage,  # --no-triage: it was parsed but never reached the app
        ready_timeout=args.ready_timeout,
        pick_profile=pick,
        backend_kind=args.backend,
        api_key=api_key_from(args.api_key_env),
        autosave=bool(settings.get("autosave", True)) and not args.no_autosave,
        auto_notebook=bool(settings.get("auto_notebook", False)),
        notebook=args.notebook or settings.get("notebook"),
    )
    app = make_app(config)

    def on_term(signum, frame):  # a `kill` of spectui still stops the servers it started
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        app.run()
    finally:
        if getattr(app, "launcher", None) is not None:
            app.launcher.stop_all()
    return app_exit(app)


def register(sub) -> None:
    p = sub.add_parser("tui", help=COMMANDS["tui"].help)
    p.add_argument("--no-autosave", action="store_true", help="do not record runs into the sessions folder")
    p.add_argument("--notebook", metavar="PATH", help="the lab notebook for Ctrl+N (else $SPECTUI_NOTEBOOK)")
    p.add_argument("--baseline", metavar="URL", help="the baseline server (with --candidate; neither: pick a profile)")
    p.add_argument("--candidate", metavar="URL", help="the candidate server (with --baseline)")
    p.add_argument("--prompts", metavar="SET|FILE", default="default", help="a bundled prompt set by name, or a file")
    p.add_argument(
        "--triage",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="when outputs differ, find out why (default: on)",
    )
    options.add_generation(p)
    options.add_time_limits(p)
    options.add_order(p)
    options.add_cache_prompt(p)
    options.add_connection(p)
