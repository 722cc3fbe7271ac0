"""What the master knows about worker nodes: the :class:`Node` record discovery keeps (and how
an agent's ``/info`` or ``/status`` reads as one), the certificates pinned when each node was paired (per node id), and the master's own identity.

A pinned certificate is public, but the file decides which key this master trusts for a node,
so it is written atomically (temp file + ``os.replace``) with owner-only permissions. The
master's private key (:func:`master_identity`) is owner-only too.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import platformdirs

from agent.client import AgentError
from agent.files import CorruptFile, parse_json_object, read_or_set_aside, write_json_atomic

log = logging.getLogger(__name__)

APP_NAME = "llama-herd"
#: Pairings before PAKE and pinned keys (bearer tokens); read only to tell the user to re-pair.
LEGACY_TOKENS_FILE = "tokens.json"
PAIRINGS_FILE = "pairings.json"
PAIRINGS_VERSION = 2
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
        state: its RPC worker's state (``stopped``, ``ready``, ``busy``…) when a paired node's
            authenticated API was last asked (discovery); empty for an unpaired node, which
            tells strangers nothing of it (#25). The live state is in the telemetry's status.
        version: agent version.
        proto: llama.cpp RPC protocol version it runs.
        engine: llama.cpp build number it runs (text; empty if unknown).
        fingerprint: fingerprint of its pairing key.
        addresses: every address it advertised.
        via_mdns: currently seen through mDNS.
        manual: added by address by the user.
        reachable: answered the last pings.
        paired: this master pinned its key at pairing.
        impostor: when set, an address claimed to be this paired node over mDNS but answered
            with another key than the pinned one; the message names it. The master never moves
            the node there.
        key: the fingerprint of the pinned key (paired nodes; what the card shows).
        repair: set when the node was paired by an older version (bearer token) and must be
            paired again.
        wakeable: this master keeps the node's MAC address with its pairing, so it can wake it
            by Wake-on-LAN when it sleeps (#36).
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
    key: str = ""
    repair: bool = False
    wakeable: bool = False
    last_seen: float = field(default_factory=time.monotonic)

    @property
    def api_url(self) -> str:
        """``https://host:port`` of its control API."""
        return f"https://{bracket_host(self.host)}:{self.api_port}"

    @property
    def rpc_endpoint(self) -> str:
        """``host:port`` for ``llama-server --rpc``."""
        return f"{bracket_host(self.host)}:{self.rpc_port}"

    def with_(self, **changes) -> "Node":
        """A copy with ``changes`` applied."""
        return replace(self, **changes)

    @property
    def usable(self) -> bool:
        """Whether a launch can use this node now: it answers and is paired with this master."""
        return self.reachable and self.paired

    def to_json(self) -> dict:
        """A JSON-ready dict (what ``herd nodes --json`` prints)."""
        return {"id": self.id, "name": self.name, "host": self.host, "api_port": self.api_port,
                "rpc_port": self.rpc_port, "echo_port": self.echo_port, "state": self.state,
                "version": self.version, "proto": self.proto, "engine": self.engine,
                "fingerprint": self.fingerprint, "addresses": list(self.addresses),
                "via_mdns": self.via_mdns, "manual": self.manual, "reachable": self.reachable,
                "paired": self.paired, "impostor": self.impostor, "key": self.key,
                "repair": self.repair, "api_url": self.api_url}


def node_from_info(info: dict, host: str, api_port: int) -> Node:
    """A :class:`Node` from an agent's ``/api/v1/info`` reply (for nodes added by address)."""
    nid = info.get("id")
    if not isinstance(nid, str) or not nid:
        raise AgentError(f"{host}:{api_port} answered /info without an id: is it a herd agent?")
    ports = info.get("ports") if isinstance(info.get("ports"), dict) else {}

    def port(*candidates) -> int:
        for c in candidates:
            if isinstance(c, int) and not isinstance(c, bool) and 0 < c < 65536:
                return c
        return 0

    def text(*candidates) -> str:
        for c in candidates:
            if isinstance(c, (str, int)) and not isinstance(c, bool) and str(c):
                return str(c)
        return ""

    engine = info.get("engine") if isinstance(info.get("engine"), dict) else {}
    return Node(
        id=nid, name=text(info.get("name"), host), host=host, api_port=api_port,
        rpc_port=port(ports.get("rpc")),
        echo_port=port(ports.get("echo")),
        version=text(info.get("version")),
        proto=text(engine.get("proto")),
        engine=text(engine.get("build")),
        addresses=(host,), manual=True,
    )


def node_from_status(status: dict, host: str, api_port: int, key: str) -> Node:
    """A paired node as its own authenticated ``/status`` describes it (``key``: the pinned
    key's fingerprint, whose start is the node's ``fingerprint``)."""
    ports = status.get("ports") if isinstance(status.get("ports"), dict) else {}
    rpc = status.get("rpc") if isinstance(status.get("rpc"), dict) else {}
    engine = status.get("engine") if isinstance(status.get("engine"), dict) else {}

    def port(v) -> int:
        return v if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 65536 else 0

    def text(v) -> str:
        return str(v) if isinstance(v, (str, int)) and not isinstance(v, bool) else ""

    return Node(id=text(status.get("id")), name=text(status.get("name")) or host, host=host,
                api_port=api_port, rpc_port=port(ports.get("rpc")) or port(rpc.get("port")),
                echo_port=port(ports.get("echo")), state=text(rpc.get("state")),
                version=text(status.get("version")), proto=text(engine.get("proto")),
                engine=text(engine.get("build")), fingerprint=key[:16], addresses=(host,))



def usable_nodes(nodes) -> list[Node]:
    """The nodes a launch can use (:attr:`Node.usable`), in a stable order: by name, then id."""
    return sorted((n for n in nodes if n.usable), key=lambda n: (n.name, n.id))


def bracket_host(host: str) -> str:
    """``host`` as it stands in a URL or ``host:port``: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def master_identity(folder: Path | None = None):
    """This master's key and certificate (:mod:`agent.identity`), created on first use."""
    import socket  # noqa: PLC0415

    from agent.identity import load_or_create  # noqa: PLC0415
    return load_or_create(Path(folder) if folder else config_dir(), "master",
                          f"llama-herd master {socket.gethostname()}")


class PairingStore:
    """The agent certificates this master pinned, per node id, in a JSON file only the user can
    read: ``{"version": 2, "nodes": {node_id: {"cert", "fingerprint", "name", "paired_at"}}}``,
    and, once the node reported it, ``"wake": {"mac", "broadcast"}`` (:meth:`set_wake`).

    A missing file is an empty store; an unreadable one raises ValueError naming the file rather
    than silently forgetting every pairing. A version-1 file (bearer tokens) holds nothing that
    can be upgraded: its nodes are listed by :meth:`legacy` so they can be shown as "pair again",
    and the next pairing replaces the file.
    """

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path else config_dir() / PAIRINGS_FILE
        self._legacy_path = self.path if path else config_dir() / LEGACY_TOKENS_FILE

    def _read(self, path: Path) -> dict | None:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            raise ValueError(f"{path}: not a llama-herd pairing file ({exc})") from None
        return data

    def _load(self) -> dict:
        data = self._read(self.path)
        if data is None or data.get("version") == 1:
            return {}
        nodes = data.get("nodes")
        if data.get("version") != PAIRINGS_VERSION or not isinstance(nodes, dict):
            raise ValueError(f"{self.path}: not a llama-herd pairing file (unknown version "
                             f"{data.get('version')!r})")
        return {k: v for k, v in nodes.items() if isinstance(v, dict) and isinstance(v.get("cert"), str)}

    def legacy(self) -> dict[str, str]:
        """{node_id: name} of nodes paired by an older version (bearer tokens): pair them again."""
        try:
            data = self._read(self._legacy_path)
        except ValueError:
            return {}
        if not data or data.get("version") != 1 or not isinstance(data.get("tokens"), dict):
            return {}
        current = self._load()
        return {k: str(v.get("name") or "") for k, v in data["tokens"].items()
                if isinstance(v, dict) and k not in current}

    def get(self, node_id: str) -> str | None:
        """The pinned certificate (PEM) of ``node_id``, or None."""
        entry = self._load().get(node_id)
        return entry.get("cert") if entry else None

    def fingerprint(self, node_id: str) -> str:
        """The pinned key's fingerprint of ``node_id`` ("" if unpaired)."""
        entry = self._load().get(node_id)
        return str(entry.get("fingerprint") or "") if entry else ""

    def all(self) -> dict[str, str]:
        """{node_id: pinned certificate}."""
        return {k: v["cert"] for k, v in self._load().items()}

    def names(self) -> dict[str, str]:
        """{node_id: name} of the paired nodes, the name as it was at pairing ("" if unknown)."""
        return {k: str(v.get("name") or "") for k, v in self._load().items()}

    def put(self, node_id: str, cert: str, *, name: str = "") -> None:
        """Pin (or replace) the certificate of ``node_id``."""
        from agent.identity import fingerprint_of_pem  # noqa: PLC0415

        nodes = self._load()
        nodes[node_id] = {"cert": cert, "fingerprint": fingerprint_of_pem(cert), "name": name,
                          "paired_at": time.time()}
        self._write(nodes)

    def wake_target(self, node_id: str):
        """Where to send ``node_id``'s Wake-on-LAN packet, as last reported by the node (a
        :class:`~gui.cluster.nodes.wake.WakeTarget`), or None when not known (#36)."""
        from gui.cluster.nodes.wake import WakeTarget  # noqa: PLC0415

        entry = self._load().get(node_id)
        return WakeTarget.from_json(entry.get("wake")) if entry else None

    def set_wake(self, node_id: str, target) -> None:
        """Keep ``target`` (a :class:`~gui.cluster.nodes.wake.WakeTarget`) with the pairing of
        ``node_id``; the file is written only when it changed, and never for an unpaired node."""
        nodes = self._load()
        entry = nodes.get(node_id)
        if entry is None or entry.get("wake") == target.to_json():
            return
        entry["wake"] = target.to_json()
        self._write(nodes)

    def forget(self, node_id: str) -> bool:
        """Drop the pairing of ``node_id``; True if there was one."""
        nodes = self._load()
        if nodes.pop(node_id, None) is not None:
            self._write(nodes)
            return True
        return False

    def _write(self, nodes: dict) -> None:
        write_private_json(self.path, {"version": PAIRINGS_VERSION, "nodes": nodes})


#: The older name (the file once held bearer tokens); same class.
TokenStore = PairingStore


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
