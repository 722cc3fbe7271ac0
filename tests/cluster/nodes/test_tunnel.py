"""The master's end of the encrypted RPC link, against a real paired agent and its real worker on
loopback: a forwarder per worker speaks the RPC protocol through the agent's TLS relay, a spec is
routed through it as a new spec, llama-server's report is mapped back to the worker, and closing
leaves nothing listening."""

from __future__ import annotations

import asyncio

import pytest
from cluster.agents import one_paired_node, start_worker

from agent.rpc_protocol import hello_async
from gui.cluster.llama.placement_log import Placement
from gui.cluster.llama.server_command import ServerSpec
from gui.cluster.nodes import tunnel

pytestmark = pytest.mark.engine


async def _hello(endpoint: str) -> str:
    host, _, port = endpoint.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        return await hello_async(reader, writer)
    finally:
        writer.close()
        await writer.wait_closed()


async def test_forwarders_carry_rpc_and_route_map_and_close(procs, tmp_path):
    async with one_paired_node(procs, tmp_path) as (_agent, node, disc), disc.client(node) as client:
        await start_worker(client)
        forwarders = await tunnel.open_forwarders([(node, client)])
        try:
            assert list(forwarders) == [node.rpc_endpoint]
            local = forwarders[node.rpc_endpoint].endpoint
            assert local.startswith("127.0.0.1:") and local != node.rpc_endpoint
            # the worker's RPC protocol, through TLS to the agent's relay
            assert (await _hello(local)).count(".") == 2

            spec = ServerSpec(model=tmp_path / "m.gguf", rpc=[node.rpc_endpoint, "10.9.9.9:50052"], ngl=9)
            routed = tunnel.route(spec, forwarders)
            assert routed.rpc == (local, "10.9.9.9:50052")  # a worker without a forwarder keeps its own
            assert spec.rpc == (node.rpc_endpoint, "10.9.9.9:50052")  # a new spec; the old one stands

            seen = Placement(devices=[("RPC0", local)], buffers={f"RPC0[{local}]": 3.26, "CPU_Mapped": 1.0})
            back = tunnel.unmap(seen, forwarders)
            assert back.devices == [("RPC0", node.rpc_endpoint)]
            assert back.buffers == {f"RPC0[{node.rpc_endpoint}]": 3.26, "CPU_Mapped": 1.0}
        finally:
            await tunnel.close_forwarders(forwarders)
        assert forwarders == {}
        with pytest.raises(OSError):
            await _hello(local)


async def test_forwarded_is_a_forwarder_for_the_time_of_a_block(procs, tmp_path):
    async with one_paired_node(procs, tmp_path) as (_agent, node, disc), disc.client(node) as client:
        await start_worker(client)
        async with tunnel.forwarded(node.rpc_endpoint, client) as local:
            assert local != node.rpc_endpoint
            assert (await _hello(local)).count(".") == 2
        with pytest.raises(OSError):
            await _hello(local)
        async with tunnel.forwarded(None, client) as nothing:  # nothing to forward
            assert nothing is None
