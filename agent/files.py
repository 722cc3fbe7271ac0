"""Files that must survive a crash: one way to write them, one way to read them.

* :func:`write_atomic` writes a temp file in the same folder, flushes it to disk (``fsync``) and
  renames it over the old file (``os.replace``), so a crash or power loss at any moment leaves
  either the previous good copy or the new one — never a half-written file. With ``mode=0o600``
  the temp file is owner-only *before* anything is written to it (tokens, pairing keys).
* :func:`read_or_set_aside` reads and parses a file; when it cannot be parsed, the file is
  renamed ``<name>.corrupt-<timestamp>`` (:func:`set_aside`) and :class:`CorruptFile` says so.
  A corrupt file is never silently replaced with defaults: the caller decides what to tell the
  user, and the bad copy stays on disk for them to inspect or repair.

Both the agent and the app use this module (``gui`` may import ``agent``, never the reverse).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class CorruptFile(ValueError):
    """A file could not be parsed and was moved aside.

    Attributes:
        path: where the file was.
        moved_to: where it is now (``<name>.corrupt-<timestamp>``).
        reason: what was wrong with it.
    """

    def __init__(self, path: Path, moved_to: Path, reason: str) -> None:
        super().__init__(f"{path} is unreadable ({reason}); moved it to {moved_to.name}")
        self.path = path
        self.moved_to = moved_to
        self.reason = reason


def write_atomic(path: str | os.PathLike, data: bytes | str, mode: int | None = None) -> Path:
    """Replace ``path`` with ``data`` atomically; returns the path.

    ``data`` as text is written UTF-8. ``mode`` (e.g. ``0o600``) is applied to the temp file
    before any byte is written; None keeps what ``mkstemp`` gives (owner-only). The folder is
    created if needed. On any error the temp file is removed and the old file is untouched.
    """
    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if mode is not None:
            os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)
    return path


def write_json_atomic(path: str | os.PathLike, data, mode: int | None = None, *, indent: int = 2) -> Path:
    """:func:`write_atomic` of ``data`` as JSON text."""
    return write_atomic(path, json.dumps(data, indent=indent, ensure_ascii=False) + "\n", mode)


def _fsync_dir(folder: Path) -> None:
    # The rename itself lives in the folder's entry table: flush it too so that after a power
    # loss the new name is there (POSIX; Windows cannot open a folder this way).
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def set_aside(path: str | os.PathLike) -> Path:
    """Rename ``path`` to ``<name>.corrupt-<timestamp>`` (never overwriting an earlier one)."""
    path = Path(path)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    dest = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while dest.exists():
        dest = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
        n += 1
    os.replace(path, dest)
    return dest


def read_or_set_aside(path: str | os.PathLike, parse: Callable[[bytes], T], *,
                      missing: Callable[[], T] | None = None) -> T:
    """``parse(contents)`` of ``path``.

    A missing file returns ``missing()`` (or raises FileNotFoundError when ``missing`` is None).
    When ``parse`` raises ValueError, KeyError, TypeError or AttributeError (JSON and TOML
    errors are ValueErrors; so is a wrong schema), the file is set aside and
    :class:`CorruptFile` raised. Other OSErrors (permissions, a disk error) propagate unchanged:
    the file may be fine, so it stays where it is.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if missing is None:
            raise
        return missing()
    try:
        return parse(raw)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        moved = set_aside(path)
        raise CorruptFile(path, moved, str(exc) or type(exc).__name__) from exc


def parse_json_object(raw: bytes) -> dict:
    """UTF-8 JSON whose top level is an object (a common ``parse`` for :func:`read_or_set_aside`)."""
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError("the top level is not a JSON object")
    return data
