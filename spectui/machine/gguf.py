"""The one reader of a model's header: a GGUF file's key/values and tensor table, or a Hugging Face folder's
config.json. The memory plan's KV sizes (labs.memory.kv) and the drafts lesson's model shape
(labs.memory.shape) both read models through it.

GGUF layout (ggml docs/gguf.md): magic "GGUF", version (u32, 2 or 3), tensor count and key/value count
(u64 each), then each key (u64 length + UTF-8) with its type (u32) and value, then each tensor's name,
dimensions (u32 count + u64 each, ggml order: dims[0] is the row length), type (u32) and offset (u64).

Bad input is one InputError naming the file (and the key, where a number is not what it must be), never a
traceback: a file that is not GGUF, a damaged or cut header, a config.json that is not a JSON object.
"""

from __future__ import annotations

import json
import math
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from spectui.core.errors import InputError

# GGUF value types (gguf.md, gguf_type): the scalars as struct formats; 8 is a string, 9 an array
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_LONGEST_STRING = 1 << 24  # no key or value is near this: a larger length is a damaged header


@dataclass
class GGUFHeader:
    path: Path
    version: int
    meta: dict  # scalars and strings
    array_lengths: dict  # key → number of elements of array values
    tensors: dict  # name → dims (ggml order: dims[0] is the row length); empty unless asked for
    tensor_types: dict  # name → ggml type id

    @property
    def arch(self) -> str:
        return str(self.meta.get("general.architecture", "llama"))

    def arch_value(self, key: str):
        """`{arch}.{key}` as stored, or None."""
        return self.meta.get(f"{self.arch}.{key}")


_CONFIG_MAX = 16 << 20  # a model's config.json is a few KiB


def check_regular(path: str | Path, what: str) -> Path:
    """A path given as a model: a regular file, by stat (a FIFO is never opened: opening one blocks until a
    writer comes); InputError otherwise. store.bounded checks every other file the same way; this layer
    sits below store, so the model reader keeps its own copy of the check."""
    p = Path(path).expanduser()
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        raise InputError(f"{what} {p} does not exist") from None
    except OSError as exc:
        raise InputError(f"{what} {p} cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a device"
        raise InputError(f"{what} {p} is {kind}, not a regular file", hint="give a model file")
    return p


def require_gguf(path: str | Path, flag: str) -> Path:
    """A model file given by the user: a regular file (a FIFO or a device is refused by stat, never opened)
    whose first four bytes are GGUF's magic; InputError naming the flag otherwise."""
    p = check_regular(path, flag)
    try:
        with open(p, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise InputError(f"{flag} {p} cannot be read ({exc.strerror})") from None
    if magic != b"GGUF":
        raise InputError(f"{flag} {p} is not a GGUF model file", hint="give a model's .gguf file")
    return p


def read_gguf_header(path: str | Path, tensors: bool = True) -> GGUFHeader:
    """Every key/value (arrays as lengths) and, with `tensors`, every tensor's dims and type."""
    p = check_regular(path, "model")
    try:
        fh = open(p, "rb")
    except OSError as exc:
        raise InputError(f"cannot read model {p}: {exc.strerror}") from None
    with fh:
        try:
            return _read(fh, p, tensors)
        except (struct.error, UnicodeDecodeError, KeyError, MemoryError, OverflowError, ValueError, RecursionError):
            # RecursionError: arrays of arrays nested past any real header's depth
            raise InputError(f"{p}: the GGUF header is damaged or truncated") from None


def _str(fh: BinaryIO) -> str:
    (n,) = struct.unpack("<Q", fh.read(8))
    if n > _LONGEST_STRING:
        raise struct.error("string too long")
    return fh.read(n).decode("utf-8", errors="replace")


def _skip(fh: BinaryIO, t: int) -> None:
    if t == _STRING:
        _str(fh)
    elif t == _ARRAY:
        at, n = struct.unpack("<IQ", fh.read(12))
        if at in _SCALARS:
            fh.seek(n * struct.calcsize("<" + _SCALARS[at]), 1)
        else:
            for _ in range(n):
                _skip(fh, at)
    else:
        fh.seek(struct.calcsize("<" + _SCALARS[t]), 1)


def _read(fh: BinaryIO, p: Path, with_tensors: bool) -> GGUFHeader:
    if fh.read(4) != b"GGUF":
        raise InputError(f"{p} is not a GGUF file", hint="give a .gguf file or a folder with config.json")
    (version,) = struct.unpack("<I", fh.read(4))
    if version < 2:
        raise InputError(f"{p}: GGUF version {version} is too old")
    if version > 3:  # a layout this reader does not know: its numbers would be read as garbage
        raise InputError(f"{p}: GGUF version {version} is newer than this reader knows (2, 3)", hint="is it damaged?")
    n_tensors, n_kv = struct.unpack("<QQ", fh.read(16))
    meta: dict = {}
    lengths: dict = {}
    for _ in range(n_kv):
        key = _str(fh)
        (t,) = struct.unpack("<I", fh.read(4))
        if t == _STRING:
            meta[key] = _str(fh)
        elif t == _ARRAY:
            pos = fh.tell()
            _, lengths[key] = struct.unpack("<IQ", fh.read(12))
            fh.seek(pos)
            _skip(fh, t)
        else:
            fmt = "<" + _SCALARS[t]
            meta[key] = struct.unpack(fmt, fh.read(struct.calcsize(fmt)))[0]
    tensors: dict = {}
    types: dict = {}
    for _ in range(n_tensors if with_tensors else 0):
        name = _str(fh)
        (n_dims,) = struct.unpack("<I", fh.read(4))
        dims = struct.unpack(f"<{n_dims}Q", fh.read(8 * n_dims))
        (types[name],) = struct.unpack("<I", fh.read(4))
        fh.read(8)  # offset
        tensors[name] = tuple(int(d) for d in dims)
    return GGUFHeader(p, version, meta, lengths, tensors, types)


def read_config_json(path: str | Path) -> tuple[Path, dict]:
    """A Hugging Face model's config.json (the folder or the file itself) as a dict, with a multimodal
    wrapper's text_config (the language model's) laid over the top level; and the file's path."""
    p = Path(path)
    cfg_path = check_regular(p / "config.json" if p.is_dir() else p, "model config")
    if cfg_path.stat().st_size > _CONFIG_MAX:
        raise InputError(f"{cfg_path} is {cfg_path.stat().st_size:,} bytes: not a model's config.json")
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read {cfg_path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{cfg_path} is not valid JSON: {exc}") from None
    except RecursionError:
        raise InputError(f"{cfg_path} nests too deeply to be a model's config", hint="is the file damaged?") from None
    if not isinstance(cfg, dict):
        raise InputError(f"{cfg_path} is not a JSON object")
    if isinstance(cfg.get("text_config"), dict):  # multimodal wrappers keep the language model here
        cfg = {**cfg, **cfg["text_config"]}
    return cfg_path, cfg


def positive_int(value, where: Path | str, key: str) -> int:
    """A header's count (layers, heads, sizes, context) as a whole number ≥ 1: an integer, or a float that is
    one; else one line naming the file and the key."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{where}: {key} is {value!r}, not a positive whole number", hint="is the file damaged?")
    return value


def head_size(hidden: int, heads: int, where: Path | str, key: str) -> int:
    """A head's width where the header does not state it (hidden / heads): at least 1, else one line (100,000
    heads over a hidden size of 576 made heads 0 wide and every count 0)."""
    if hidden // heads < 1:
        raise InputError(f"{where}: {key} is {heads}, more heads than the hidden size {hidden}", hint="is it damaged?")
    return hidden // heads


def flag(value, where: Path | str, key: str, default: bool = False) -> bool:
    """A true/false key (tie_word_embeddings, attention_bias): a JSON boolean or absent; the string "false"
    was read as true."""
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InputError(f"{where}: {key} is {value!r}, not true or false", hint="is the file damaged?")
    return value


def optional_positive_int(value, where: Path | str, key: str) -> int | None:
    """positive_int where the key may be absent (None) or 0 (GGUF writers leave some counts 0 for unknown)."""
    return None if value is None or (value == 0 and not isinstance(value, bool)) else positive_int(value, where, key)
