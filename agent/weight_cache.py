"""The RPC worker's weight cache (``ggml-rpc-server -c``): where it lives, how big it may grow.

With ``-c`` the worker keeps every weight tensor over llama.cpp's 10 MiB hash threshold that a
master sends it in a file named by the tensor's FNV-1a hash, and the next load of the same model
asks for the hash first (``SET_TENSOR_HASH``) instead of sending the bytes again. The worker
puts those files in ``$LLAMA_CACHE/rpc``. The agent chooses that folder so it outlives restarts
and upgrades of the agent and of the engine: the ``cache_dir`` setting, else a ``LLAMA_CACHE``
the agent itself was started with, else ``weights`` in the agent's platform data folder
(``platformdirs.user_data_dir("llama-herd")``) — not a cache folder the OS may clear.

Each master has a folder of its own (``masters/<first 16 hex digits of its key
fingerprint>/rpc`` below the root): the worker is started with that master's folder as its
``LLAMA_CACHE``. A master therefore cannot learn from ``SET_TENSOR_HASH`` answers which tensors
another master loaded, and cannot plant a file under another master's tensor hash (FNV-1a is
not collision-resistant: with one shared folder a crafted tensor could stand in for another
master's weights). Unpairing a master removes its folder (:meth:`WeightCache.forget`).

The worker never deletes a file, so the agent caps the whole cache, every master's folder
together (:meth:`WeightCache.prune`): at most ``cache_max_gib``, and never so much that the
disk keeps less than :data:`DISK_RESERVE` free. The files read least recently go first (last
access or write, whichever is later), whichever master they belong to.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
from pathlib import Path

import platformdirs

log = logging.getLogger("herd.agent.cache")

GiB = 1 << 30
#: Free disk space the cache never eats into.
DISK_RESERVE = 2 * GiB
#: Seconds a size reading is reused by :meth:`WeightCache.status` (a status poll is frequent).
STATUS_MAX_AGE = 5.0
#: Cache files are named by a 64-bit hash in hex (``%016x``); nothing else in the folder is ours.
_NAME_LEN = 16
#: The masters' folders are named by this many hex digits of their key's SHA-256 fingerprint.
MASTER_DIGITS = 16


def default_root(configured: str = "", environ: dict | None = None) -> Path:
    """The folder handed to the worker as ``LLAMA_CACHE`` (the files go into ``rpc/`` below)."""
    env = os.environ if environ is None else environ
    if configured:
        return Path(configured).expanduser()
    if env.get("LLAMA_CACHE"):
        return Path(env["LLAMA_CACHE"])
    return Path(platformdirs.user_data_dir("llama-herd", appauthor=False)) / "weights"


def _is_entry(name: str) -> bool:
    return len(name) == _NAME_LEN and all(c in "0123456789abcdef" for c in name)


class WeightCache:
    """The worker's cache folders (one per master) and their common cap.

    Args:
        root: the cache's root (:func:`default_root`); with no master the worker gets it as
            ``LLAMA_CACHE`` itself.
        max_bytes: the cap (0: no cap of its own; the disk reserve still holds).

    Attributes:
        master: the fingerprint of the master whose folder the worker uses now (None: the
            root's own ``rpc/``, for a worker started without a master).
    """

    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = Path(root)
        self.max_bytes = max(0, int(max_bytes))
        self.master: str | None = None
        self._lock = threading.Lock()
        self._status: tuple[float, dict] | None = None

    def master_root(self, fingerprint: str | None) -> Path:
        """What the worker gets as ``LLAMA_CACHE`` when it serves the master with this key
        fingerprint (hex SHA-256; None: the root itself)."""
        if fingerprint is None:
            return self.root
        digits = fingerprint.replace(":", "").lower()[:MASTER_DIGITS]
        if len(digits) != MASTER_DIGITS or not all(c in "0123456789abcdef" for c in digits):
            raise ValueError(f"not a key fingerprint: {fingerprint!r}")
        return self.root / "masters" / digits

    @property
    def folder(self) -> Path:
        """Where the worker writes its files now (``$LLAMA_CACHE/rpc`` of :attr:`master`)."""
        return self.master_root(self.master) / "rpc"

    def env(self, base: dict | None = None, master: str | None = None) -> dict:
        """The worker's environment for ``master`` (a key fingerprint, or None): ``base``
        (default: this process's) with ``LLAMA_CACHE`` set to that master's folder."""
        return dict(os.environ if base is None else base, LLAMA_CACHE=str(self.master_root(master)))

    def use_for(self, master: str | None) -> None:
        """The worker now serves ``master``: its files go to that master's folder."""
        self.master = master
        self._status = None

    def changed(self) -> None:
        """The worker may have written files (a load ended): the next status reads the disk."""
        self._status = None

    def forget(self, fingerprint: str) -> int:
        """Remove the folder of the master with this fingerprint (it was unpaired); returns
        the bytes freed."""
        folder = self.master_root(fingerprint) / "rpc"
        with self._lock:
            freed = 0
            for _when, size, path in self._entries_in(folder):
                try:
                    path.unlink()
                    freed += size
                except OSError as exc:
                    log.warning("could not remove cache file %s: %s", path, exc)
            for empty in (folder, folder.parent):
                with contextlib.suppress(OSError):
                    empty.rmdir()
            self._status = None
        if freed:
            log.info("weight cache: removed %.1f MiB of an unpaired master", freed / (1 << 20))
        return freed

    def _folders(self) -> list[Path]:
        """Every folder that holds cache files: the root's own and each master's."""
        out = [self.root / "rpc"]
        try:
            with os.scandir(self.root / "masters") as it:
                out.extend(Path(e.path) / "rpc" for e in it
                           if len(e.name) == MASTER_DIGITS and e.is_dir(follow_symlinks=False))
        except (FileNotFoundError, NotADirectoryError):
            pass
        return out

    @staticmethod
    def _entries_in(folder: Path) -> list[tuple[float, int, Path]]:
        out = []
        try:
            with os.scandir(folder) as it:
                for e in it:
                    if not _is_entry(e.name) or not e.is_file(follow_symlinks=False):
                        continue
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    out.append((max(st.st_atime, st.st_mtime), st.st_size, Path(e.path)))
        except (FileNotFoundError, NotADirectoryError):
            pass
        return out

    def _entries(self) -> list[tuple[float, int, Path]]:
        """The files of every folder (the cap is for all of them together)."""
        return [entry for folder in self._folders() for entry in self._entries_in(folder)]

    def limit_bytes(self, used: int) -> int:
        """The cap now: ``max_bytes`` (if set), and no more than keeps :data:`DISK_RESERVE` of
        the disk free (counting what the cache holds as reclaimable)."""
        try:
            where = next((p for p in (self.folder, self.root, self.root.parent) if p.exists()), self.root.parent)
            free = shutil.disk_usage(where).free
        except OSError:
            free = 0
        room = max(0, used + free - DISK_RESERVE)
        return min(room, self.max_bytes) if self.max_bytes else room

    def prune(self) -> int:
        """Delete the least recently used files until the cache is within its cap; returns the
        bytes freed. Safe to call at any time (a file the worker is writing is the newest)."""
        with self._lock:
            entries = sorted(self._entries())
            used = sum(size for _, size, _ in entries)
            limit = self.limit_bytes(used)
            freed = 0
            for _when, size, path in entries:
                if used - freed <= limit:
                    break
                try:
                    path.unlink()
                    freed += size
                except OSError as exc:
                    log.warning("could not remove cache file %s: %s", path, exc)
            if freed:
                log.info("weight cache: removed %.1f MiB (cap %.1f GiB)", freed / (1 << 20), limit / GiB)
            self._status = None
            return freed

    def status(self) -> dict:
        """For ``/status`` (``rpc.weight_cache``): the folder in use, the bytes and files held by
        all masters together and by the one in use (``master_bytes``), the cap now."""
        now = time.monotonic()
        cached = self._status
        if cached is not None and now - cached[0] < STATUS_MAX_AGE:
            return cached[1]
        entries = self._entries()
        used = sum(size for _, size, _ in entries)
        mine = sum(size for _, size, _ in self._entries_in(self.folder))
        out = {"dir": str(self.folder), "bytes": used, "files": len(entries), "master_bytes": mine,
               "max_bytes": self.max_bytes, "limit_bytes": self.limit_bytes(used)}
        self._status = (now, out)
        return out
