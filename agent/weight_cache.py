"""The RPC worker's weight cache (``ggml-rpc-server -c``): where it lives, how big it may grow.

With ``-c`` the worker keeps every weight tensor over llama.cpp's 10 MiB hash threshold that a
master sends it in a file named by the tensor's FNV-1a hash, and the next load of the same model
asks for the hash first (``SET_TENSOR_HASH``) instead of sending the bytes again. The worker
puts those files in ``$LLAMA_CACHE/rpc``. The agent chooses that folder so it outlives restarts
and upgrades of the agent and of the engine: the ``cache_dir`` setting, else a ``LLAMA_CACHE``
the agent itself was started with, else ``weights`` in the agent's platform data folder
(``platformdirs.user_data_dir("llama-herd")``) — not a cache folder the OS may clear.

The worker never deletes a file, so the agent caps the folder (:meth:`WeightCache.prune`): at
most ``cache_max_gib``, and never so much that the disk keeps less than :data:`DISK_RESERVE`
free. The files read least recently go first (last access or write, whichever is later).
"""

from __future__ import annotations

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
    """The worker's cache folder and its cap.

    Args:
        root: what the worker gets as ``LLAMA_CACHE`` (:func:`default_root`).
        max_bytes: the cap (0: no cap of its own; the disk reserve still holds).
    """

    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = Path(root)
        self.max_bytes = max(0, int(max_bytes))
        self._lock = threading.Lock()
        self._status: tuple[float, dict] | None = None

    @property
    def folder(self) -> Path:
        """Where the worker writes its files (``$LLAMA_CACHE/rpc``)."""
        return self.root / "rpc"

    def env(self, base: dict | None = None) -> dict:
        """The worker's environment: ``base`` (default: this process's) with ``LLAMA_CACHE``."""
        return dict(os.environ if base is None else base, LLAMA_CACHE=str(self.root))

    def _entries(self) -> list[tuple[float, int, Path]]:
        out = []
        try:
            with os.scandir(self.folder) as it:
                for e in it:
                    if not _is_entry(e.name) or not e.is_file(follow_symlinks=False):
                        continue
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    out.append((max(st.st_atime, st.st_mtime), st.st_size, Path(e.path)))
        except FileNotFoundError:
            pass
        return out

    def limit_bytes(self, used: int) -> int:
        """The cap now: ``max_bytes`` (if set), and no more than keeps :data:`DISK_RESERVE` of
        the disk free (counting what the cache holds as reclaimable)."""
        try:
            free = shutil.disk_usage(self.folder if self.folder.exists() else self.root.parent).free
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
        """For ``/status`` (``rpc.weight_cache``): folder, bytes and files held, the cap now."""
        now = time.monotonic()
        cached = self._status
        if cached is not None and now - cached[0] < STATUS_MAX_AGE:
            return cached[1]
        entries = self._entries()
        used = sum(size for _, size, _ in entries)
        out = {"dir": str(self.folder), "bytes": used, "files": len(entries),
               "max_bytes": self.max_bytes, "limit_bytes": self.limit_bytes(used)}
        self._status = (now, out)
        return out
