"""Who answers at an address is decided by the key pinned at pairing, not by a token or a proof.

The old identity proof (``POST /api/v1/prove``, an HMAC keyed by the token's hash) let anyone
with a sniffed token pass it; it is retired. These tests check what replaced it over real HTTPS
on loopback: a copy of a node's id and state without its private key is refused before a
request is sent, and the retired endpoint says what changed."""

from __future__ import annotations

import shutil

import pytest
from tls_clients import anon_http

from agent import protocol as P
from agent.client import AgentClient, KeyMismatch


async def test_the_retired_proof_endpoint_says_what_changed(paired):
    agent, _client = paired
    async with anon_http(agent.api_url) as h:
        r = await h.post(P.PATH_PROVE, json={"token_id": "0" * 16, "nonce": "ab" * 32})
        assert r.status_code == 410 and "pinned TLS keys" in r.json()["error"]


async def test_a_copy_of_the_nodes_id_and_pairings_without_its_key_is_refused(paired, make_agent, tmp_path):
    agent, client = paired
    # A rogue copies the state file (node id and pinned master) but not the private key.
    rogue_dir = tmp_path / "rogue"
    rogue_dir.mkdir()
    shutil.copy(agent.state.path, rogue_dir / agent.state.path.name)
    from agent.daemon import Agent
    from agent.settings import Settings, load_state
    rogue = Agent(Settings(name="rogue", bind="127.0.0.1", api_port=0, echo_port=0, mdns=False,
                           rpc_port=0), load_state(rogue_dir))
    await rogue.start()
    try:
        assert rogue.state.node_id == agent.state.node_id
        assert rogue.identity.fingerprint != agent.identity.fingerprint
        async with AgentClient(rogue.api_url, identity=client.identity, pinned=client.pinned,
                               node_id=agent.state.node_id) as c:
            with pytest.raises(KeyMismatch, match="not the key pinned"):
                await c.status()
            with pytest.raises(KeyMismatch):
                await c.rpc_start()
        assert rogue.supervisor.state == P.STATE_STOPPED
    finally:
        await rogue.close()
    # the real node still answers the same client
    assert (await client.status())["id"] == agent.state.node_id


async def test_the_agent_key_is_stable_and_owner_only(paired):
    agent, _client = paired
    key = agent.identity.key_path
    assert key.stat().st_mode & 0o777 == 0o600
    from agent.identity import load_or_create
    again = load_or_create(key.parent, "agent", "x")
    assert again.fingerprint == agent.identity.fingerprint
