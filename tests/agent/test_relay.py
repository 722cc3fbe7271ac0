"""The RPC relay on its own, against a real TCP peer on loopback: integrity under load with
back-pressure, half-close passed through, refusals, and TCP_NODELAY on both legs."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import time

from agent.relay import RpcRelay, normalise_ip


async def echo_server():
    """A TCP echo on loopback (stands in for the worker: any byte stream will do)."""
    async def handle(reader, writer):
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def make_relay(target_port, allowed=("127.0.0.1",), ready=True):
    clients: list = []
    relay = RpcRelay("127.0.0.1", 0, is_allowed=lambda ip, _fp: ip in allowed,
                     target=lambda: ("127.0.0.1", target_port) if ready else None,
                     on_client=clients.append)
    await relay.start()
    return relay, clients


async def test_bytes_arrive_intact_both_ways_under_back_pressure():
    server, port = await echo_server()
    relay, clients = await make_relay(port)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
        payload = os.urandom(24 * 1024 * 1024)  # several times the relay's high-water mark

        async def send():
            for i in range(0, len(payload), 1 << 20):
                writer.write(payload[i:i + (1 << 20)])
                await writer.drain()
            writer.write_eof()  # half-close: the relay must pass it on, the echo then ends

        sender = asyncio.create_task(send())
        got = hashlib.sha256()
        n = 0
        while chunk := await asyncio.wait_for(reader.read(1 << 20), 30):
            got.update(chunk)
            n += len(chunk)
        await sender
        assert n == len(payload) and got.digest() == hashlib.sha256(payload).digest()
        writer.close()
        deadline = time.monotonic() + 10
        while not (clients and clients[-1] is None) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)  # the relay drops the pair once both sides are done
        assert clients == ["127.0.0.1", None]
        assert relay.bytes_to_worker == len(payload) == relay.bytes_from_worker
    finally:
        await relay.close()
        server.close()
        await server.wait_closed()


async def test_both_legs_set_tcp_nodelay():
    server, port = await echo_server()
    relay, _ = await make_relay(port)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
        writer.write(b"ping")
        assert await reader.readexactly(4) == b"ping"
        (_addr, front, back), = relay._active.values()
        for leg in (front, back):
            sock = leg.transport.get_extra_info("socket")
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        writer.close()
    finally:
        await relay.close()
        server.close()
        await server.wait_closed()


async def test_strangers_and_early_birds_are_closed_at_once():
    server, port = await echo_server()
    stranger_relay, _ = await make_relay(port, allowed=("10.9.9.9",))
    not_ready_relay, _ = await make_relay(port, ready=False)
    try:
        for relay in (stranger_relay, not_ready_relay):
            reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
            writer.write(b"hello")
            try:
                data = await asyncio.wait_for(reader.read(10), 5)
            except ConnectionResetError:
                data = b""
            assert data == b""
            assert relay.refused == 1 and not relay._active
            writer.close()
    finally:
        await stranger_relay.close()
        await not_ready_relay.close()
        server.close()
        await server.wait_closed()


def test_ipv4_mapped_addresses_are_normalised():
    assert normalise_ip("::ffff:10.0.0.2") == "10.0.0.2"
    assert normalise_ip("fe80::1%eth0") == "fe80::1"
    assert normalise_ip("10.0.0.2") == "10.0.0.2"
    assert normalise_ip("junk") == "junk"


async def test_early_bytes_and_eof_reach_the_worker_in_order():
    """A client that sends and half-closes before the relay reached the worker loses nothing."""
    server, port = await echo_server()
    relay, _ = await make_relay(port)
    try:
        with socket.create_connection(("127.0.0.1", relay.port)) as s:
            s.sendall(b"".join(i.to_bytes(4, "little") for i in range(50_000)))
            s.shutdown(socket.SHUT_WR)
            s.setblocking(False)
            loop = asyncio.get_running_loop()
            got = bytearray()
            while chunk := await asyncio.wait_for(loop.sock_recv(s, 1 << 16), 10):
                got += chunk
        assert bytes(got) == b"".join(i.to_bytes(4, "little") for i in range(50_000))
    finally:
        await relay.close()
        server.close()
        await server.wait_closed()
