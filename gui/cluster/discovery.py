"""Finding worker nodes: a continuous mDNS browse plus nodes added by address, kept alive by ping.

:class:`Discovery` keeps a live list of :class:`~gui.cluster.nodes.Node`, keyed by the agent's
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
certificate per node id in a :class:`~gui.cluster.nodes.PairingStore`; every later call is
mutual TLS against that pinned key (:class:`agent.client.AgentClient`).

mDNS records are not authenticated, so they are only a hint. A paired node re-advertised at a
new address moves there only after that address answers with the pinned key; an address that
answers with another key is reported on the node (``Node.impostor``) and the node stays where
it was — never a silent switch.

Everything runs on one asyncio loop. Zeroconf callbacks never raise: whatever a rogue or broken
advertiser sends is ignored (``agent.protocol.parse_txt`` returns None for it), and a well-formed
record is listed only once the agent it names answers ``/api/v1/info`` at the advertised address
with the same id.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from zeroconf import InterfaceChoice, IPVersion, ServiceStateChange
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

from agent import protocol as P
from agent.client import AgentClient, AgentError, KeyMismatch
from gui.cluster.nodes import Node, PairingStore, TokenStore, master_identity  # noqa: F401 - TokenStore re-exported

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


def _pick_host(addresses: list[str]) -> str | None:
    """The address to reach a node by: IPv4 first (simplest for ``--rpc``), then global IPv6."""
    v4 = [a for a in addresses if ":" not in a]
    if v4:
        return v4[0]
    v6 = [a for a in addresses if not ipaddress.ip_address(a).is_link_local]
    return v6[0] if v6 else None


def _node_from_info(info: dict, host: str, api_port: int) -> Node:
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
        state=text(info.get("rpc_state")),
        version=text(info.get("version")),
        proto=text(engine.get("proto")),
        engine=text(engine.get("build")),
        fingerprint=text(info.get("fp")),
        addresses=(host,), manual=True,
    )


class Discovery:
    """The live list of worker nodes (see the module docstring).

    Args:
        interfaces: addresses of the interfaces to browse on (e.g. ``["127.0.0.1"]`` in tests,
            or a namespace's IP). None browses on all interfaces, as the app does.
        browse: False disables mDNS (manual addresses only).
        tokens: the :class:`~gui.cluster.nodes.PairingStore` of pinned keys (default: the
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
        self._aiozc: AsyncZeroconf | None = None
        self._browser: AsyncServiceBrowser | None = None
        self._tasks: set[asyncio.Task] = set()
        self._pinger: asyncio.Task | None = None
        self._changed = asyncio.Event()

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start browsing (if enabled) and pinging."""
        if self.browse and self._aiozc is None:
            ifaces = self.interfaces if self.interfaces is not None else InterfaceChoice.All
            ipv = IPVersion.All if self.interfaces is None else IPVersion.V4Only
            if self.interfaces is not None and any(":" in a for a in self.interfaces):
                ipv = IPVersion.All
            self._aiozc = AsyncZeroconf(interfaces=ifaces, ip_version=ipv)
            self._browser = AsyncServiceBrowser(self._aiozc.zeroconf, P.SERVICE_TYPE,
                                                handlers=[self._on_change])
        if self._pinger is None:
            self._pinger = asyncio.get_running_loop().create_task(self._ping_loop(), name="discovery-ping")

    async def stop(self) -> None:
        """Stop browsing and pinging, and close the zeroconf sockets."""
        if self._pinger is not None:
            self._pinger.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pinger
            self._pinger = None
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._browser is not None:
            await self._browser.async_cancel()
            self._browser = None
        if self._aiozc is not None:
            await self._aiozc.async_close()
            self._aiozc = None

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

    def _upsert(self, node: Node) -> Node:
        """Add or merge ``node`` (same id = same node); emits added/updated when it changed."""
        node = node.with_(paired=self._paired(node.id), impostor=self._impostor_of(node.id),
                          key=self._key(node.id), repair=self._repair(node.id))
        old = self._nodes.get(node.id)
        if old is None:
            self._nodes[node.id] = node
            self._emit(ADDED, node)
            return node
        merged = node.with_(via_mdns=old.via_mdns or node.via_mdns, manual=old.manual or node.manual,
                            addresses=tuple(dict.fromkeys(node.addresses + old.addresses)),
                            reachable=True if node.via_mdns else old.reachable)
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

    def _repair(self, node_id: str) -> bool:
        try:
            return node_id in self.tokens.legacy()
        except ValueError:
            return False

    # --- mDNS ---------------------------------------------------------------------------------

    def _on_change(self, zeroconf, service_type: str, name: str, state_change: ServiceStateChange) -> None:
        # Called by zeroconf on the event loop; must never raise.
        try:
            if state_change in (ServiceStateChange.Added, ServiceStateChange.Updated):
                self._spawn(self._resolve(service_type, name))
            elif state_change is ServiceStateChange.Removed:
                self._goodbye(name)
        except Exception:
            log.exception("ignored a zeroconf event for %r", name)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _resolve(self, service_type: str, name: str) -> None:
        try:
            if self._aiozc is None:
                return
            info = AsyncServiceInfo(service_type, name)
            if not await info.async_request(self._aiozc.zeroconf, 3000):
                return
            addresses = [a for a in info.parsed_addresses() if self._usable(a)]
            friendly = name[: -len(service_type) - 1] if name.endswith("." + service_type) else name
            advert = P.parse_txt(info.properties, name=friendly, addresses=addresses)
            host = _pick_host(list(advert.addresses)) if advert else None
            if advert is None or host is None:
                log.debug("ignored mDNS record %r: not a usable herd agent", name)
                return
            known = self._nodes.get(advert.node_id)
            if known is None or (known.host, known.api_port) != (host, advert.api_port):
                # Anyone on the LAN can advertise anything: a node is listed only once an agent
                # with that id answers at the advertised address.
                why = await self._confirm(advert.node_id, host, advert.api_port)
                if why:
                    log.debug("ignored mDNS record %r: %s", name, why)
                    return
                # A paired node moves to a new address only once that address answers with the
                # pinned key: otherwise a copied id would draw the node to a rogue.
                failed = await self._prove(advert.node_id, host, advert.api_port)
                if failed:
                    log.warning("%s", failed)
                    self._impostors[name] = (advert.node_id, failed)
                    if known is not None:
                        self._upsert(known)  # the node stays where it is, now with the report
                        return
                    # The only claimant: listed, flagged; no call succeeds there (every client
                    # pins the key).
                else:
                    # Names that failed the key check no longer stand for this node: their
                    # goodbye must not remove it.
                    for other, (nid, _why) in self._impostors.items():
                        if nid == advert.node_id and other != name:
                            self._by_name.pop(other, None)
            old_id = self._by_name.get(name)
            self._by_name[name] = advert.node_id
            if old_id and old_id != advert.node_id:
                self._goodbye_id(old_id)
            self._upsert(Node(
                id=advert.node_id, name=advert.name or friendly, host=host, api_port=advert.api_port,
                rpc_port=advert.rpc_port, echo_port=advert.echo_port, state=advert.state,
                version=advert.version, proto=advert.proto, engine=advert.engine,
                fingerprint=advert.fingerprint, addresses=advert.addresses, via_mdns=True))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("ignored an unreadable mDNS record %r", name)

    def _usable(self, address: str) -> bool:
        """Loopback addresses only make sense when browsing includes loopback: a record heard on
        a LAN interface that says 127.0.0.1 points at this machine, not at the advertiser."""
        try:
            if not ipaddress.ip_address(address.split("%", 1)[0]).is_loopback:
                return True
        except ValueError:
            return False
        if self.interfaces is None:
            return True
        return any(ipaddress.ip_address(i.split("%", 1)[0]).is_loopback for i in self.interfaces
                   if _is_ip(i))

    async def _confirm(self, node_id: str, host: str, api_port: int) -> str | None:
        """None when the agent at ``host:api_port`` says it is ``node_id``, else the reason."""
        url = f"https://{_bracket(host)}:{api_port}"
        try:
            async with AgentClient(url, timeout=self.ping_timeout) as c:
                info = await c.info()
        except AgentError as exc:
            return f"no herd agent answers at {url} ({exc})"
        if info.get("id") != node_id:
            return f"the agent at {url} is {info.get('id')!r}, not {node_id}"
        return None

    async def _prove(self, node_id: str, host: str, api_port: int) -> str | None:
        """None when ``node_id`` is unpaired or the agent at ``host:api_port`` answers with the
        key pinned for it; else why not (the message names the address)."""
        try:
            cert = self.tokens.get(node_id)
        except ValueError:
            return None
        if cert is None:
            return None
        url = f"https://{_bracket(host)}:{api_port}"
        try:
            async with AgentClient(url, timeout=self.ping_timeout, pinned=cert, node_id=node_id) as c:
                info = await c.info()
        except KeyMismatch:
            return (f"wrong key: the agent at {url} claims to be node {node_id} but its key is not the "
                    "one pinned at pairing; this master does not use it")
        except AgentError as exc:
            return f"key not checked: the agent at {url} claims to be node {node_id} but did not " \
                   f"answer ({exc}); this master does not use it"
        if info.get("id") != node_id:
            return f"the agent at {url} has the pinned key but says it is {info.get('id')!r}"
        return None

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
        """Add a node by ``HOST[:API_PORT]``, reading its agent's ``/api/v1/info``.

        Raises ValueError for a malformed address and :class:`AgentError` when nothing (or
        something that is not a herd agent) answers there.
        """
        host, port = parse_address(address)
        async with AgentClient(f"https://{_bracket(host)}:{port}", timeout=timeout) as c:
            info = await c.info()
        node = _node_from_info(info, host, port)
        # /info is public: anyone can answer with a paired node's id. A paired node is taken to
        # be at this address only if the address has the pinned key (as for mDNS records).
        failed = await self._prove(node.id, host, port)
        if failed:
            log.warning("%s", failed)
            self._impostors[f"{host}:{port}"] = (node.id, failed)
            known = self._nodes.get(node.id)
            if known is not None:
                return self._upsert(known)
        return self._upsert(node)

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
            async with AgentClient(node.api_url, timeout=self.ping_timeout) as c:
                reply = await c.ping()
            # An address taken over by another agent is not this node.
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
                self._nodes[node.id] = current.with_(reachable=False)
                self._emit(UPDATED, self._nodes[node.id])

    async def _ping_loop(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.ping_all()
            except Exception:
                log.exception("ping round failed")
            await asyncio.sleep(max(0.0, self.ping_interval - (time.monotonic() - started)))


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%", 1)[0])
        return True
    except ValueError:
        return False


def _visible(n: Node) -> tuple:
    """The fields whose change is worth an ``updated`` event (not ``last_seen``)."""
    return (n.name, n.host, n.api_port, n.rpc_port, n.echo_port, n.state, n.version, n.proto,
            n.engine, n.fingerprint, n.via_mdns, n.manual, n.reachable, n.paired, n.impostor, n.key,
            n.repair)


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host
