"""Connection hygiene for the control API: what keeps hosts on the LAN from starving the paired
master of the agent's attention or its file descriptors (#25).

Admission favours the owner. A connection whose TLS client certificate is a paired master's is
*trusted*; every other one is a *stranger's*. The two never compete:

* a trusted connection counts only against :data:`TRUSTED_TOTAL`, a budget of its own that no
  stranger can use up; at that cap the oldest trusted connection makes room (a master's client
  keeps a few keep-alive connections; more are old ones);
* a stranger's connection counts against :data:`TOTAL` (all strangers together) and
  :data:`PER_PEER` (one address); over the address cap it is closed at once, and at the total
  cap the stranger that has been connected longest is closed to make room — whatever it is
  doing, idle, between keep-alive requests, or trickling a body;
* every stranger's connection has a deadline for its whole life, :data:`STRANGER_LIFETIME`
  seconds: what a stranger may do (``info``, ``ping``, the two pairing steps) takes well under a
  second, so a connection kept open longer by requests every few seconds is closed all the same;
* every connection must finish its TLS handshake within :data:`HANDSHAKE_TIMEOUT` seconds and send
  a complete first request header within :data:`HEADER_TIMEOUT` seconds of it (a slowloris that
  trickles a header byte by byte is closed); an idle keep-alive connection is closed after
  :data:`KEEPALIVE_TIMEOUT` seconds (aiohttp);
* the file-descriptor limit is raised at start (:func:`raise_fd_limit`) so that the caps, not
  the OS, decide.

So a flood from any number of addresses delays only strangers, and the paired master's calls
are answered throughout (``tests/e2e/test_lan_attacks.py``).

:class:`GuardedSite` is an aiohttp site that wraps each connection's protocol to do this;
:class:`PeerErrorLog` is the logger it gives aiohttp, so that what a peer breaks is one
rate-limited line, not a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections import OrderedDict

from aiohttp import web

from agent.ratelog import RateLimitedLog
from agent.relay import normalise_ip

log = logging.getLogger("herd.agent.api")

HANDSHAKE_TIMEOUT = 10.0
HEADER_TIMEOUT = 10.0
KEEPALIVE_TIMEOUT = 15.0
#: Seconds a stranger's connection may stay open in all, whatever it does.
STRANGER_LIFETIME = 20.0
PER_PEER = 32
#: Strangers' connections open at once, all addresses together.
TOTAL = 512
#: Paired masters' connections open at once (their own budget).
TRUSTED_TOTAL = 128
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
    """Admits, caps and evicts connections (see the module docstring).

    Args:
        per_peer, total: the strangers' caps (one address, all together).
        trusted_total: the paired masters' own cap.
        header_timeout: seconds to the first complete request header.
        stranger_lifetime: seconds a stranger's connection may live.
        is_trusted: ``is_trusted(ssl_object)`` — is this a paired master's connection?

    Attributes:
        refused: connections closed at once (a stranger address over its cap).
        evicted: connections closed to make room at a total cap.
        timed_out: connections closed for a late header or the end of a stranger's lifetime.
    """

    def __init__(self, per_peer: int = PER_PEER, total: int = TOTAL,
                 header_timeout: float = HEADER_TIMEOUT, is_trusted=lambda ssl_object: False, *,
                 trusted_total: int = TRUSTED_TOTAL, stranger_lifetime: float = STRANGER_LIFETIME) -> None:
        self.is_trusted = is_trusted
        self.per_peer = per_peer
        self.total = total
        self.trusted_total = trusted_total
        self.header_timeout = header_timeout
        self.stranger_lifetime = stranger_lifetime
        self.refused = 0
        self.evicted = 0
        self.timed_out = 0
        # oldest first: the head of each is the connection that has waited longest
        self._strangers: OrderedDict[int, "_Guarded"] = OrderedDict()
        self._trusted: OrderedDict[int, "_Guarded"] = OrderedDict()
        self._by_peer: dict[str, int] = {}

    @property
    def open(self) -> int:
        """Connections open now (both kinds)."""
        return len(self._strangers) + len(self._trusted)

    @property
    def strangers(self) -> int:
        return len(self._strangers)

    @property
    def trusted(self) -> int:
        return len(self._trusted)

    def admit(self, conn: "_Guarded") -> bool:
        """Take ``conn`` in (making room if a cap is reached); False: close it at once."""
        if conn.trusted:
            pool, cap = self._trusted, self.trusted_total
        else:
            if self._by_peer.get(conn.peer, 0) >= self.per_peer:
                self.refused += 1
                return False
            pool, cap = self._strangers, self.total
        while len(pool) >= cap:
            _key, victim = pool.popitem(last=False)
            self._forget_peer(victim)
            self.evicted += 1
            victim.close()
        pool[id(conn)] = conn
        if not conn.trusted:
            self._by_peer[conn.peer] = self._by_peer.get(conn.peer, 0) + 1
        return True

    def release(self, conn: "_Guarded") -> None:
        pool = self._trusted if conn.trusted else self._strangers
        if pool.pop(id(conn), None) is not None:
            self._forget_peer(conn)

    def _forget_peer(self, conn: "_Guarded") -> None:
        if conn.trusted:
            return
        n = self._by_peer.get(conn.peer, 1) - 1
        if n > 0:
            self._by_peer[conn.peer] = n
        else:
            self._by_peer.pop(conn.peer, None)


class _Guarded(asyncio.Protocol):
    """Wraps aiohttp's per-connection protocol: admission, the header deadline and a stranger's
    lifetime, then every call passed straight through."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self.guard = guard
        self.inner = inner
        self.peer = "?"
        self.waiting = True  # no complete request header yet
        self._tail = b""
        self._header_timer: asyncio.TimerHandle | None = None
        self._life_timer: asyncio.TimerHandle | None = None
        self._transport: asyncio.Transport | None = None
        self._admitted = False
        self.trusted = False

    def connection_made(self, transport) -> None:
        # With TLS this runs once the handshake is done, so the client certificate is known.
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = normalise_ip(str(peer[0])) if peer else "?"
        self.trusted = bool(self.guard.is_trusted(transport.get_extra_info("ssl_object")))
        if not self.guard.admit(self):
            transport.abort()
            return
        self._admitted = True
        loop = asyncio.get_running_loop()
        self._header_timer = loop.call_later(self.guard.header_timeout, self._header_late)
        if not self.trusted:
            self._life_timer = loop.call_later(self.guard.stranger_lifetime, self._expired)
        self.inner.connection_made(transport)

    def _header_late(self) -> None:
        if self.waiting:
            self.guard.timed_out += 1
            self.close()

    def _expired(self) -> None:
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
                if self._header_timer is not None:
                    self._header_timer.cancel()
            self._tail = seen[-3:]
        self.inner.data_received(data)

    def eof_received(self):
        return self.inner.eof_received() if self._admitted else None

    def connection_lost(self, exc) -> None:
        for timer in (self._header_timer, self._life_timer):
            if timer is not None:
                timer.cancel()
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


#: What a peer causes by going away or by sending what is not HTTP: never the agent's fault.
PEER_ERRORS: tuple[type[BaseException], ...] = (ConnectionError, asyncio.IncompleteReadError,
                                                ssl.SSLError, EOFError, TimeoutError)


def _peer_caused(exc: BaseException | None) -> bool:
    from aiohttp import ClientConnectionResetError, http_exceptions  # noqa: PLC0415
    seen = 0
    while exc is not None and seen < 5:  # aiohttp wraps the socket's error at times
        if isinstance(exc, (*PEER_ERRORS, ClientConnectionResetError, http_exceptions.HttpProcessingError)):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


class PeerErrorLog:
    """The logger the agent gives aiohttp's request handler (``AppRunner(logger=…)``).

    aiohttp logs a client that resets in the middle of a body, or sends a malformed request, as
    an ERROR with a 30-line traceback — at will of anyone on the LAN, outside any limit. Here such
    a failure is one WARNING line naming the address and the error, at most a few a minute
    (:class:`~agent.ratelog.RateLimitedLog`); any other exception (a bug in the agent) keeps its
    traceback, rate-limited too. Debug records pass through.
    """

    def __init__(self, logger: logging.Logger = log, limited: RateLimitedLog | None = None) -> None:
        self.logger = logger
        self.limited = limited or RateLimitedLog(logger)

    def debug(self, msg, *args, **kw) -> None:
        kw.pop("exc_info", None)  # a peer's junk at debug level: the line is enough
        self.logger.debug(msg, *args, **kw)

    def info(self, msg, *args, **kw) -> None:
        self.logger.info(msg, *args, **kw)

    def warning(self, msg, *args, **kw) -> None:
        self.limited.log("api-warning", logging.WARNING, msg, *args)

    def error(self, msg, *args, exc_info=None, **kw) -> None:
        self.exception(msg, *args, exc_info=exc_info, **kw)

    def exception(self, msg, *args, exc_info=None, **kw) -> None:
        exc = exc_info if isinstance(exc_info, BaseException) else None
        if exc is None or _peer_caused(exc):
            # one line, printable, short: the text may quote what the peer sent
            text = "".join(ch if ch.isprintable() else " " for ch in " ".join(str(exc).split()))
            why = f"{type(exc).__name__}: {text[:160]}" if exc is not None else "no details"
            self.limited.log("api-peer", logging.WARNING, f"{msg} (%s)", *args, why)
            return
        if self.limited.allow("api-bug"):
            self.logger.error(msg, *args, exc_info=exc)
