"""Denial-of-service hygiene on loopback: the echo answers only tagged requests (so a spoofed
datagram between two agents causes one reply, not an endless ping-pong) at a rate per source that
no number of sources resets; the API closes a slowloris, caps connections per address, ends a
stranger's connection at its lifetime, evicts strangers (never the master) at the cap, and keeps
answering the paired master while a thousand idle connections are held open; pairing attempts
are served in turn."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time

import pytest

from agent import protocol as P
from agent.api_guard import raise_fd_limit
from agent.client import measure_echo_rtt
from agent.echo import BURST, EchoServer


async def _until(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


def _spoofed_udp(src: tuple[str, int], dst: tuple[str, int], payload: bytes) -> None:
    """Send one UDP datagram whose source address is forged (a raw socket; needs root)."""
    header = struct.pack("!HHHH", src[1], dst[1], 8 + len(payload), 0)  # checksum 0: none (IPv4)
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP) as raw:
        # without IP_HDRINCL the kernel writes the IP header with this socket's bound address
        raw.bind((src[0], 0))
        raw.sendto(header + payload, dst)


@pytest.mark.skipif(not hasattr(socket, "SOCK_RAW"), reason="needs raw sockets")
async def test_one_spoofed_datagram_between_two_echoes_causes_one_reply():
    import os
    if os.geteuid() != 0:
        pytest.skip("forging a source address needs root")
    a, b = EchoServer("127.0.0.1", 0), EchoServer("127.0.0.1", 0)
    await a.start()
    await b.start()
    try:
        # "from A's echo port to B's": B answers once, to A; A must not answer the reply.
        _spoofed_udp(("127.0.0.1", a.port), ("127.0.0.1", b.port), P.ECHO_REQUEST + b"loop")
        await _until(lambda: b.answered == 1 and a.dropped == 1, 5, "the reply did not reach A")
        assert a.answered == 0  # the chain ended at A
        # An untagged datagram (what the echo used to bounce) is not answered at all.
        _spoofed_udp(("127.0.0.1", a.port), ("127.0.0.1", b.port), b"anything")
        await _until(lambda: b.dropped == 1, 5, "B did not see the untagged datagram")
        assert (a.answered, b.answered) == (0, 1)
    finally:
        a.close()
        b.close()


async def test_the_echo_is_rate_limited_per_source():
    echo = EchoServer("127.0.0.1", 0)
    await echo.start()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as flood:
            flood.bind(("127.0.0.2", 0))
            for i in range(200):
                flood.sendto(P.ECHO_REQUEST + i.to_bytes(4, "little"), ("127.0.0.1", echo.port))
            await _until(lambda: echo.answered + echo.dropped == 200, 5, "the flood did not arrive")
        assert echo.answered <= BURST + 5  # the burst, and what the rate refilled meanwhile
        # another source is still answered, and the master's timer works
        rtts = await measure_echo_rtt("127.0.0.1", echo.port, count=3, timeout=1.0)
        assert len(rtts) == 3
    finally:
        echo.close()


async def test_a_slowloris_is_closed_after_the_header_timeout(paired):
    agent, client = paired
    agent.api_guard.header_timeout = 0.5
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    host, port = "127.0.0.1", agent.api_port
    reader, writer = await asyncio.open_connection(host, port, ssl=ctx, server_hostname="")
    writer.write(b"GET /api/v1/info HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
    await writer.drain()
    started = time.monotonic()
    assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the agent
    assert time.monotonic() - started < 3
    assert agent.api_guard.timed_out == 1
    writer.close()
    assert (await client.status())["id"] == agent.state.node_id


async def test_connections_per_address_are_capped(paired):
    agent, client = paired
    guard = agent.api_guard
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    held = []
    try:
        for _ in range(guard.per_peer + 5):
            try:  # one over the cap is closed once its handshake is done: either outcome here
                held.append(await asyncio.open_connection("127.0.0.1", agent.api_port, ssl=ctx,
                                                          server_hostname="", local_addr=("127.0.0.2", 0)))
            except (ConnectionError, ssl.SSLError):
                pass
        await _until(lambda: guard.refused >= 5, 5, "no connection over the cap was refused")
        assert guard.refused == 5
        # the master, from another address, is not held back
        assert (await client.status())["id"] == agent.state.node_id
    finally:
        for _r, w in held:
            w.close()


async def test_a_thousand_idle_connections_do_not_keep_the_master_out(paired):
    agent, client = paired
    assert raise_fd_limit() is None or raise_fd_limit() >= 2048
    socks = []
    try:
        for i in range(1000):
            s = socket.socket()
            s.setblocking(False)
            s.bind((f"127.0.{1 + i // 250}.{1 + i % 250}", 0))  # many addresses: the total cap
            try:
                s.connect(("127.0.0.1", agent.api_port))
            except BlockingIOError:
                pass
            socks.append(s)
        for _ in range(3):
            assert (await client.status())["id"] == agent.state.node_id
    finally:
        for s in socks:
            s.close()


async def test_a_strangers_keep_alive_connection_ends_at_its_lifetime_a_masters_does_not(paired):
    """#25: a request every few seconds kept a stranger's connection open for good."""
    agent, client = paired
    guard = agent.api_guard
    guard.stranger_lifetime = 1.0
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    reader, writer = await asyncio.open_connection("127.0.0.1", agent.api_port, ssl=ctx, server_hostname="")
    started = time.monotonic()
    closed_after = None
    while time.monotonic() - started < 5:
        writer.write(b"GET /api/v1/ping HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 2)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            closed_after = time.monotonic() - started
            break
        length = int(next(ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length"))
                     .split(b":")[1])
        await reader.readexactly(length)
        await asyncio.sleep(0.2)
    writer.close()
    assert closed_after is not None and 0.9 < closed_after < 3, closed_after
    # the paired master's client keeps one connection over the same time
    for _ in range(8):
        assert (await client.ping())["ok"]
        await asyncio.sleep(0.2)
    assert guard.trusted >= 1


async def test_strangers_at_the_cap_evict_each_other_never_the_master(paired):
    agent, client = paired
    guard = agent.api_guard
    guard.total = 8
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    assert (await client.status())["id"] == agent.state.node_id  # a trusted connection is open
    held = []
    try:
        for i in range(20):  # all past their header: no longer "waiting", evicted all the same
            r, w = await asyncio.open_connection("127.0.0.1", agent.api_port, ssl=ctx, server_hostname="",
                                                 local_addr=(f"127.0.3.{1 + i}", 0))
            w.write(b"GET /api/v1/ping HTTP/1.1\r\nHost: x\r\n\r\n")
            await r.readuntil(b"\r\n\r\n")
            held.append((r, w))
        await _until(lambda: guard.strangers <= 8 and guard.evicted >= 12, 5, "no eviction")
        assert guard.strangers == 8 and guard.trusted >= 1
        assert (await client.status())["id"] == agent.state.node_id  # the master, on its own budget
    finally:
        for _r, w in held:
            w.close()


async def test_the_attempt_gate_serves_sources_in_turn():
    from agent.pairing import AttemptGate
    gate = AttemptGate(rate=20.0, burst=1, max_wait=5.0)
    order: list[str] = []

    async def attempt(src: str) -> bool:
        ok = await gate.admit(src)
        if ok:
            order.append(src)
        return ok
    assert await attempt("flood-0")  # the burst
    floods = [asyncio.ensure_future(attempt(f"flood-{i}")) for i in range(1, 11)]
    await asyncio.sleep(0)  # they are in line
    again = await attempt("flood-1")  # one waiting attempt per source: a second is refused at once
    owner = asyncio.ensure_future(attempt("owner"))
    assert await owner and all(await asyncio.gather(*floods)) and not again
    assert order.index("owner") == 11  # after the ten already waiting, not behind any more
    assert gate.refused == 1


def test_the_pin_guessing_bound_holds_per_pin_shown():
    """10 digits, at most 10 000 attempts a PIN: a chance of 10⁻⁶; one window takes fewer."""
    from agent.pairing import GUESSES_PER_PIN, WINDOW_ATTEMPTS
    assert GUESSES_PER_PIN / 10 ** P.PIN_DIGITS <= 1e-6
    assert WINDOW_ATTEMPTS < GUESSES_PER_PIN


async def test_the_echo_forgets_no_source_that_is_still_refilling(monkeypatch):
    """#25: past 1,024 sources the oldest budget was dropped and came back full."""
    import agent.echo as echo_mod
    monkeypatch.setattr(echo_mod, "MAX_SOURCES", 4)
    proto = echo_mod._Echo()
    victim = "10.0.0.9"
    answered = sum(proto._allow(victim) for _ in range(int(BURST) + 5))
    for round_ in range(3):
        for i in range(10):
            proto._allow(f"10.1.{round_}.{i}")  # new sources, more than are remembered
        answered += proto._allow(victim)
    assert answered <= BURST + 1  # the burst, and what (a few ms of) refilling gave
