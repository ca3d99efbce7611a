"""The option groups several commands share, written once so that their help cannot drift: the pair
(which two servers), the prompt set, generation, requests, connection and output. Each command adds the
groups whose options it reads (pip's cmdoptions.py does the same for pip's commands)."""

from __future__ import annotations

import argparse
import math
from typing import NoReturn

from spectui.backends.registry import KIND_CHOICES as BACKEND_CHOICES  # "auto" and every registered kind

EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """argparse with spectui's usage error: one line, what to read next, exit 2."""

    def error(self, message: str) -> NoReturn:
        sub = self.prog.split()[1:]  # "spectui compare" → ["compare"]
        self.exit(EXIT_USAGE, f"spectui: error: {message} (see spectui {' '.join(sub) + ' ' if sub else ''}--help)\n")


def finite(text: str) -> float:
    """An argparse type: a finite number (nan and inf are refused, with a usage error)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return v


def positive(text: str) -> float:
    v = finite(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return v


# -- which two servers ------------------------------------------------------------------------------------
def add_pair(p: argparse.ArgumentParser, *, launch: bool = True) -> None:
    """--baseline/--candidate (two running servers), and with launch also --launch/--profile/--one-at-a-time
    (a profile's pair started for the run and stopped after; run.pair plans it)."""
    g = p.add_argument_group("the two servers")
    if not launch:
        g.add_argument("--baseline", required=True, metavar="URL", help="the baseline server")
        g.add_argument("--candidate", required=True, metavar="URL", help="the candidate server")
        return
    g.add_argument("--baseline", metavar="URL", help="the baseline server (or --launch a profile's pair)")
    g.add_argument("--candidate", metavar="URL", help="the candidate server (or --launch a profile's pair)")
    g.add_argument(
        "--launch",
        metavar="COMPARISON",
        help="start the comparison's two servers from the profile (--profile, default cpu-demo) and stop them after",
    )
    g.add_argument(
        "--profile",
        metavar="NAME",
        help="the hardware profile whose pair --launch starts (default cpu-demo); recorded in the notebook",
    )
    g.add_argument(
        "--one-at-a-time",
        action="store_true",
        help="with --launch: the baseline alone, stopped, then the candidate alone (chosen by itself where "
        "the memory plan says the two do not fit on the GPU together)",
    )


# -- which prompts ----------------------------------------------------------------------------------------
def add_prompt_choice(p: argparse.ArgumentParser, *, required: bool = True) -> None:
    """--prompt TEXT (with --raw) or --prompts SET|FILE, one of the two."""
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("--prompt", metavar="TEXT", help="one user message")
    g.add_argument("--prompts", metavar="SET|FILE", help="a bundled prompt set by name, or a prompts file")
    p.add_argument("--raw", action="store_true", help="send --prompt unchanged, without the chat template")


def add_prompt_subset(p: argparse.ArgumentParser) -> None:
    """--limit, --sample, --sample-seed: which prompts of the set or file run."""
    g = p.add_argument_group("which prompts of the set")
    g.add_argument("--limit", type=int, metavar="N", help="only the first N prompts of the set or file")
    g.add_argument("--sample", type=int, metavar="N", help="N prompts of the set or file, drawn at random")
    g.add_argument("--sample-seed", type=int, default=0, metavar="S", help="the draw's seed for --sample (default 0)")


# -- generation and requests ------------------------------------------------------------------------------
def add_generation(p: argparse.ArgumentParser, *, seed: bool = True) -> None:
    """--max-tokens, --temperature and (where the command does not set each request's seed) --seed."""
    g = p.add_argument_group("generation")
    g.add_argument("--max-tokens", type=int, default=128, metavar="N", help="tokens to generate (default 128)")
    g.add_argument("--temperature", type=finite, default=0.0, metavar="T", help="0 is greedy (default)")
    if seed:
        g.add_argument("--seed", type=int, default=42, metavar="S", help="the requests' sampling seed (default 42)")


def add_time_limits(p: argparse.ArgumentParser) -> None:
    """--idle-timeout and --deadline: when a side's request is given up."""
    g = p.add_argument_group("time limits")
    g.add_argument(
        "--idle-timeout",
        type=positive,
        default=120.0,
        metavar="SEC",
        help="fail a side after this long without an event; keep-alives do not count (default 120)",
    )
    g.add_argument(
        "--deadline",
        type=positive,
        default=3600.0,
        metavar="SEC",
        help="fail a side whose request takes longer than this (default 3600)",
    )


def add_cache_prompt(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cache-prompt",
        choices=("off", "on", "server"),
        default="off",
        help="prompt cache per request: off (default, both sides cold), on, or the server's default",
    )


def add_order(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--order",
        choices=("sequential", "concurrent"),
        default="sequential",
        help="sequential (default: the sides do not distort each other's timing) or concurrent",
    )


def add_connection(p: argparse.ArgumentParser) -> None:
    """--ready-timeout, --backend (and the per-side ones, hidden), --api-key-env: how both servers are reached."""
    g = p.add_argument_group("connection")
    g.add_argument(
        "--ready-timeout",
        type=positive,
        default=120.0,
        metavar="SEC",
        help="how long to wait for a loading server (default 120)",
    )
    g.add_argument(
        "--backend",
        choices=BACKEND_CHOICES,
        default="auto",
        help="server kind for both sides (default: detect each from its endpoints)",
    )
    g.add_argument("--baseline-backend", choices=BACKEND_CHOICES, help=argparse.SUPPRESS)
    g.add_argument("--candidate-backend", choices=BACKEND_CHOICES, help=argparse.SUPPRESS)
    g.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="environment variable holding a bearer token for OpenAI-compatible servers (never saved)",
    )


def add_run_options(p: argparse.ArgumentParser) -> None:
    """Every run option at once (compare, prove): the prompt subset, generation, time limits, order, cache,
    connection."""
    add_prompt_subset(p)
    add_generation(p)
    add_time_limits(p)
    add_order(p)
    add_cache_prompt(p)
    add_connection(p)


# -- output -----------------------------------------------------------------------------------------------
def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document instead of the text")


def add_notebook(p: argparse.ArgumentParser, what: str = "each result") -> None:
    p.add_argument(
        "--notebook",
        nargs="?",
        const="",
        metavar="PATH",
        help=f"append {what} to the lab notebook (PATH, else $SPECTUI_NOTEBOOK, else the default)",
    )


def add_repeat(p: argparse.ArgumentParser, what: str = "each prompt") -> None:
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help=f"{what} N times per side, interleaved; the speed-up (geometric mean) with its 95%% interval",
    )
