"""Whether a GGUF carries a chat template, and which of llama-server's built-in ones to offer.

llama-server formats a chat with the model's own template (``tokenizer.chat_template``); a file
without one falls back to ChatML, and a model trained on another format then answers with
ChatML's markers in its words (Gemma 3 270M showed raw ``<|im_end|> <|im_start|>``, #37). The
window says so and offers a built-in template, passed as ``--chat-template NAME``.

:func:`has_chat_template` reads only the header's key/value section, string by string with
bounds checks, and stops at the first key it needs: the full reader
(:mod:`gui.cluster.llama.model`) has already said the file is a GGUF by the time this is asked.
"""

from __future__ import annotations

import mmap
import os
import struct

#: The GGUF key of the Jinja chat template.
TEMPLATE_KEY = b"tokenizer.chat_template"
#: Fixed sizes of GGUF value types (8: string and 9: array are read their own way).
_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9
#: llama-server's built-in templates offered when a model has none (``llama-server --help`` lists
#: them all); the first is the default choice.
BUILT_IN = ("chatml", "gemma", "llama3", "llama2", "mistral-v7", "phi3", "phi4", "deepseek3", "granite",
            "falcon3", "zephyr", "vicuna")
#: The built-in template that fits an architecture (``general.architecture``) best.
_FOR_ARCH = {"gemma": "gemma", "gemma2": "gemma", "gemma3": "gemma", "gemma3n": "gemma", "llama": "llama3",
             "phi3": "phi3", "granite": "granite", "falcon": "falcon3", "deepseek2": "deepseek3"}
#: The option that passes a template to llama-server.
OPTION = "--chat-template"


class _Truncated(Exception):
    """The header ends inside a value."""


def has_chat_template(path: str | os.PathLike) -> bool | None:
    """True when the GGUF at ``path`` holds a non-empty ``tokenizer.chat_template``, False when
    it holds none, None when the header cannot be read (not a GGUF, cut short, unreadable)."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return _scan(buf)
    except (OSError, ValueError, _Truncated, struct.error):
        return None


def _scan(buf) -> bool | None:
    if buf[:4] != b"GGUF":
        return None
    version = struct.unpack_from("<I", buf, 4)[0]
    if version < 2:
        return None
    n_kv = struct.unpack_from("<Q", buf, 16)[0]
    pos = 24
    for _ in range(n_kv):
        key, pos = _string(buf, pos)
        vtype = struct.unpack_from("<I", buf, pos)[0]
        pos += 4
        if key == TEMPLATE_KEY:
            if vtype != _STRING:
                return False
            value, pos = _string(buf, pos)
            return bool(value.strip())
        pos = _skip(buf, pos, vtype)
    return False


def _string(buf, pos: int) -> tuple[bytes, int]:
    n = struct.unpack_from("<Q", buf, pos)[0]
    end = pos + 8 + n
    if end > len(buf):
        raise _Truncated
    return buf[pos + 8:end], end


def _skip(buf, pos: int, vtype: int) -> int:
    if vtype == _STRING:
        return pos + 8 + struct.unpack_from("<Q", buf, pos)[0]
    if vtype == _ARRAY:
        etype, count = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        if etype == _STRING:
            for _ in range(count):  # (a vocabulary: a quarter of a million short strings)
                pos += 8 + struct.unpack_from("<Q", buf, pos)[0]
            return pos
        if etype not in _SIZES:
            raise _Truncated
        return pos + count * _SIZES[etype]
    if vtype not in _SIZES:
        raise _Truncated
    return pos + _SIZES[vtype]


def suggested_template(architecture: str) -> str:
    """The built-in template to offer first for a model of ``architecture``."""
    return _FOR_ARCH.get(architecture, BUILT_IN[0])


def with_template(extra_args: tuple[str, ...], name: str | None) -> tuple[str, ...]:
    """``extra_args`` with ``--chat-template name`` in place of any given before (None: none)."""
    out: list[str] = []
    skip = False
    for arg in extra_args:
        if skip:
            skip = False
            continue
        if arg == OPTION:
            skip = True
            continue
        out.append(arg)
    return tuple(out + [OPTION, name]) if name else tuple(out)


def template_in(extra_args: tuple[str, ...]) -> str | None:
    """The ``--chat-template`` name in ``extra_args``, or None."""
    args = list(extra_args)
    for i, arg in enumerate(args[:-1]):
        if arg == OPTION:
            return args[i + 1]
    return None
