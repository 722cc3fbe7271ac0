"""The RPC relay: the only door to the RPC worker from the LAN.

``ggml-rpc-server`` has no authentication and no encryption at all, so the agent binds it to
127.0.0.1 and listens on the advertised RPC port itself, speaking TLS 1.3 (``ssl``). Only a
client whose certificate is a paired master's — checked at each connection against the pairings
now — is spliced to the worker; the address it comes from admits nothing. Any other connection
is closed at once, before a byte of RPC is read. The master's side of the link is
:mod:`gui.cluster.nodes.tunnel`, which uses this same class with a TLS leg towards the relay.

Decode speed is dominated by small request/reply round trips (one GET_TENSOR per token and
device), so both legs set ``TCP_NODELAY`` and the splice is a pair of asyncio protocols that
write each chunk straight through (no reader/writer tasks, no extra copies).
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import logging
import socket
from typing import Callable

from agent.rpc_stream import LoadCounter, StreamParser

log = logging.getLogger("herd.agent.relay")

#: Pause reading one side when the other side has this much unsent.
HIGH_WATER = 4 * 1024 * 1024

#: TCP keepalive on a master's connection: probe after this many idle seconds, then every
#: KEEPALIVE_INTERVAL, and drop it after KEEPALIVE_PROBES unanswered. A master PC that lost
#: power or its Wi-Fi sends no FIN; without this its connection, and so its lease on the
#: worker (agent.lease), would stay open for good. A live master's kernel answers the probes,
#: however long its llama-server sits idle between chats. Data the master stopped
#: acknowledging ends the connection after the same time (``TCP_USER_TIMEOUT``): keepalive does
#: not probe a connection with unacknowledged data, which the kernel would retransmit for
#: a quarter of an hour.
KEEPALIVE_IDLE = 20
KEEPALIVE_INTERVAL = 5
KEEPALIVE_PROBES = 4


def normalise_ip(addr: str) -> str:
    """``::ffff:10.0.0.2`` → ``10.0.0.2``; other addresses unchanged (and canonical)."""
    try:
        ip = ipaddress.ip_address(addr.split("%", 1)[0])
    except ValueError:
        return addr
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def _nodelay(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _keepalive(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if hasattr(socket, "TCP_KEEPIDLE"):  # Linux, recent Windows
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_INTERVAL)
            if hasattr(socket, "TCP_KEEPCNT"):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_PROBES)
            if hasattr(socket, "TCP_USER_TIMEOUT"):  # Linux
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT,
                                (KEEPALIVE_IDLE + KEEPALIVE_INTERVAL * KEEPALIVE_PROBES) * 1000)
        elif hasattr(socket, "SIO_KEEPALIVE_VALS"):  # older Windows: 10 probes, fixed
            sock.ioctl(socket.SIO_KEEPALIVE_VALS, (1, KEEPALIVE_IDLE * 1000, KEEPALIVE_INTERVAL * 1000))
    except (OSError, AttributeError) as exc:  # a safety net: the connection works without it
        log.debug("RPC relay: no TCP keepalive: %s", exc)


class _Leg(asyncio.Protocol):
    """One side of a spliced connection; forwards what it receives to ``peer``."""

    def __init__(self, on_close: Callable[[], None]) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Leg | None = None
        self.pending: list[bytes] = []  # data that arrived before the other leg was writable
        # True once this leg may be written to directly: for the worker-side leg only after the
        # client's early bytes were flushed to it, or they would be overtaken (order matters).
        self.writable = False
        self.closed = False
        self.eof = False
        self._on_close = on_close
        self.nbytes = 0

    def connection_made(self, transport) -> None:
        self.transport = transport
        _nodelay(transport)
        transport.set_write_buffer_limits(high=HIGH_WATER)

    def data_received(self, data: bytes) -> None:
        self.nbytes += len(data)
        if self.peer is not None and self.peer.writable:
            self.peer.transport.write(data)
        else:
            self.pending.append(data)

    def eof_received(self):
        self.eof = True
        peer = self.peer
        if peer is None:
            return False
        if not peer.writable:
            return True  # the worker leg is still connecting; _connect passes the EOF on
        if peer.eof:  # both directions are finished: close both
            peer.transport.close()
            return False
        if peer.transport.can_write_eof():
            peer.transport.write_eof()  # pass the half-close on
            return True  # keep our write side open until the peer finishes too
        return False

    def connection_lost(self, exc) -> None:
        self.closed = True
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()
        self._on_close()

    # Flow control: when our outgoing buffer fills, stop reading the other side.
    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()


class RpcRelay:
    """Listens on ``host:port`` and splices admitted clients to the worker.

    Args:
        host, port: where clients connect (the advertised RPC port).
        is_allowed: ``is_allowed(ip, fingerprint)`` — is the client whose TLS certificate has
            this fingerprint (None without TLS or without a certificate) to be admitted?
        ssl: TLS context of the listening side (None: plain TCP, the master's local side).
        target_ssl: TLS context for the leg to ``target`` (None: plain TCP, to the worker).
        target: ``target()`` — ``(host, port)`` of the worker when it is ready, else None
            (clients are then closed at once, as if nothing listened).
        on_client: called with the connected client's address, or None when the last one left.
        max_clients: how many admitted connections may be open at once (None: any number).
        peer_check: ``peer_check(peername, sockname)`` — a further test of each connection by
            its two ends (the master's forwarder: is the local process at the other end one
            this master started?); None: none.

    Attributes:
        refused: how many connections were refused.
        client: the address of the connected client, if any.
    """

    def __init__(self, host: str, port: int, *, is_allowed: Callable[[str, str | None], bool],
                 target: Callable[[], tuple[str, int] | None],
                 on_client: Callable[[str | None], None] | None = None, ssl=None,
                 target_ssl=None, max_clients: int | None = None,
                 peer_check: Callable[[tuple, tuple], bool | None] | None = None) -> None:
        self.host = host
        self._peer_check = peer_check
        self.max_clients = max_clients
        self.port = port
        self._ssl = ssl
        self._target_ssl = target_ssl
        self._is_allowed = is_allowed
        self._target = target
        self._on_client = on_client or (lambda _addr: None)
        self._server: asyncio.AbstractServer | None = None
        self._active: dict[int, tuple[str, _Leg, _Leg | None]] = {}
        self._next = 0
        self._tasks: set[asyncio.Task] = set()
        self.refused = 0
        self._warned: set[str] = set()
        self.bytes_to_worker = 0
        self.bytes_from_worker = 0
        #: what the current (or last) llama-server sent, for start-up progress (``rpc.transfer``)
        self.load = LoadCounter()

    @property
    def connections(self) -> int:
        """How many admitted connections are open."""
        return len(self._active)

    @property
    def client(self) -> str | None:
        return next(reversed([addr for addr, _, _ in self._active.values()]), None)

    async def start(self) -> None:
        """Bind and listen; :class:`OSError` (e.g. EADDRINUSE) if the port is taken."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._accept_factory, self.host, self.port,
                                                reuse_address=True, backlog=16, ssl=self._ssl,
                                                ssl_handshake_timeout=10.0 if self._ssl else None)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening and drop every spliced connection."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for _addr, front, back in list(self._active.values()):
            if front.transport is not None:
                front.transport.abort()
            if back is not None and back.transport is not None:
                back.transport.abort()
        self._active.clear()

    def _accept_factory(self) -> asyncio.Protocol:
        return _Front(self)

    def _admit(self, front: "_Front", transport: asyncio.Transport) -> None:
        peer = transport.get_extra_info("peername")
        addr = normalise_ip(peer[0]) if peer else "?"
        ssl_object = transport.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        fingerprint = hashlib.sha256(der).hexdigest() if der else None
        target = self._target()
        allowed = self._is_allowed(addr, fingerprint)
        ours = (self._peer_check is None or not allowed or peer is None
                or self._peer_check(peer, transport.get_extra_info("sockname")) is not False)
        full = self.max_clients is not None and len(self._active) >= self.max_clients
        if not allowed or not ours or target is None or full:
            self.refused += 1
            why = ("not a paired master's key" if not allowed else
                   "not a process this master started" if not ours else
                   "worker not ready" if target is None else f"{len(self._active)} connections open already")
            # once per address at warning level: a port scan must not flood the log
            level = logging.DEBUG if addr in self._warned else logging.WARNING
            if len(self._warned) < 1000:
                self._warned.add(addr)
            log.log(level, "RPC relay: refused %s (%s)", addr, why)
            transport.abort()
            return
        _keepalive(transport)
        key = self._next
        self._next += 1
        front.key = key
        if not self._active:  # the first connection to an idle worker: a new load begins
            self.load.new_session()
        front.parser = StreamParser(self.load)
        back = _Leg(on_close=lambda: self._drop(key))
        front.peer = back
        back.peer = front
        front.writable = True
        self._active[key] = (addr, front, back)
        self._on_client(addr)
        task = asyncio.get_running_loop().create_task(self._connect(key, front, back, target))
        self._tasks.add(task)  # keep a reference until it ran (asyncio holds only weak ones)
        task.add_done_callback(self._tasks.discard)

    async def _connect(self, key: int, front: "_Front", back: _Leg, target: tuple[str, int]) -> None:
        loop = asyncio.get_running_loop()
        try:
            if self._target_ssl is not None:
                # the master's forwarder: TLS to the agent's relay, the key checked by the context
                await loop.create_connection(lambda: back, target[0], target[1], ssl=self._target_ssl,
                                             server_hostname="", ssl_handshake_timeout=10.0)
            else:
                await loop.create_connection(lambda: back, target[0], target[1])
        except OSError as exc:
            log.warning("RPC relay: worker at %s:%d unreachable: %s", target[0], target[1], exc)
            if front.transport is not None:
                front.transport.abort()
            self._drop(key)
            return
        if front.closed:
            back.transport.close()
            return
        for chunk in front.pending:
            back.transport.write(chunk)
        front.pending.clear()
        back.writable = True
        if front.eof and back.transport.can_write_eof():
            back.transport.write_eof()

    def _drop(self, key: int) -> None:
        entry = self._active.pop(key, None)
        if entry is None:
            return
        _addr, front, back = entry
        self.bytes_to_worker += front.nbytes
        self.bytes_from_worker += back.nbytes if back else 0
        for leg in (front, back):
            if leg is not None and leg.transport is not None and not leg.closed:
                leg.transport.close()
        self._on_client(self.client)


class _Front(_Leg):
    """The client-facing leg: decides on admission as soon as the connection exists."""

    def __init__(self, relay: RpcRelay) -> None:
        super().__init__(on_close=lambda: relay._drop(self.key))
        self.relay = relay
        self.key = -1
        self.parser: StreamParser | None = None

    def data_received(self, data: bytes) -> None:
        if self.parser is not None:
            self.parser.feed(data)
        super().data_received(data)

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.relay._admit(self, transport)
