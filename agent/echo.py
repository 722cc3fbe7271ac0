"""The UDP echo the master times link round trips with (TXT ``echo``).

An HTTP request costs more than a LAN round trip, so for the latency graph the agent answers
bare datagrams: whatever arrives (up to :data:`agent.protocol.ECHO_MAX_BYTES`) is sent back
unchanged. The reply is never larger than the request, so the echo can't amplify traffic.
"""

from __future__ import annotations

import asyncio

from agent import protocol as P


class _Echo(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.transport: asyncio.DatagramTransport | None = None
        self.answered = 0

    def connection_made(self, transport) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr) -> None:
        if 0 < len(data) <= P.ECHO_MAX_BYTES and self.transport is not None:
            self.transport.sendto(data, addr)
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
