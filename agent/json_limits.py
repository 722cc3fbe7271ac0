"""JSON read with a depth limit: deep nesting is refused in words, before the parser recurses.

Python's ``json`` parser recurses once per ``[`` or ``{``: a 40 KB body of nested arrays ends in
a ``RecursionError`` (a 500 and a traceback in the agent's log, a traceback from ``herd up``,
#32). No document herd reads nests deeper than a few levels, so :func:`loads` counts the depth
first — with a flat scan that skips strings — and refuses anything deeper than
:data:`MAX_JSON_DEPTH`. The agent's API and the profile reader both read JSON through it.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: The deepest nesting accepted; herd's own documents stay under 8.
MAX_JSON_DEPTH = 32

# the characters that matter to nesting: brackets, and the quotes and backslashes of strings
_SPECIAL = re.compile(r'[\[\]{}"\\]')


class JsonTooDeep(ValueError):
    """A JSON document nested deeper than allowed."""


def json_depth(text: str | bytes, stop_at: int | None = None) -> int:
    """How deep ``text``'s arrays and objects nest (0 for a plain value); brackets inside strings
    do not count. Linear time, constant stack whatever the input; with ``stop_at`` it returns as
    soon as the depth passes it."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    depth = deepest = 0
    in_string = escaped = False
    last = -2
    for m in _SPECIAL.finditer(text):
        c, at = m.group(), m.start()
        if in_string:
            if escaped and at == last + 1:  # the character after a backslash is taken as it is
                escaped = False
            elif c == "\\":
                escaped, last = True, at
            elif c == '"':
                in_string = escaped = False
            continue
        if c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop_at is not None and deepest > stop_at:
                    return deepest
        elif c in "]}":
            depth -= 1
    return deepest


def loads(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads(text)`` unless it nests deeper than ``max_depth``.

    Raises:
        JsonTooDeep: nested deeper than ``max_depth`` (the message says how deep is allowed).
        ValueError: not valid JSON (``json.JSONDecodeError``), or bytes that are not UTF-8.
    """
    if json_depth(text, stop_at=max_depth) > max_depth:
        raise JsonTooDeep(f"JSON nested deeper than {max_depth} levels")
    return json.loads(text)
