"""`spectui kv`: KV cache types, each server's flags and the memory a quantised cache saves (labs.memory)."""

from __future__ import annotations

from spectui.cli.commands import COMMANDS
from spectui.cli.common import EXIT_OK
from spectui.core.errors import InputError
from spectui.labs.memory.kv import kv_text
from spectui.machine import assets


def cmd_kv(args) -> int:
    model = args.model or assets.find_model()
    if model is None:
        raise InputError("no model to size", hint="give --model PATH.gguf or run `spectui setup`")
    if args.ctx < 1:
        raise InputError("--ctx must be at least 1")
    print(kv_text(model, args.ctx))
    return EXIT_OK


def register(sub) -> None:
    p = sub.add_parser("kv", help=COMMANDS["kv"].help)
    p.add_argument("--model", metavar="GGUF", help="model to size (default: the cached SmolLM2)")
    p.add_argument("--ctx", type=int, default=4096, metavar="N", help="context length (default 4096)")
