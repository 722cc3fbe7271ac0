"""Finding worker nodes: a continuous mDNS browse plus nodes added by address, kept alive by ping.

:class:`Discovery` keeps a live list of :class:`~gui.cluster.nodes.records.Node`, keyed by the agent's
``id`` (not its address), and tells subscribers about every change with a :class:`NodeEvent`:

* ``added`` — a new node (seen over mDNS, or added by hand with :meth:`Discovery.add_address`,
  which reads the agent's ``/api/v1/info``; mDNS is often blocked by home routers and Windows);
* ``updated`` — its TXT record changed (state, ports, address), it became (un)reachable or
  (un)paired;
* ``removed`` — it said goodbye over mDNS (a node added by hand stays until forgotten).

A node that stops answering ``ping`` is marked unreachable after ``misses`` failed pings, so
with the defaults (every 2 s, 1.5 s timeout, 2 misses) within about 6 s even when no goodbye
came (a pulled cable, a crash).

Pairing (:meth:`Discovery.pair`) runs the PAKE with the PIN the agent shows and pins the agent's
certificate per node id in a :class:`~gui.cluster.nodes.records.PairingStore`; every later call is
mutual TLS against that pinned key (:class:`agent.client.AgentClient`).

mDNS records and typed addresses are hints: they say where to look, nothing more (#25).

* A paired node's name, ports, state and versions come only from its own authenticated API —
  ``/status`` over mutual TLS with the key pinned at pairing — never from a TXT record or the
  public ``/info``. A record that names the node's id with other ports or another name changes
  nothing.
* A paired node moves to a new address only after that address answered with the pinned key. An
  address that answers with another key never replaces the known one: it is reported on the node
  (``Node.impostor``); if the node is known nowhere else it is listed there as unreachable,
  flagged, and nothing uses it. Pings of a paired node are authenticated too, so an address taken
  over by another device does not make the node "reachable".
* Hints for one node id are checked one at a time (a lock per id), and the node as known is read
  after the checks' awaits, not before: two records racing (the real node's and a rogue's) cannot
  overwrite each other's outcome.
* An unpaired node is listed with what its public ``/info`` says at the hinted address (once the
  id matches); nothing can be done with it before pairing.

Everything runs on one asyncio loop. Zeroconf callbacks never raise: whatever a rogue or broken
advertiser sends is ignored (``agent.protocol.parse_txt`` returns None for it).

The list and its rules are here; browsing mDNS is :mod:`gui.cluster.nodes.mdns_browse`, asking an
agent who it is against its pinned key :mod:`gui.cluster.nodes.key_check`, and the node records
:mod:`gui.cluster.nodes.records` (#33).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from agent import protocol as P
from agent.client import AgentClient, AgentError
from gui.cluster.nodes.key_check import agent_url, authenticated_status, public_info, which_paired
from gui.cluster.nodes.mdns_browse import MdnsBrowse
from gui.cluster.nodes.records import Node, PairingStore, master_identity, node_from_info, node_from_status
from gui.cluster.nodes.wake import remember_wake

log = logging.getLogger(__name__)

ADDED, UPDATED, REMOVED = "added", "updated", "removed"


@dataclass(frozen=True)
class NodeEvent:
    """A change in the node list: ``kind`` is ``added``, ``updated`` or ``removed``."""

    kind: str
    node: Node


def parse_address(text: str, default_port: int = P.DEFAULT_API_PORT) -> tuple[str, int]:
    """``"10.0.0.5"``, ``"10.0.0.5:50050"``, ``"[fe80::1]:50050"``, ``"http://host:port"`` →
    (host, port). Raises ValueError naming the input."""
    raw = text.strip()
    for prefix in ("http://", "https://"):
        if raw.startswith(prefix):
            raw = raw[len(prefix):]
    raw = raw.rstrip("/")
    if not raw:
        raise ValueError(f"{text!r} is not an address (expected HOST or HOST:PORT)")
    host, port_text = raw, ""
    if raw.startswith("["):
        end = raw.find("]")
        if end < 0:
            raise ValueError(f"{text!r}: unclosed '[' in the address")
        host, rest = raw[1:end], raw[end + 1:]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"{text!r} is not an address (expected [IPv6]:PORT)")
            port_text = rest[1:]
    elif raw.count(":") == 1:
        host, port_text = raw.split(":")
    if not host or any(c in host for c in " /?#@"):
        raise ValueError(f"{text!r} is not an address (expected HOST or HOST:PORT)")
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"{text!r}: the port must be a number from 1 to 65535")
        return host, int(port_text)
    return host, default_port


class Discovery:
    """The live list of worker nodes (see the module docstring).

    Args:
        interfaces: addresses of the interfaces to browse on (e.g. ``["127.0.0.1"]`` in tests,
            or a namespace's IP). None browses on all interfaces, as the app does.
        browse: False disables mDNS (manual addresses only).
        tokens: the :class:`~gui.cluster.nodes.records.PairingStore` of pinned keys (default: the
            user's config folder).
        identity: this master's :class:`~agent.identity.Identity` (default: the one in the
            config folder, created on first use).
        ping_interval, ping_timeout, misses: liveness check (see the module docstring).
    """

    def __init__(self, interfaces: list[str] | None = None, *, browse: bool = True,
                 tokens: PairingStore | None = None, ping_interval: float = 2.0,
                 ping_timeout: float = 1.5, misses: int = 2, identity=None) -> None:
        self.interfaces = interfaces
        self.browse = browse
        self.tokens = tokens or PairingStore()
        self._identity = identity
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        self.misses = misses
        self._nodes: dict[str, Node] = {}
        self._by_name: dict[str, str] = {}   # mDNS instance name -> node id
        self._impostors: dict[str, tuple[str, str]] = {}  # mDNS name -> (node id, why it failed)
        self._failed: dict[str, int] = {}
        self._subs: list[Callable[[NodeEvent], None]] = []
        self._mdns = MdnsBrowse(interfaces, self._on_record, self._goodbye) if browse else None
        self._pinger: asyncio.Task | None = None
        self._changed = asyncio.Event()
        self._locks: dict[str, asyncio.Lock] = {}  # node id -> hints for it are checked in turn

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start browsing (if enabled) and pinging."""
        if self._mdns is not None:
            await self._mdns.start()
        if self._pinger is None:
            self._pinger = asyncio.get_running_loop().create_task(self._ping_loop(), name="discovery-ping")

    async def stop(self) -> None:
        """Stop browsing and pinging, and close the zeroconf sockets."""
        if self._pinger is not None:
            self._pinger.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pinger
            self._pinger = None
        if self._mdns is not None:
            await self._mdns.stop()

    async def __aenter__(self) -> "Discovery":
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    # --- the list -----------------------------------------------------------------------------

    @property
    def nodes(self) -> dict[str, Node]:
        """A snapshot: {node id: node}."""
        return dict(self._nodes)

    def find(self, key: str) -> Node | None:
        """The node whose id, name, host or ``host:port`` (API or RPC) is ``key``."""
        if key in self._nodes:
            return self._nodes[key]
        for n in self._nodes.values():
            if key in (n.name, n.host, f"{n.host}:{n.api_port}", n.rpc_endpoint, *n.addresses):
                return n
        return None

    def subscribe(self, callback: Callable[[NodeEvent], None]) -> Callable[[], None]:
        """Call ``callback(event)`` on every change; returns the function that unsubscribes."""
        self._subs.append(callback)
        return lambda: self._subs.remove(callback) if callback in self._subs else None

    async def wait_until(self, predicate: Callable[[dict[str, Node]], bool], timeout: float) -> bool:
        """Wait until ``predicate(nodes)`` holds; False on timeout."""
        deadline = time.monotonic() + timeout
        while not predicate(self.nodes):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)
        return True

    def _emit(self, kind: str, node: Node) -> None:
        self._changed.set()
        for cb in list(self._subs):
            try:
                cb(NodeEvent(kind, node))
            except Exception:
                log.exception("discovery subscriber %r failed", cb)

    @property
    def identity(self):
        """This master's identity (created on first use)."""
        if self._identity is None:
            self._identity = master_identity(self.tokens.path.parent)
        return self._identity

    def _upsert(self, node: Node, *, answered: bool = False) -> Node:
        """Add or merge ``node`` (same id = same node); emits added/updated when it changed.
        ``answered``: ``node.reachable`` is what a check just found (else an mDNS sighting
        counts as reachable, and a merge keeps what the pings said)."""
        node = node.with_(paired=self._paired(node.id), impostor=self._impostor_of(node.id),
                          key=self._key(node.id), repair=self._repair(node.id), wakeable=self._wakeable(node.id))
        old = self._nodes.get(node.id)
        if old is None:
            self._nodes[node.id] = node
            self._emit(ADDED, node)
            return node
        reachable = node.reachable if answered else (True if node.via_mdns else old.reachable)
        merged = node.with_(via_mdns=old.via_mdns or node.via_mdns, manual=old.manual or node.manual,
                            addresses=tuple(dict.fromkeys(node.addresses + old.addresses)),
                            reachable=reachable)
        if _visible(merged) != _visible(old):
            self._nodes[node.id] = merged
            self._emit(UPDATED, merged)
        else:
            self._nodes[node.id] = merged
        return merged

    def _impostor_of(self, node_id: str) -> str:
        return "; ".join(why for nid, why in self._impostors.values() if nid == node_id)

    def _paired(self, node_id: str) -> bool:
        try:
            return self.tokens.get(node_id) is not None
        except ValueError:  # an unreadable pairing file: treat as unpaired, pairing rewrites it
            return False

    def _key(self, node_id: str) -> str:
        try:
            return self.tokens.fingerprint(node_id)
        except ValueError:
            return ""

    def _wakeable(self, node_id: str) -> bool:
        try:
            return self.tokens.wake_target(node_id) is not None
        except (ValueError, OSError):  # an unreadable pairing file is reported where it is read
            return False

    def _repair(self, node_id: str) -> bool:
        try:
            return node_id in self.tokens.legacy()
        except ValueError:
            return False

    # --- mDNS ---------------------------------------------------------------------------------

    async def _on_record(self, name: str, advert: P.NodeAdvert, host: str) -> None:
        """An mDNS record ``name`` says node ``advert.node_id`` is at ``host``: where to look (id,
        address, API port); everything else comes from the agent there."""
        async with self._lock(advert.node_id):
            node = await self._check_hint(advert.node_id, host, advert.api_port, hint=name,
                                          via_mdns=True, addresses=advert.addresses,
                                          fingerprint=advert.fingerprint)
            if node is None or node.host != host:
                return  # ignored, or a record that failed the key check: it stands for nobody
            old_id = self._by_name.get(name)
            self._by_name[name] = advert.node_id
            if old_id and old_id != advert.node_id:
                self._goodbye_id(old_id)

    def _lock(self, node_id: str) -> asyncio.Lock:
        return self._locks.setdefault(node_id, asyncio.Lock())

    async def _check_hint(self, node_id: str, host: str, api_port: int, *, hint: str,
                          via_mdns: bool = False, manual: bool = False, addresses=(),
                          fingerprint: str = "", info: dict | None = None) -> Node | None:
        """Check a hint that node ``node_id`` is at ``host:api_port`` (``hint``: the mDNS name or
        the address typed, for reports); returns the node as listed after it, or None when the
        hint was ignored. Called with the node id's lock held."""
        extra = {"via_mdns": via_mdns, "manual": manual}
        try:
            cert = self.tokens.get(node_id)
        except ValueError:
            cert = None
        if cert is None:
            if info is None:
                info, why = await public_info(node_id, host, api_port, timeout=self.ping_timeout)
                if why:
                    log.debug("ignored mDNS record %r: %s" if via_mdns else "ignored the address %r: %s",
                              hint, why)
                    return None
            node = node_from_info(info, host, api_port).with_(
                addresses=tuple(dict.fromkeys((host, *addresses))), fingerprint=fingerprint, **extra)
            return self._upsert(node)
        status, failed = await authenticated_status(node_id, host, api_port, identity=self.identity,
                                                    pinned=self.tokens.get(node_id),
                                                    timeout=max(self.ping_timeout, 3.0))
        known = self._nodes.get(node_id)  # as it is now, after the awaits (#25)
        if failed:
            log.warning("%s", failed)
            self._impostors[hint] = (node_id, failed)
            if known is not None:
                return self._upsert(known)  # the node stays where it is, now with the report
            # Known nowhere else: listed where the hint said, flagged and unreachable; no call
            # goes there (every client pins the key, and so do the pings).
            name = self._pairing_name(node_id) or node_id
            return self._upsert(Node(id=node_id, name=name, host=host, api_port=api_port,
                                     addresses=(host,), reachable=False, **extra), answered=True)
        self._impostors.pop(hint, None)
        # Names that failed the key check no longer stand for this node: their goodbye must
        # not remove it.
        for other, (nid, _why) in self._impostors.items():
            if nid == node_id and other != hint:
                self._by_name.pop(other, None)
        node = node_from_status(status, host, api_port, self._key(node_id)).with_(
            addresses=tuple(dict.fromkeys((host, *addresses))), reachable=True, **extra)
        # for `herd wake` once it sleeps (#36)
        remember_wake(self.tokens, node_id, status, node.api_url.removeprefix("https://"))
        self._failed[node_id] = 0
        return self._upsert(node, answered=True)

    def _pairing_name(self, node_id: str) -> str:
        try:
            return self.tokens.names().get(node_id, "")
        except ValueError:
            return ""

    def _goodbye(self, name: str) -> None:
        gone = self._impostors.pop(name, None)
        if gone is not None and gone[0] in self._nodes:
            self._nodes[gone[0]] = self._nodes[gone[0]].with_(impostor=self._impostor_of(gone[0]))
            self._emit(UPDATED, self._nodes[gone[0]])
        nid = self._by_name.pop(name, None)
        if nid is not None:
            self._goodbye_id(nid)

    def _goodbye_id(self, nid: str) -> None:
        node = self._nodes.get(nid)
        if node is None:
            return
        if node.manual:  # the user added it: keep it, pings decide whether it is reachable
            self._nodes[nid] = node.with_(via_mdns=False)
            self._emit(UPDATED, self._nodes[nid])
        else:
            del self._nodes[nid]
            self._failed.pop(nid, None)
            self._emit(REMOVED, node)

    # --- by address ---------------------------------------------------------------------------

    async def add_address(self, address: str, timeout: float = 5.0) -> Node:
        """Add a node by ``HOST[:API_PORT]``.

        A typed address is a hint like an mDNS record: a paired node found there (its pinned key
        answers) is described by its authenticated ``/status``; anything else by its public
        ``/info``, and an address that claims a paired node's id without its key is reported on
        that node and never replaces where it is known. Raises ValueError for a malformed
        address and :class:`AgentError` when nothing (or something that is not a herd agent)
        answers there.
        """
        host, port = parse_address(address)
        nid = await which_paired(host, port, tokens=self.tokens, identity=self.identity,
                                 timeout=max(self.ping_timeout, 3.0))
        if nid is not None:
            async with self._lock(nid):
                node = await self._check_hint(nid, host, port, hint=f"{host}:{port}", manual=True)
            if node is not None:
                return node
        async with AgentClient(agent_url(host, port), timeout=timeout) as c:
            info = await c.info()
        node = node_from_info(info, host, port)
        async with self._lock(node.id):
            listed = await self._check_hint(node.id, host, port, hint=f"{host}:{port}", manual=True,
                                            info=info)
        return listed if listed is not None else node

    def forget(self, node_id: str) -> None:
        """Drop a node from the list (it comes back if mDNS sees it again)."""
        node = self._nodes.pop(node_id, None)
        if node is not None:
            self._by_name = {k: v for k, v in self._by_name.items() if v != node_id}
            self._emit(REMOVED, node)

    # --- pairing and clients ------------------------------------------------------------------

    def client(self, node: Node | str, timeout: float = 5.0) -> AgentClient:
        """An :class:`AgentClient` for ``node``: mutual TLS with its pinned key (if paired)."""
        n = node if isinstance(node, Node) else self._nodes[node]
        return AgentClient(n.api_url, timeout=timeout, identity=self.identity, pinned=self.tokens.get(n.id),
                           node_id=n.id)

    async def pair(self, node: Node | str, pin: str) -> str:
        """Pair with ``node`` by PAKE using the PIN it shows; pins and returns its certificate."""
        import socket  # noqa: PLC0415

        n = node if isinstance(node, Node) else self._nodes[node]
        async with AgentClient(n.api_url, identity=self.identity, node_id=n.id) as c:
            cert = await c.pair(pin, client_name=socket.gethostname() or "herd")
        self.tokens.put(n.id, cert, name=n.name)
        if n.id in self._nodes:
            self._nodes[n.id] = self._nodes[n.id].with_(paired=True, key=self._key(n.id), repair=False,
                                                        impostor="")
            self._impostors = {k: v for k, v in self._impostors.items() if v[0] != n.id}
            self._emit(UPDATED, self._nodes[n.id])
            # From now on the node is described by its authenticated API.
            async with self._lock(n.id):
                await self._check_hint(n.id, n.host, n.api_port, hint=f"{n.host}:{n.api_port}",
                                       via_mdns=n.via_mdns, manual=n.manual)
        return cert

    async def unpair(self, node: Node | str) -> str | None:
        """Forget ``node``'s pairing here and, if it answers, there too. Returns a note when the
        node could not be told (it then refuses this master only once unpaired there as well,
        with ``herd-agent unpair``)."""
        n = node if isinstance(node, Node) else self._nodes[node]
        note = None
        if self.tokens.get(n.id) is not None:
            try:
                async with self.client(n) as c:
                    await c.unpair()
            except AgentError as exc:
                note = f"{n.name}: could not tell the node ({exc}); run `herd-agent unpair` on it"
        self.tokens.forget(n.id)
        if n.id in self._nodes:
            self._nodes[n.id] = self._nodes[n.id].with_(paired=False, key="")
            self._emit(UPDATED, self._nodes[n.id])
        return note

    # --- liveness -----------------------------------------------------------------------------

    async def ping_all(self) -> None:
        """Ping every node once (concurrently) and update reachability."""
        nodes = list(self._nodes.values())
        await asyncio.gather(*(self._ping(n) for n in nodes))

    async def _ping(self, node: Node) -> None:
        ok = False
        try:
            # A paired node is pinged with its pinned key (and this master's, so the agent counts
            # the call against the owner's budget, not the strangers'): an address taken over by
            # another device is not this node.
            paired = self._paired(node.id)
            async with (self.client(node, timeout=self.ping_timeout) if paired else
                        AgentClient(node.api_url, timeout=self.ping_timeout)) as c:
                reply = await c.ping()
            ok = reply.get("id") in (None, node.id)
        except AgentError:
            ok = False
        except Exception:
            log.exception("ping of %s failed unexpectedly", node.api_url)
        current = self._nodes.get(node.id)
        if current is None:
            return
        if ok:
            self._failed[node.id] = 0
            self._nodes[node.id] = current.with_(last_seen=time.monotonic())
            if not current.reachable:
                self._nodes[node.id] = self._nodes[node.id].with_(reachable=True)
                self._emit(UPDATED, self._nodes[node.id])
        else:
            self._failed[node.id] = self._failed.get(node.id, 0) + 1
            if current.reachable and self._failed[node.id] >= self.misses:
                # a node that stops answering may be asleep: its card offers Wake if it can (#36)
                self._nodes[node.id] = current.with_(reachable=False, wakeable=self._wakeable(node.id))
                self._emit(UPDATED, self._nodes[node.id])

    async def _ping_loop(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.ping_all()
            except Exception:
                log.exception("ping round failed")
            await asyncio.sleep(max(0.0, self.ping_interval - (time.monotonic() - started)))


def _visible(n: Node) -> tuple:
    """The fields whose change is worth an ``updated`` event (not ``last_seen``)."""
    return (n.name, n.host, n.api_port, n.rpc_port, n.echo_port, n.state, n.version, n.proto,
            n.engine, n.fingerprint, n.via_mdns, n.manual, n.reachable, n.paired, n.impostor, n.key,
            n.repair, n.wakeable)
