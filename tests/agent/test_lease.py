"""Leases on loopback with a real RPC worker: one master holds the worker at a time; another
paired master can neither start, stop nor reach it; an unused lease goes stale by itself, and
the master whose lease went stale and was taken over gets no RPC answer. The holder itself
gets two RPC connections at a time (its llama-server's, and one to reconnect). Two masters of the
same name (two PCs called alike, a master whose key was made again) are two masters."""

from __future__ import annotations

import asyncio
import time

import pytest

from agent import protocol as P
from agent.client import AgentClient, AgentError
from agent.identity import load_or_create
from agent.rpc_server import probe_rpc
from gui.cluster.nodes.tunnel import Forwarder

pytestmark = pytest.mark.engine


async def _reach(agent, client) -> str:
    """"ok" when the RPC worker answers through a forwarder with ``client``'s keys, else why not."""
    f = await Forwarder("127.0.0.1", agent.rpc_port, client.identity, client.pinned).start()
    try:
        host, port = f.endpoint.rsplit(":", 1)
        await probe_rpc(host, int(port), timeout=3.0)
        return "ok"
    except Exception as exc:  # a refusal shows as a closed connection
        return f"refused ({type(exc).__name__})"
    finally:
        await f.close()


async def _ready(client, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while (await client.status())["rpc"]["state"] != P.STATE_READY:
        assert time.monotonic() < deadline, "worker not ready"
        await asyncio.sleep(0.1)


@pytest.fixture
async def two_masters(paired, tmp_path):
    agent, first = paired
    second = AgentClient(agent.api_url, identity=load_or_create(tmp_path / "second", "master", "second"))
    await second.pair(agent.show_pin(), "second")
    yield agent, first, second
    await second.aclose()


async def test_one_master_holds_the_worker_at_a_time(engine, two_masters):
    agent, first, second = two_masters
    await first.rpc_start()
    await _ready(first)
    for call in (second.rpc_start, second.rpc_stop):
        with pytest.raises(AgentError, match="leased to master 'test-master'") as info:
            await call()
        assert info.value.status == 409
    assert await _reach(agent, second) != "ok"
    assert await _reach(agent, first) == "ok"
    # the holder gives it back: now the other master may take it
    await first.rpc_stop()
    await second.rpc_start()
    await _ready(second)
    assert await _reach(agent, second) == "ok"
    assert await _reach(agent, first) != "ok"


async def test_a_stale_lease_ends_and_its_master_gets_no_rpc_answer(engine, two_masters):
    agent, first, second = two_masters
    agent.leases.idle = 0.5  # instead of two minutes
    await first.rpc_start()
    await _ready(first)
    deadline = time.monotonic() + 10
    while agent.leases.current() is not None:  # nobody uses it: the lease goes stale
        assert time.monotonic() < deadline, "the lease did not go stale"
        await asyncio.sleep(0.05)
    # the worker still has the first master's weight cache: the other master must start it for
    # itself (which gives it its own cache) before it gets an RPC answer
    assert await _reach(agent, second) != "ok"
    await second.rpc_start()  # the worker is free for the other master
    await _ready(second)
    assert await _reach(agent, first) != "ok"  # the stale holder gets no RPC answer
    assert await _reach(agent, second) == "ok"


async def test_two_masters_of_the_same_name_both_get_through(engine, paired, tmp_path):
    """Each pinned certificate is a trust anchor of its own: one of the same subject name as
    another must not shadow it in the agent's TLS store."""
    agent, first = paired
    twin = AgentClient(agent.api_url, identity=load_or_create(tmp_path / "twin", "master", "test master"))
    try:
        await twin.pair(agent.show_pin(), "test-master")
        assert twin.identity.fingerprint != first.identity.fingerprint
        for client in (first, twin):  # the API, over mutual TLS
            assert (await client.status())["id"] == agent.state.node_id
        await twin.rpc_start()
        await _ready(twin)
        assert await _reach(agent, twin) == "ok"  # and the RPC relay
    finally:
        await twin.rpc_stop()
        await twin.aclose()


async def test_the_holder_gets_two_rpc_connections_at_a_time(engine, paired):
    """One for its llama-server and one for the moment it reconnects; a third is refused (the
    worker serves one at a time, so more would only queue there, holding sockets)."""
    agent, client = paired
    await client.rpc_start()
    await _ready(client)
    f = await Forwarder("127.0.0.1", agent.rpc_port, client.identity, client.pinned).start()
    held = []
    try:
        host, port = f.endpoint.rsplit(":", 1)
        for _ in range(2):
            held.append(await asyncio.open_connection(host, int(port)))
        deadline = time.monotonic() + 10
        while agent.relay.connections < 2:
            assert time.monotonic() < deadline, "the relay did not admit both connections"
            await asyncio.sleep(0.05)
        refused = agent.relay.refused
        assert await _reach(agent, client) != "ok"
        assert agent.relay.refused == refused + 1
        for _reader, writer in held:
            writer.close()
        held.clear()
        deadline = time.monotonic() + 10
        while agent.relay.connections:
            assert time.monotonic() < deadline, "the relay kept closed connections"
            await asyncio.sleep(0.05)
        assert await _reach(agent, client) == "ok"
    finally:
        for _reader, writer in held:
            writer.close()
        await f.close()
