"""The identity proof (``POST /api/v1/prove``) over real HTTP on loopback: a paired master can
check an agent holds its pairing without the token crossing the wire; bad input is refused by
name; the endpoint is rate-limited."""

from __future__ import annotations

import httpx
import pytest

from agent import protocol as P
from agent.client import AgentClient, IdentityNotProven
from agent.pairing import hash_token, proof_mac, token_id


async def test_a_paired_agent_proves_its_identity_without_the_token_being_sent(paired):
    agent, client = paired
    nonce = bytes(range(32))
    async with httpx.AsyncClient(base_url=agent.api_url) as h:
        r = await h.post(P.PATH_PROVE, json={"token_id": token_id(client.token), "nonce": nonce.hex()})
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["address"] == "127.0.0.1" and reply["id"] == agent.state.node_id
    assert reply["mac"] == proof_mac(hash_token(client.token), nonce, agent.state.node_id, "127.0.0.1")
    # ... and a different nonce gives a different MAC (no replay of an old answer).
    async with httpx.AsyncClient(base_url=agent.api_url) as h:
        r2 = await h.post(P.PATH_PROVE, json={"token_id": token_id(client.token), "nonce": "ab" * 32})
    assert r2.json()["mac"] != reply["mac"]

    # The client's own check passes for the real agent.
    async with AgentClient(agent.api_url, token=client.token, node_id=agent.state.node_id) as c:
        await c.prove_identity()
        assert (await c.status())["id"] == agent.state.node_id
    await client.aclose()


async def test_the_client_refuses_an_agent_that_is_not_the_node_it_paired_with(paired):
    agent, client = paired
    # Right address, right pairing, but not the node id the master expects: no token sent.
    async with AgentClient(agent.api_url, token=client.token, node_id="someone-else") as c:
        with pytest.raises(IdentityNotProven, match=f"agent at {agent.api_url} claims to be node "
                                                    "someone-else.*does not match.*token was not sent"):
            await c.status()
    # A token this agent never issued: 404 from /prove, reported as not proven.
    async with AgentClient(agent.api_url, token="not-a-token-of-this-agent",
                           node_id=agent.state.node_id) as c:
        with pytest.raises(IdentityNotProven, match="could not prove the pairing"):
            await c.rpc_start()
    assert agent.supervisor.state == P.STATE_STOPPED
    await client.aclose()


@pytest.mark.parametrize("body, field", [
    ({"nonce": "00" * 16}, "token_id"),
    ({"token_id": "xyz", "nonce": "00" * 16}, "token_id"),
    ({"token_id": "0" * 16}, "nonce"),
    ({"token_id": "0" * 16, "nonce": "00" * 15}, "nonce"),       # too short
    ({"token_id": "0" * 16, "nonce": "00" * 65}, "nonce"),       # too long
    ({"token_id": "0" * 16, "nonce": "0g" * 16}, "nonce"),       # not hex
    ({"token_id": "0" * 16, "nonce": "00" * 16, "extra": 1}, "extra"),
])
async def test_bad_proof_requests_name_the_field(make_agent, body, field):
    agent = await make_agent()
    async with httpx.AsyncClient(base_url=agent.api_url) as h:
        r = await h.post(P.PATH_PROVE, json=body)
    assert r.status_code == 400 and r.json()["field"] == field, r.text


async def test_proofs_are_rate_limited(make_agent):
    agent = await make_agent()
    limit = agent.proof_limiter.rate
    codes = []
    async with httpx.AsyncClient(base_url=agent.api_url) as h:
        for _ in range(limit + 3):
            r = await h.post(P.PATH_PROVE, json={"token_id": "0" * 16, "nonce": "00" * 16})
            codes.append(r.status_code)
    assert codes[:limit] == [404] * limit  # unknown pairing, but answered
    assert codes[limit:] == [429] * 3 and int(r.headers["Retry-After"]) >= 1
