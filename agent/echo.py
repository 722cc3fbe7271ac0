"""The UDP echo the master times link round trips with (TXT ``echo``).

An HTTP request costs more than a LAN round trip, so for the latency graph the agent answers
bare datagrams. Only a *request* is answered: a datagram that starts with
:data:`agent.protocol.ECHO_REQUEST` (up to :data:`agent.protocol.ECHO_MAX_BYTES` bytes) gets the
same bytes back with the tag changed to :data:`agent.protocol.ECHO_REPLY`, and a reply is never
answered. So one spoofed datagram between two agents' echo ports causes at most one reply (an
untagged echo bounced such a datagram between them for ever). The reply is never larger than
the request (no amplification), and each source address is answered at most
:data:`RATE` times a second (burst :data:`BURST`), however many sources there are (#25): a
source's budget is forgotten only once it has refilled (then forgetting it changes nothing), and
while :data:`MAX_SOURCES` sources all have budgets still refilling, a datagram from a new source
is not answered — it never pushes out another source's budget, which would come back full.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict

from agent import protocol as P

#: Answers per second and burst per source address.
RATE = 50.0
BURST = 20.0
#: Source addresses whose budget is remembered at once.
MAX_SOURCES = 1024


class _Echo(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.transport: asyncio.DatagramTransport | None = None
        self.answered = 0
        self.dropped = 0
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # ip -> (tokens, at)

    def connection_made(self, transport) -> None:
        self.transport = transport

    def _allow(self, ip: str) -> bool:
        now = time.monotonic()
        known = self._buckets.pop(ip, None)
        if known is None and not self._room(now):
            return False  # every remembered source is still refilling: none is pushed out
        tokens, at = known if known is not None else (BURST, now)
        tokens = min(BURST, tokens + (now - at) * RATE)
        ok = tokens >= 1.0
        self._buckets[ip] = (tokens - 1.0 if ok else tokens, now)  # most recent last
        return ok

    def _room(self, now: float) -> bool:
        """Forget budgets that have refilled (least recent first); True if one more fits."""
        buckets = self._buckets
        while buckets:
            _ip, (tokens, at) = next(iter(buckets.items()))
            if tokens + (now - at) * RATE < BURST:
                break  # still refilling: kept (a later one may be full, but stays too)
            buckets.popitem(last=False)
        return len(buckets) < MAX_SOURCES

    def datagram_received(self, data: bytes, addr) -> None:
        if not (len(P.ECHO_REQUEST) <= len(data) <= P.ECHO_MAX_BYTES and data.startswith(P.ECHO_REQUEST)):
            self.dropped += 1  # replies, untagged datagrams, oversized ones: never answered
            return
        if self.transport is None or not self._allow(addr[0]):
            self.dropped += 1
            return
        self.transport.sendto(P.ECHO_REPLY + data[len(P.ECHO_REQUEST):], addr)
        self.answered += 1

    def error_received(self, exc: Exception) -> None:  # e.g. ICMP from a vanished sender
        pass


class EchoServer:
    """A UDP echo on ``host:port`` (port 0 picks a free one; see :attr:`port` after start)."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._transport: asyncio.DatagramTransport | None = None
        self._proto: _Echo | None = None

    @property
    def answered(self) -> int:
        """Datagrams answered so far."""
        return self._proto.answered if self._proto else 0

    @property
    def dropped(self) -> int:
        """Datagrams not answered (not a request, or over the source's rate)."""
        return self._proto.dropped if self._proto else 0

    async def start(self) -> None:
        """Bind; :class:`OSError` if the port is taken."""
        loop = asyncio.get_running_loop()
        self._transport, self._proto = await loop.create_datagram_endpoint(
            _Echo, local_addr=(self.host, self.port))
        self.port = self._transport.get_extra_info("sockname")[1]

    def close(self) -> None:
        """Stop answering."""
        if self._transport is not None:
            self._transport.close()
            self._transport = None
