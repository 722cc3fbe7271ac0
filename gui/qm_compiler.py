"""Compiling the Qt Linguist ``.ts`` catalogues into ``.qm`` files, and knowing when a ``.qm`` is
current. No Qt import: the wheel's build step (``setup.py``) uses it as well as the app.

A ``.qm`` is current when the stamp beside it (``herd_zh_CN.qm.ts-sha256``) holds the SHA-256 of
the ``.ts`` it was compiled from. A hash, not the files' times: ``pip install`` writes a wheel's
files in its own order with the install time, so a ``.qm`` shipped in the wheel can look older
than its ``.ts`` (#37).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

log = logging.getLogger(__name__)

#: What the stamp beside a ``.qm`` is called after the ``.qm``'s own name.
STAMP_SUFFIX = ".ts-sha256"


def lrelease_tool() -> str | None:
    """The path of Qt's ``lrelease``, or None when there is none.

    PySide6-Essentials ships ``lrelease`` in its package folder, which is looked at first: the
    ``pyside6-lrelease`` wrapper is on ``PATH`` only in an activated venv, not when the app is
    started by its full path, from a desktop shortcut or through pipx (#37)."""
    exe = ".exe" if os.name == "nt" else ""
    candidates = []
    spec = importlib.util.find_spec("PySide6")  # finds the package without loading Qt
    if spec is not None and spec.origin:
        candidates.append(Path(spec.origin).parent / f"lrelease{exe}")
    candidates.append(Path(sys.executable).parent / f"pyside6-lrelease{exe}")
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return shutil.which("pyside6-lrelease") or shutil.which("lrelease")


def stamp_of(qm: Path) -> Path:
    """The file beside ``qm`` that names the ``.ts`` it was compiled from, by hash."""
    return qm.with_name(qm.name + STAMP_SUFFIX)


def source_hash(ts: Path) -> str:
    """The SHA-256 of a ``.ts`` file, as hex."""
    return hashlib.sha256(ts.read_bytes()).hexdigest()


def is_current(qm: Path, ts: Path) -> bool:
    """Whether ``qm`` exists and was compiled from ``ts`` as it is now."""
    try:
        return qm.is_file() and stamp_of(qm).read_text(encoding="ascii").strip() == source_hash(ts)
    except (OSError, UnicodeDecodeError):
        return False


def compile_qm(ts: Path, qm: Path, tool: str | None = None) -> bool:
    """Compile ``ts`` into ``qm`` and stamp it; False (and a warning logged) when that fails.

    Both files are written under temporary names and renamed into place, the ``.qm`` last, so a
    reader never loads a half-written ``.qm`` and never takes an old one for current."""
    tool = tool or lrelease_tool()
    if tool is None:
        log.warning("cannot compile %s: Qt's lrelease was not found (it comes with PySide6-Essentials)",
                    ts.name)
        return False
    try:
        qm.parent.mkdir(parents=True, exist_ok=True)
        tmp = qm.with_name(qm.name + ".tmp")
        r = subprocess.run([tool, str(ts), "-qm", str(tmp)], capture_output=True, text=True, timeout=60)
        if r.returncode != 0 or not tmp.is_file():
            log.warning("lrelease failed for %s: %s", ts.name, (r.stderr or r.stdout).strip())
            return False
        stamp = stamp_of(qm)
        stamp.unlink(missing_ok=True)  # while the .qm is replaced, it is not current
        tmp.replace(qm)
        stamp_tmp = stamp.with_name(stamp.name + ".tmp")
        stamp_tmp.write_text(source_hash(ts) + "\n", encoding="ascii")
        stamp_tmp.replace(stamp)
        return True
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("cannot compile %s: %s", ts.name, exc)
        return False


def compile_folder(source: Path, target: Path, tool: str | None = None) -> list[Path]:
    """Compile every ``.ts`` of ``source`` into a stamped ``.qm`` in ``target``; the ``.qm`` files
    written. The build step of the wheel calls it."""
    return [qm for ts in sorted(source.glob("*.ts"))
            if compile_qm(ts, qm := target / ts.with_suffix(".qm").name, tool)]
