"""A TCP proxy that adds a fixed one-way delay in each direction: a far link for benchmarks.

netem is not available in the kernels the simulated LAN runs on, so latency is added here, in
user space: every chunk read from one side is written to the other ``delay`` seconds after it
arrived. Chunks are queued with their due time instead of sleeping in the read loop, so a bulk
transfer (a model's weights) keeps its throughput and only its latency grows. ``TCP_NODELAY``
is set on both sockets: Nagle's algorithm would otherwise hold back the small RPC messages and
add its own, unplanned delay.

A request/reply round trip through the proxy therefore takes ``2 × delay`` longer.

Usage::

    python bench/delay_proxy.py --listen 127.0.0.1:6000 --target 10.77.0.2:50052 --delay-ms 10

prints ``listening on HOST:PORT`` once it accepts connections (``--listen HOST:0`` picks a free
port) and runs until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import socket
import sys
import time

CHUNK = 256 * 1024


def _nodelay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def parse_endpoint(text: str) -> tuple[str, int]:
    """``"host:port"`` → ``(host, port)``; raises ValueError naming the bad text."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


class DelayProxy:
    """Forward TCP connections from ``listen`` to ``target``, each direction ``delay`` s late.

    Attributes:
        delay: added one-way delay in seconds (a round trip gains twice this).
        target: ``(host, port)`` every accepted connection is forwarded to.
        address: ``(host, port)`` it listens on, once :meth:`start` returned.
    """

    def __init__(self, target: tuple[str, int], delay: float,
                 listen: tuple[str, int] = ("127.0.0.1", 0)) -> None:
        if delay < 0:
            raise ValueError(f"delay must not be negative, got {delay}")
        self.target = target
        self.delay = delay
        self._listen = listen
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self.address: tuple[str, int] | None = None

    async def start(self) -> None:
        """Start listening."""
        self._server = await asyncio.start_server(self._accept, *self._listen)
        self.address = self._server.sockets[0].getsockname()[:2]

    async def close(self) -> None:
        """Stop listening and drop every open connection."""
        if self._server is not None:
            self._server.close()
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        _nodelay(c_writer)
        try:
            try:
                t_reader, t_writer = await asyncio.open_connection(*self.target)
            except OSError:
                c_writer.close()
                return
            _nodelay(t_writer)
            try:
                await asyncio.gather(self._pipe(c_reader, t_writer), self._pipe(t_reader, c_writer),
                                     return_exceptions=True)
            except asyncio.CancelledError:
                pass  # close() drops open connections; not an error of this connection
            for w in (c_writer, t_writer):
                w.close()
        finally:
            self._tasks.discard(task)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy ``reader`` to ``writer``; each chunk leaves ``delay`` after it arrived."""
        queue: asyncio.Queue = asyncio.Queue()

        async def send() -> None:
            while True:
                due, data = await queue.get()
                if data is None:
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                    return
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()

        sender = asyncio.create_task(send())
        try:
            while True:
                data = await reader.read(CHUNK)
                queue.put_nowait((time.monotonic() + self.delay, data or None))
                if not data:
                    break
            await sender
        except (OSError, asyncio.IncompleteReadError):
            sender.cancel()
        finally:
            if not sender.done():
                sender.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await sender


async def _serve(args: argparse.Namespace) -> None:
    proxy = DelayProxy(parse_endpoint(args.target), args.delay_ms / 1000.0, parse_endpoint(args.listen))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await proxy.start()
    host, port = proxy.address
    print(f"listening on {host}:{port}", flush=True)
    await stop.wait()
    await proxy.close()


def main(argv: list[str] | None = None) -> int:
    """Run the proxy from the command line (see the module docstring)."""
    p = argparse.ArgumentParser(description="TCP proxy adding a fixed delay in each direction")
    p.add_argument("--listen", required=True, help="HOST:PORT to listen on (port 0: pick one)")
    p.add_argument("--target", required=True, help="HOST:PORT to forward to")
    p.add_argument("--delay-ms", type=float, required=True, help="one-way delay added per direction")
    args = p.parse_args(argv)
    try:
        parse_endpoint(args.listen)
        parse_endpoint(args.target)
    except ValueError as exc:
        p.error(str(exc))
    if args.delay_ms < 0:
        p.error(f"--delay-ms must not be negative, got {args.delay_ms}")
    asyncio.run(_serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
