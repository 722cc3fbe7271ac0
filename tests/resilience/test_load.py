"""Bounded load: a real herd-agent answers 200 API requests/s (5 s here) without an error, and a
loopback cluster of two real agents completes 8 concurrent chat streams. ``bench/agent_load.py``
runs the full 30 s and prints latencies."""

from __future__ import annotations

import pytest
from cluster.agents import start_agent
from conftest import free_port
from resilience.load import chat_streams, load_agent

from agent.client import AgentClient
from gui.cluster import plan as P
from gui.cluster.discovery import Discovery
from gui.cluster.launcher import ClusterLauncher, devices_from_status
from gui.cluster.model import inspect_model
from gui.cluster.nodes import TokenStore


async def test_agent_api_keeps_serving_200_requests_a_second(procs, tmp_path):
    agent = start_agent(procs.popen, tmp_path, "loaded", mdns=False)
    async with AgentClient(agent.api_url) as c:
        token = await c.pair(agent.pin())
    result = await load_agent(agent.api_url, token, rate=200, seconds=5)
    assert result.sent == 1000
    assert result.error_count == 0, result.errors
    assert len(result.latencies) == 1000
    assert agent.proc.poll() is None, "the agent died under load"


@pytest.mark.engine
@pytest.mark.slow
async def test_eight_concurrent_chat_streams_complete(engine, demo_model, procs, tmp_path):
    agents = [start_agent(procs.popen, tmp_path, name, mdns=False) for name in ("a", "b")]
    disc = Discovery(browse=False, tokens=TokenStore(tmp_path / "tokens.json"))
    launcher = None
    try:
        nodes, devices = {}, []
        for agent in agents:
            node = await disc.add_address(agent.api_url)
            await disc.pair(node, agent.pin())
            node = disc.nodes[node.id]
            nodes[node.id] = node
            async with disc.client(node) as c:
                devices.extend(devices_from_status(node, await c.status()))
        info = inspect_model(demo_model)
        plan = P.plan_from_split(info, devices, {"a": 4, "b": 5})
        launcher = ClusterLauncher(engine.llama_server, plan, demo_model, nodes, disc.client,
                                   ctx=8 * 128, port=free_port(), threads=1,
                                   extra_args=["-np", "8", "--threads", "1"])
        check = await launcher.start(120)
        assert check.ok, check.problems
        done = await chat_streams(launcher.spec.url, 8, max_tokens=16)
        assert [d.finish_reason for d in done] == ["length"] * 8
        assert all(d.timings.get("predicted_n") == 16 and d.text for d in done)
    finally:
        if launcher is not None:
            await launcher.stop()
        await disc.stop()
