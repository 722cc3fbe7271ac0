"""Connection hygiene for the control API: what keeps one host on the LAN from starving the
paired master of the agent's attention or its file descriptors.

* the TLS handshake must finish within :data:`HANDSHAKE_TIMEOUT` seconds;
* a connection must have sent a complete request header within :data:`HEADER_TIMEOUT` seconds
  of its handshake (a slowloris that trickles a header byte by byte is closed);
* an idle keep-alive connection is closed after :data:`KEEPALIVE_TIMEOUT` seconds (aiohttp);
* one address holds at most :data:`PER_PEER` connections without a paired master's certificate;
  a further one is closed at once (a paired master's own connections are not capped per
  address: it is known, and its calls must not be refused);
* all addresses together hold at most :data:`TOTAL`; at the cap the oldest connection that
  has not yet sent a complete header is closed to make room, so a flood of idle connections
  (from one or many addresses) cannot keep the master's call out;
* the file-descriptor limit is raised at start (:func:`raise_fd_limit`) so that the caps, not
  the OS, decide.

:class:`GuardedSite` is an aiohttp site that wraps each connection's protocol to do this.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict

from aiohttp import web

from agent.relay import normalise_ip

log = logging.getLogger("herd.agent.api")

HANDSHAKE_TIMEOUT = 10.0
HEADER_TIMEOUT = 10.0
KEEPALIVE_TIMEOUT = 15.0
PER_PEER = 32
TOTAL = 512
#: The file-descriptor limit the agent asks for at start (the systemd unit sets the same).
FD_LIMIT = 65536


def raise_fd_limit(want: int = FD_LIMIT) -> int | None:
    """Raise the soft RLIMIT_NOFILE towards ``want`` (at most the hard limit); returns the new
    soft limit, or None where there is no such limit (Windows)."""
    try:
        import resource  # noqa: PLC0415 - POSIX only
    except ImportError:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:
        log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
        return soft
    return target


class ConnectionGuard:
    """Counts connections per address and overall (see the module docstring)."""

    def __init__(self, per_peer: int = PER_PEER, total: int = TOTAL,
                 header_timeout: float = HEADER_TIMEOUT, is_trusted=lambda ssl_object: False) -> None:
        self.is_trusted = is_trusted
        self.per_peer = per_peer
        self.total = total
        self.header_timeout = header_timeout
        self.refused = 0
        self.evicted = 0
        self.timed_out = 0
        self._conns: OrderedDict[int, "_Guarded"] = OrderedDict()  # oldest first
        self._by_peer: dict[str, int] = {}

    @property
    def open(self) -> int:
        return len(self._conns)

    def admit(self, conn: "_Guarded") -> bool:
        if not conn.trusted and self._by_peer.get(conn.peer, 0) >= self.per_peer:
            self.refused += 1
            return False
        if len(self._conns) >= self.total:
            victim = next((c for c in self._conns.values() if c.waiting), None)
            if victim is None:
                self.refused += 1
                return False
            self.evicted += 1
            victim.close()
        self._conns[id(conn)] = conn
        if not conn.trusted:
            self._by_peer[conn.peer] = self._by_peer.get(conn.peer, 0) + 1
        return True

    def release(self, conn: "_Guarded") -> None:
        if self._conns.pop(id(conn), None) is not None and not conn.trusted:
            n = self._by_peer.get(conn.peer, 1) - 1
            if n > 0:
                self._by_peer[conn.peer] = n
            else:
                self._by_peer.pop(conn.peer, None)


class _Guarded(asyncio.Protocol):
    """Wraps aiohttp's per-connection protocol: admission, the header deadline, then every
    call passed straight through."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self.guard = guard
        self.inner = inner
        self.peer = "?"
        self.waiting = True  # no complete request header yet
        self._tail = b""
        self._timer: asyncio.TimerHandle | None = None
        self._transport: asyncio.Transport | None = None
        self._admitted = False
        self.trusted = False

    def connection_made(self, transport) -> None:
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = normalise_ip(str(peer[0])) if peer else "?"
        self.trusted = bool(self.guard.is_trusted(transport.get_extra_info("ssl_object")))
        if not self.guard.admit(self):
            transport.abort()
            return
        self._admitted = True
        self._timer = asyncio.get_running_loop().call_later(self.guard.header_timeout, self._too_slow)
        self.inner.connection_made(transport)

    def _too_slow(self) -> None:
        if self.waiting:
            self.guard.timed_out += 1
            self.close()

    def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.abort()

    def data_received(self, data: bytes) -> None:
        if not self._admitted:
            return
        if self.waiting:
            seen = self._tail + data[:8192]
            if b"\r\n\r\n" in seen:
                self.waiting = False
                if self._timer is not None:
                    self._timer.cancel()
            self._tail = seen[-3:]
        self.inner.data_received(data)

    def eof_received(self):
        return self.inner.eof_received() if self._admitted else None

    def connection_lost(self, exc) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.guard.release(self)
        if self._admitted:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


class GuardedSite(web.TCPSite):
    """:class:`aiohttp.web.TCPSite` whose connections go through a :class:`ConnectionGuard`."""

    def __init__(self, runner: web.AppRunner, host: str, port: int, *, guard: ConnectionGuard,
                 ssl_context=None) -> None:
        super().__init__(runner, host, port, ssl_context=ssl_context, reuse_address=True, backlog=256)
        self.guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)
        loop = asyncio.get_running_loop()
        server = self._runner.server
        assert server is not None
        self._server = await loop.create_server(
            lambda: _Guarded(self.guard, server()), self._host, self._port, ssl=self._ssl_context,
            backlog=self._backlog, reuse_address=self._reuse_address,
            ssl_handshake_timeout=HANDSHAKE_TIMEOUT if self._ssl_context else None)
        self._bound_port = self._server.sockets[0].getsockname()[1] if self._server.sockets else self._port
