"""What the master knows about worker nodes: the :class:`Node` record discovery keeps, and the
pairing tokens it has earned, stored per node id.

Tokens are bearer secrets that let this master start and stop a node's RPC worker, so the file
that holds them is written atomically (temp file + ``os.replace``) with owner-only permissions.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import platformdirs

from agent.files import CorruptFile, parse_json_object, read_or_set_aside, write_json_atomic

log = logging.getLogger(__name__)

APP_NAME = "llama-herd"
TOKENS_FILE = "tokens.json"
TOKENS_VERSION = 1
ADDRESSES_FILE = "nodes.json"
#: Overrides the config folder (tests, portable installs).
CONFIG_ENV = "HERD_CONFIG_DIR"


def config_dir() -> Path:
    """The master's per-user config folder (``$HERD_CONFIG_DIR`` if set)."""
    if os.environ.get(CONFIG_ENV):
        return Path(os.environ[CONFIG_ENV])
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def write_private_json(path: Path, data) -> None:
    """Write ``data`` as JSON to ``path`` atomically (temp file + replace), owner-only (0600)."""
    write_json_atomic(path, data, 0o600)


@dataclass(frozen=True)
class Node:
    """One worker node as the master sees it. Identity is ``id`` (the agent's UUID), never
    the address: a node that changes address (DHCP) is the same node.

    Attributes:
        id: the agent's stable UUID.
        name: its friendly name.
        host: the address the master uses to reach it.
        api_port: its control API port.
        rpc_port: the RPC port ``llama-server --rpc`` connects to (0 if unknown).
        echo_port: its UDP echo port for round-trip timing (0 if unknown).
        state: its RPC worker's state (``stopped``, ``ready``, ``busy``…).
        version: agent version.
        proto: llama.cpp RPC protocol version it runs.
        engine: llama.cpp build number it runs (text; empty if unknown).
        fingerprint: fingerprint of its pairing key.
        addresses: every address it advertised.
        via_mdns: currently seen through mDNS.
        manual: added by address by the user.
        reachable: answered the last pings.
        paired: this master holds a token for it.
        impostor: when set, an address claimed to be this paired node over mDNS but failed the
            identity proof (see :meth:`agent.client.AgentClient.prove_identity`); the message
            names it. The node's token is never sent there.
        last_seen: ``time.monotonic()`` of the last sign of life.
    """

    id: str
    name: str
    host: str
    api_port: int
    rpc_port: int = 0
    echo_port: int = 0
    state: str = ""
    version: str = ""
    proto: str = ""
    engine: str = ""
    fingerprint: str = ""
    addresses: tuple[str, ...] = field(default_factory=tuple)
    via_mdns: bool = False
    manual: bool = False
    reachable: bool = True
    paired: bool = False
    impostor: str = ""
    last_seen: float = field(default_factory=time.monotonic)

    @property
    def api_url(self) -> str:
        """``http://host:port`` of its control API."""
        return f"http://{_bracket(self.host)}:{self.api_port}"

    @property
    def rpc_endpoint(self) -> str:
        """``host:port`` for ``llama-server --rpc``."""
        return f"{_bracket(self.host)}:{self.rpc_port}"

    def with_(self, **changes) -> "Node":
        """A copy with ``changes`` applied."""
        return replace(self, **changes)

    def to_json(self) -> dict:
        """A JSON-ready dict (what ``herd nodes --json`` prints)."""
        return {"id": self.id, "name": self.name, "host": self.host, "api_port": self.api_port,
                "rpc_port": self.rpc_port, "echo_port": self.echo_port, "state": self.state,
                "version": self.version, "proto": self.proto, "engine": self.engine,
                "fingerprint": self.fingerprint, "addresses": list(self.addresses),
                "via_mdns": self.via_mdns, "manual": self.manual, "reachable": self.reachable,
                "paired": self.paired, "impostor": self.impostor, "api_url": self.api_url}


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class TokenStore:
    """Pairing tokens per node id, in a JSON file only the user can read.

    The file is ``{"version": 1, "tokens": {node_id: {"token": ..., "fingerprint": ...,
    "name": ..., "paired_at": ...}}}``. A missing file is an empty store; an unreadable one
    raises ValueError naming the file rather than silently forgetting every pairing.
    """

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path else config_dir() / TOKENS_FILE

    def _load(self) -> dict:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(text)
            tokens = data["tokens"]
            if data.get("version") != TOKENS_VERSION or not isinstance(tokens, dict):
                raise ValueError(f"unknown version {data.get('version')!r}")
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{self.path}: not a llama-herd token file ({exc})") from None
        return tokens

    def get(self, node_id: str) -> str | None:
        """The token for ``node_id``, or None."""
        entry = self._load().get(node_id)
        return entry.get("token") if isinstance(entry, dict) else None

    def all(self) -> dict[str, str]:
        """{node_id: token}."""
        return {k: v["token"] for k, v in self._load().items() if isinstance(v, dict) and "token" in v}

    def names(self) -> dict[str, str]:
        """{node_id: name} of the paired nodes, the name as it was at pairing ("" if unknown)."""
        return {k: str(v.get("name") or "") for k, v in self._load().items() if isinstance(v, dict) and "token" in v}

    def put(self, node_id: str, token: str, *, fingerprint: str = "", name: str = "") -> None:
        """Store (or replace) the token of ``node_id``."""
        tokens = self._load()
        tokens[node_id] = {"token": token, "fingerprint": fingerprint, "name": name,
                           "paired_at": time.time()}
        self._write(tokens)

    def forget(self, node_id: str) -> None:
        """Drop the token of ``node_id`` (no error if there is none)."""
        tokens = self._load()
        if tokens.pop(node_id, None) is not None:
            self._write(tokens)

    def _write(self, tokens: dict) -> None:
        write_private_json(self.path, {"version": TOKENS_VERSION, "tokens": tokens})


class KnownAddresses:
    """Agent addresses the user added by hand (``herd nodes --add``, ``herd pair``), so later
    commands find those nodes without mDNS. A JSON list in the config folder."""

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path else config_dir() / ADDRESSES_FILE

    def load(self) -> list[str]:
        """The remembered addresses (empty if there are none yet).

        A file that is not a JSON object is set aside (``nodes.json.corrupt-<timestamp>``) and
        :class:`~agent.files.CorruptFile` raised once, so the next :meth:`add` cannot silently
        overwrite what the user had; the caller reports it.
        """
        data = read_or_set_aside(self.path, parse_json_object, missing=dict)
        addresses = data.get("addresses", [])
        return [a for a in addresses if isinstance(a, str)] if isinstance(addresses, list) else []

    def add(self, address: str) -> None:
        """Remember ``address`` (no duplicate)."""
        try:
            known = self.load()
        except CorruptFile as exc:  # set aside by load(): start a new list, the old one is kept
            log.warning("%s", exc)
            known = []
        if address not in known:
            write_private_json(self.path, {"version": 1, "addresses": known + [address]})
