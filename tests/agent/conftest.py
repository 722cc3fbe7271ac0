"""Fixtures for agent tests: an in-process agent on loopback, and a paired client for it."""

from __future__ import annotations

import os

import pytest

from agent.client import AgentClient
from agent.daemon import Agent
from agent.settings import Settings, load_state
from conftest import free_port


@pytest.fixture
def rpc_env(tmp_path) -> dict:
    """Environment for RPC workers: their tensor cache goes to the test's temp folder."""
    env = dict(os.environ)
    env["LLAMA_CACHE"] = str(tmp_path / "llama-cache")
    return env


@pytest.fixture
async def make_agent(tmp_path, rpc_env):
    """``await make_agent(**settings)`` → a started in-process :class:`Agent` on 127.0.0.1
    (mDNS off unless asked). Every agent made is closed after the test."""
    made: list[Agent] = []

    async def _make(**overrides) -> Agent:
        n = len(made)
        fields = {"name": f"test-agent-{n}", "bind": "127.0.0.1", "api_port": 0, "echo_port": 0,
                  "rpc_port": free_port(), "mdns": False}
        fields.update(overrides)
        state = load_state(tmp_path / f"state-{n}")
        agent = Agent(Settings(**fields), state, env=rpc_env)
        await agent.start()
        made.append(agent)
        return agent

    yield _make
    for agent in made:
        await agent.close()


@pytest.fixture
async def paired(make_agent):
    """``(agent, client)``: a started agent and a client that has paired with it."""
    agent = await make_agent()
    client = AgentClient(agent.api_url)
    await client.pair(agent.state.pin, "test-master")
    yield agent, client
    await client.aclose()


