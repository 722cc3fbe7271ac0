"""The keys that let other devices of the home use the cluster's endpoint, one per device (#34).

A key is a random token (32 bytes, URL-safe text after ``herd-``) that the user gives to one app:
``phone``, ``open-webui``, ``laptop-script``. The master keeps only its SHA-256, under the name,
in ``api-keys.json`` in herd's config folder, written atomically and readable by the user only
(0600)::

    {"version": 1, "keys": {"phone": {"sha256": "…", "created": 1733300000.0}}}

The token itself is shown once, when it is made (``herd keys add NAME``); a lost key is revoked
and a new one made. A running front door (:mod:`gui.cluster.serving.front_door`) asks
:meth:`ApiKeyStore.match` on every request, which re-reads the file when it changed on disk, so a
key added or revoked by another process (the CLI while ``herd up`` serves) counts at once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from agent.i18n import translate
from gui.cluster.nodes.records import config_dir, write_private_json

KEYS_FILE = "api-keys.json"
KEYS_VERSION = 1
#: What every key starts with, so a user (or a secret scanner) can tell what it is.
KEY_PREFIX = "herd-"
#: A key's name: what the user calls the device or app. Letters, digits, ``.``, ``_``, ``-``.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")


class ApiKeyError(ValueError):
    """A key operation that cannot be done; the message says why in words (translated)."""


@dataclass(frozen=True)
class KeyInfo:
    """One stored key, without its secret.

    Attributes:
        name: what the user called it.
        created: when it was made (seconds since the epoch).
    """

    name: str
    created: float


def check_name(name: str) -> str:
    """``name`` if it can name a key, else :class:`ApiKeyError` saying what a name may hold."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ApiKeyError(translate(
            "Keys", "\"{name}\" cannot name a key: use 1 to 40 letters, digits, dots, dashes or underscores, "
                    "starting with a letter or digit (e.g. phone, open-webui)").format(name=name))
    return name


def hash_key(key: str) -> str:
    """The SHA-256 (hex) of a key's text: what the file holds."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class ApiKeyStore:
    """Named keys stored as hashes in a file only the user can read (module docstring).

    Safe to use from several threads; other processes may change the file at any time (each
    change replaces the whole file atomically, so a reader sees the old or the new one).

    Attributes:
        path: the key file.
    """

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path else config_dir() / KEYS_FILE
        self._lock = threading.Lock()
        self._seen: tuple | None = None  # (inode, size, mtime_ns) of the file last read
        self._hashes: dict[str, str] = {}  # name → sha256 as last read

    # --- reading ------------------------------------------------------------------------------

    def _load(self) -> dict[str, dict]:
        """{name: {"sha256", "created"}} from the file (empty when it does not exist yet)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(text)
            keys = data.get("keys") if isinstance(data, dict) else None
            if not isinstance(keys, dict) or data.get("version") != KEYS_VERSION:
                raise ValueError("no keys of a known version")
        except ValueError as exc:
            raise ApiKeyError(translate("Keys", "{path} is not a llama-herd key file ({why}); move it away "
                                              "and add the keys again").format(path=self.path, why=exc)) from None
        return {k: v for k, v in keys.items()
                if isinstance(k, str) and isinstance(v, dict) and isinstance(v.get("sha256"), str)}

    def list(self) -> list[KeyInfo]:
        """The stored keys by name (their secrets are not stored, so not shown)."""
        return [KeyInfo(name, float(entry.get("created") or 0.0)) for name, entry in sorted(self._load().items())]

    def _fresh_hashes(self) -> dict[str, str]:
        """{name: sha256}, re-read when the file's identity, size or time changed since the last
        read (an atomic replace gives it a new inode, so even a same-second edit is seen)."""
        try:
            st = os.stat(self.path)
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if stamp != self._seen or stamp is None:
                self._hashes = {name: e["sha256"] for name, e in self._load().items()}
                self._seen = stamp
            return self._hashes

    def match(self, key: str) -> str | None:
        """The name of the stored key whose text is ``key``, or None. Every stored hash is
        compared in constant time, so the answer's timing says nothing about how close a guess
        was. An unreadable file matches nothing (and raises :class:`ApiKeyError` to say why)."""
        wanted = hash_key(key)
        found = None
        for name, digest in self._fresh_hashes().items():
            if hmac.compare_digest(wanted, digest):
                found = name
        return found

    # --- changing -----------------------------------------------------------------------------

    def add(self, name: str) -> str:
        """Make a key called ``name`` and return its text (shown once; only its hash is kept).
        A name already in use is refused: revoke the old key first."""
        check_name(name)
        keys = self._load()
        if name in keys:
            raise ApiKeyError(translate("Keys", "a key called {name} exists already; revoke it first "
                                              "(herd keys revoke {name}) or choose another name").format(name=name))
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        keys[name] = {"sha256": hash_key(key), "created": time.time()}
        self._write(keys)
        return key

    def revoke(self, name: str) -> bool:
        """Forget the key called ``name``; True if there was one."""
        keys = self._load()
        if keys.pop(name, None) is None:
            return False
        self._write(keys)
        return True

    def _write(self, keys: dict) -> None:
        write_private_json(self.path, {"version": KEYS_VERSION, "keys": keys})
