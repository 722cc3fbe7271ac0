"""Bounded load: a real herd-agent answers 200 API requests/s (5 s here) without an error, and a
loopback cluster of two real agents completes 8 concurrent chat streams. ``bench/agent_load.py``
runs the full 30 s and prints latencies."""

from __future__ import annotations

import re

import pytest
from cluster.agents import start_agent
from resilience.load import MIX, chat_streams, load_agent, loopback_cluster

from agent.client import AgentClient


async def test_agent_api_keeps_serving_200_requests_a_second(procs, tmp_path):
    agent = start_agent(procs.popen, tmp_path, "loaded", mdns=False)
    from agent.identity import client_context, load_or_create
    me = load_or_create(tmp_path, "master", "load master")
    async with AgentClient(agent.api_url, identity=me) as c:
        await c.pair(agent.pin())
        keys = client_context(me, c.pinned)  # what every call of the load presents
    logged = len(agent.lines)
    result = await load_agent(agent.api_url, keys, rate=200, seconds=5)
    assert result.error_count == 0, result.errors
    # every request of the mix answered, each with its kind of answer
    assert result.answered == {path: 1000 // len(MIX) for _, path, _ in MIX}, result.answered
    # The agent kept pace: requests are sent on a fixed schedule, so one that cannot keep up
    # falls behind it and the latency grows through the run. A sanity bound, hundreds of times
    # what it takes here (bench/agent_load.py measures it), not a speed goal.
    assert result.percentile(0.95) < 1.0, f"p95 {result.percentile(0.95):.3f} s behind the schedule"
    # and the agent itself saw nothing go wrong (aiohttp logs a failed handler as an error)
    assert agent.proc.poll() is None, "the agent died under load"
    trouble = [ln for ln in agent.lines[logged:] if re.search(r" (WARNING|ERROR|CRITICAL) ", ln)]
    assert not trouble, trouble


@pytest.mark.engine
@pytest.mark.slow
async def test_eight_concurrent_chat_streams_complete(engine, demo_model, procs, tmp_path):
    async with loopback_cluster(engine.llama_server, demo_model, procs.popen, tmp_path,
                                parallel=8, ctx=8 * 128, threads=1) as launcher:
        done = await chat_streams(launcher.spec.url, 8, max_tokens=16)
    assert [d.finish_reason for d in done] == ["length"] * 8
    assert all(d.timings.get("predicted_n") == 16 and d.text for d in done)
