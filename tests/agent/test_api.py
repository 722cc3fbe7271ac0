"""The control API over real HTTP on loopback: auth, pairing lockout, validation, reports."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from agent import protocol as P
from agent.client import AgentClient, AgentError, measure_echo_rtt

MUTATING = [("POST", P.PATH_RPC_START, {}), ("POST", P.PATH_RPC_STOP, {})]
PROTECTED = MUTATING + [("GET", P.PATH_STATUS, None), ("GET", P.PATH_RPC_LOG, None),
                        ("GET", P.PATH_BANDWIDTH, None)]


async def test_public_endpoints_need_no_token(make_agent):
    agent = await make_agent()
    async with AgentClient(agent.api_url) as c:
        info = await c.info()
        assert info["id"] == agent.state.node_id
        assert info["paired"] is False and info["rpc_state"] == P.STATE_STOPPED
        assert (await c.ping())["ok"] is True
    async with httpx.AsyncClient(base_url=agent.api_url) as h:
        doc = (await h.get(P.PATH_OPENAPI)).json()
        assert set(doc["paths"]) >= {P.PATH_INFO, P.PATH_PAIR, P.PATH_RPC_START, P.PATH_BANDWIDTH}


@pytest.mark.parametrize("token", [None, "wrong-token", "x" * 43])
async def test_protected_endpoints_refuse_without_a_valid_token(make_agent, token):
    agent = await make_agent()
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=agent.api_url) as h:
        for method, path, body in PROTECTED:
            r = await h.request(method, path, json=body, headers=headers)
            assert r.status_code == 401, (method, path)
            assert r.json()["error"] == "not paired / wrong token"
        # other auth schemes are not tokens either
        r = await h.post(P.PATH_RPC_START, json={}, headers={"Authorization": "Basic dXNlcjpwYXNz"})
        assert r.status_code == 401
    assert agent.supervisor.state == P.STATE_STOPPED  # nothing changed
    assert agent.relay is None


async def test_client_reports_401_clearly(make_agent):
    agent = await make_agent()
    async with AgentClient(agent.api_url, token="bogus") as c:
        with pytest.raises(AgentError, match="not paired / wrong token") as info:
            await c.rpc_start()
        assert info.value.status == 401


async def test_pairing_gives_a_token_that_works_and_rotates_the_pin(make_agent):
    agent = await make_agent()
    pin = agent.state.pin
    async with AgentClient(agent.api_url) as c:
        token = await c.pair(pin, "laptop")
        assert len(token) >= 32
        st = await c.status()
        assert st["masters"] == [{"name": "laptop", "addresses": ["127.0.0.1"],
                                  "paired_at": st["masters"][0]["paired_at"]}]
        assert (await c.info())["paired"] is True
        with pytest.raises(AgentError, match="wrong PIN"):
            await c.pair(pin)  # the PIN was used up


async def test_pin_brute_force_is_locked_out(make_agent):
    agent = await make_agent()
    right = agent.state.pin
    wrong = f"{(int(right) + 1) % 1_000_000:06d}"
    async with httpx.AsyncClient(base_url=agent.api_url) as h:
        codes = [(await h.post(P.PATH_PAIR, json={"pin": wrong})).status_code for _ in range(5)]
        assert codes == [403, 403, 403, 403, 429]
        r = await h.post(P.PATH_PAIR, json={"pin": right})
        assert r.status_code == 429, "the right PIN must not work during the lockout"
        assert int(r.headers["Retry-After"]) > 0
        assert "locked" in r.json()["error"]
    assert not agent.state.paired


@pytest.mark.parametrize("body, field", [
    ({"port": "50052"}, "port"),
    ({"port": 0}, "port"),
    ({"port": 70000}, "port"),
    ({"threads": True}, "threads"),
    ({"threads": 0}, "threads"),
    ({"devices": "CPU"}, "devices"),
    ({"devices": ["CPU; rm -rf /"]}, "devices"),
    ({"devices": [1]}, "devices"),
    ({"cache": "yes"}, "cache"),
    ({"colour": 1}, "colour"),
])
async def test_bad_rpc_start_bodies_name_the_field(paired, body, field):
    agent, client = paired
    async with httpx.AsyncClient(base_url=agent.api_url,
                                 headers={"Authorization": f"Bearer {client.token}"}) as h:
        r = await h.post(P.PATH_RPC_START, json=body)
        assert r.status_code == 400
        assert r.json()["field"] == field and field in r.json()["error"]
    assert agent.supervisor.state == P.STATE_STOPPED


async def test_malformed_requests_are_4xx(paired):
    agent, client = paired
    auth = {"Authorization": f"Bearer {client.token}"}
    async with httpx.AsyncClient(base_url=agent.api_url) as h:
        r = await h.post(P.PATH_RPC_START, content=b"{not json", headers=auth)
        assert r.status_code == 400 and "JSON" in r.json()["error"]
        r = await h.post(P.PATH_RPC_START, content=b"[1,2]", headers=auth)
        assert r.status_code == 400 and "object" in r.json()["error"]
        r = await h.post(P.PATH_PAIR, json={"pin": 123456})
        assert r.status_code == 400 and r.json()["field"] == "pin"
        r = await h.post(P.PATH_PAIR, content=b"\xff\xfe")
        assert r.status_code == 400
        r = await h.get(P.PATH_RPC_LOG, params={"tail": "-1"}, headers=auth)
        assert r.status_code == 400 and r.json()["field"] == "tail"
        r = await h.get(P.PATH_BANDWIDTH, params={"bytes": str(P.BANDWIDTH_MAX_BYTES + 1)}, headers=auth)
        assert r.status_code == 400 and r.json()["field"] == "bytes"
        r = await h.post(P.PATH_RPC_START, content=b"x" * 200_000, headers=auth)
        assert r.status_code == 413
        r = await h.get("/api/v1/nothing-here")
        assert r.status_code == 404 and "error" in r.json()
        r = await h.get(P.PATH_RPC_START, headers=auth)
        assert r.status_code == 405


async def test_status_reports_hardware_and_load(paired):
    agent, client = paired
    st = await client.status()
    hw = st["hardware"]
    assert hw["cpu_threads"] >= 1 and hw["ram_total_bytes"] > hw["ram_free_bytes"] > 0
    assert any(n["loopback"] for n in hw["nics"])
    assert all(isinstance(n["wifi"], bool) for n in hw["nics"])
    assert 0 <= st["load"]["cpu_percent"] <= 100 * hw["cpu_threads"]
    assert st["rpc"]["state"] == P.STATE_STOPPED and st["rpc"]["port"] == agent.rpc_port


async def test_bandwidth_streams_exactly_the_bytes_asked(paired):
    agent, client = paired
    async with httpx.AsyncClient(base_url=agent.api_url,
                                 headers={"Authorization": f"Bearer {client.token}"}) as h:
        r = await h.get(P.PATH_BANDWIDTH, params={"bytes": 1_000_003})
        assert r.status_code == 200 and len(r.content) == 1_000_003
    assert await client.bandwidth(4_000_000) > 1e6  # loopback moves well over 1 MB/s


async def test_echo_answers_round_trips(make_agent):
    agent = await make_agent()
    rtts = await measure_echo_rtt("127.0.0.1", agent.echo_port, count=5, timeout=1.0)
    assert len(rtts) == 5 and all(0 < r < 1.0 for r in rtts)
    assert agent.echo.answered == 5


async def test_echo_to_a_closed_port_raises(make_agent):
    from conftest import free_port
    with pytest.raises(AgentError, match="no echo"):
        await measure_echo_rtt("127.0.0.1", free_port(), count=2, timeout=0.2)


async def test_second_agent_on_a_taken_api_port_fails_clearly(make_agent):
    first = await make_agent()
    with pytest.raises(Exception, match=f"API port 127.0.0.1:{first.api_port}"):
        await make_agent(api_port=first.api_port)


async def test_start_without_an_installed_worker_is_refused_clearly(make_agent, monkeypatch, tmp_path):
    # a machine with no engine: empty data dir, nothing on PATH
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("HERD_ENGINE_DIR", raising=False)
    agent = await make_agent()
    assert agent.engine.rpc_server is None
    async with AgentClient(agent.api_url) as c:
        await c.pair(agent.state.pin)
        with pytest.raises(AgentError, match="no ggml-rpc-server") as info:
            await c.rpc_start()
        assert info.value.status == 409
        assert (await c.status())["rpc"]["state"] == P.STATE_STOPPED
