"""The control API over real HTTPS on loopback: mutual TLS, PAKE pairing and its back-off,
validation, reports."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from agent import protocol as P
from agent.client import AgentClient, AgentError, KeyMismatch, measure_echo_rtt
from agent.identity import client_context, load_or_create
from agent.pairing import MasterExchange
from agent.weight_cache import WeightCache
from tls_clients import anon_http, master_http

MUTATING = [("POST", P.PATH_RPC_START, {}), ("POST", P.PATH_RPC_STOP, {})]
PROTECTED = MUTATING + [("GET", P.PATH_STATUS, None), ("GET", P.PATH_RPC_LOG, None),
                        ("GET", P.PATH_BANDWIDTH, None)]


async def test_public_endpoints_need_no_certificate(make_agent):
    agent = await make_agent()
    async with AgentClient(agent.api_url) as c:
        info = await c.info()
        assert info["id"] == agent.state.node_id
        # what a stranger needs to list and pair with the node, and no more (#25)
        assert set(info) == {"id", "name", "version", "engine", "ports"}
        assert info["ports"] == {"api": agent.api_port, "rpc": agent.rpc_port, "echo": agent.echo_port}
        assert (await c.ping())["ok"] is True
    async with anon_http(agent.api_url) as h:
        doc = (await h.get(P.PATH_OPENAPI)).json()
        assert set(doc["paths"]) >= {P.PATH_INFO, P.PATH_PAIR_START, P.PATH_RPC_START, P.PATH_BANDWIDTH}


async def test_plain_http_gets_no_answer(make_agent):
    """The API speaks only TLS: a plain-HTTP request (what a sniffer could read) gets nothing."""
    agent = await make_agent()
    async with httpx.AsyncClient() as h:
        with pytest.raises(httpx.HTTPError):
            await h.get(agent.api_url.replace("https://", "http://") + P.PATH_INFO)


async def test_protected_endpoints_refuse_without_a_paired_certificate(make_agent, tmp_path):
    agent = await make_agent()
    stranger = load_or_create(tmp_path / "stranger", "master", "stranger")
    async with anon_http(agent.api_url) as h:
        for method, path, body in PROTECTED:
            r = await h.request(method, path, json=body)
            assert r.status_code == 401, (method, path)
            assert "not paired" in r.json()["error"]
        # the old bearer tokens mean nothing now
        r = await h.post(P.PATH_RPC_START, json={}, headers={"Authorization": "Bearer " + "x" * 43})
        assert r.status_code == 401
    # a certificate the agent never pinned fails the handshake itself
    async with httpx.AsyncClient(base_url=agent.api_url,
                                 verify=client_context(stranger, agent.identity.cert_pem)) as h:
        with pytest.raises(httpx.HTTPError):
            await h.post(P.PATH_RPC_START, json={})
    assert agent.supervisor.state == P.STATE_STOPPED  # nothing changed
    assert agent.relay is None


async def test_client_reports_unpaired_clearly(make_agent, master_id):
    agent = await make_agent()
    async with AgentClient(agent.api_url, identity=master_id) as c:
        with pytest.raises(AgentError, match="not paired") as info:
            await c.rpc_start()
        assert info.value.status == 401


async def test_pairing_pins_both_keys_and_uses_up_the_pin(make_agent, master_id):
    agent = await make_agent()
    pin = agent.show_pin()
    async with AgentClient(agent.api_url, identity=master_id) as c:
        cert = await c.pair(pin, "laptop")
        assert c.fingerprint == agent.identity.fingerprint
        assert cert.encode() == agent.identity.cert_pem
        st = await c.status()
        assert st["masters"] == [{"name": "laptop", "fingerprint": master_id.fingerprint,
                                  "paired_at": st["masters"][0]["paired_at"]}]
        assert "paired" not in await c.info()  # a stranger is not told
    async with AgentClient(agent.api_url, identity=load_or_create(agent.state.folder / "m2", "m", "m2")) as c2:
        with pytest.raises(AgentError, match="no pairing PIN is shown"):
            await c2.pair(pin)  # the PIN was used up


async def test_a_wrong_pin_fails_key_confirmation(make_agent, master_id):
    agent = await make_agent()
    right = agent.show_pin()
    wrong = f"{(int(right) + 1) % 1_000_000:06d}"
    async with AgentClient(agent.api_url, identity=master_id) as c:
        with pytest.raises(AgentError, match="wrong PIN") as info:
            await c.pair(wrong)
        assert info.value.status == 403
    assert not agent.state.paired


async def test_no_pin_shown_no_pairing(make_agent, master_id):
    """A PIN is accepted only after `herd-agent pin` showed it, and only for a few minutes."""
    agent = await make_agent()
    async with AgentClient(agent.api_url, identity=master_id) as c:
        with pytest.raises(AgentError, match="no pairing PIN is shown") as info:
            await c.pair("123456")
        assert info.value.status == 403
    pin = agent.show_pin()
    data = json.loads(agent.pins.path.read_text())
    data["shown_at"] -= 301  # shown more than five minutes ago
    agent.pins.path.write_text(json.dumps(data))
    async with AgentClient(agent.api_url, identity=master_id) as c:
        with pytest.raises(AgentError, match="no pairing PIN is shown"):
            await c.pair(pin)
    assert not agent.state.paired


async def test_wrong_pins_back_off_per_address(make_agent, master_id):
    agent = await make_agent()
    right = agent.show_pin()
    wrong = f"{(int(right) + 1) % 1_000_000:06d}"
    async with anon_http(agent.api_url) as h:
        ex = MasterExchange(wrong, master_id.cert_der)
        r = await h.post(P.PATH_PAIR_START, json={"msg": ex.msg_a.hex()})
        assert r.status_code == 200
        r = await h.post(P.PATH_PAIR_FINISH, json={"session": r.json()["session"],
                                                    "cert": master_id.cert_pem.decode(),
                                                    "mac": ex.finish(bytes.fromhex(r.json()["msg"])).hex()})
        assert r.status_code == 403
        # the next attempt from this address must wait, whatever its PIN
        ex = MasterExchange(right, master_id.cert_der)
        r = await h.post(P.PATH_PAIR_START, json={"msg": ex.msg_a.hex()})
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    assert agent.pairing.backoff.wait("127.0.0.1") > 0
    # another address is not held back (the LAN test shows it with two real hosts)
    assert agent.pairing.backoff.wait("10.9.9.9") == 0
    assert not agent.state.paired


async def test_retired_endpoints_say_what_changed(make_agent):
    agent = await make_agent()
    async with anon_http(agent.api_url) as h:
        r = await h.post(P.PATH_PAIR, json={"pin": "123456"})
        assert r.status_code == 410 and "PAKE" in r.json()["error"]
        r = await h.post(P.PATH_PROVE, json={})
        assert r.status_code == 410


def _cached_file(cache: WeightCache, fingerprint: str) -> Path:
    """A weight-cache entry of the master with this fingerprint (as the worker names them)."""
    folder = cache.master_root(fingerprint) / "rpc"
    folder.mkdir(parents=True, exist_ok=True)
    entry = folder / "0123456789abcdef"
    entry.write_bytes(b"\0" * 4096)
    return entry


async def test_unpair_from_the_master_and_from_the_agent(paired, tmp_path):
    agent, client = paired
    fingerprint = client.identity.fingerprint
    cached = _cached_file(agent.weight_cache, fingerprint)
    await client.unpair()
    assert not agent.state.paired
    assert not cached.exists()  # its cached weights went with the pairing
    with pytest.raises(AgentError, match="not paired"):
        await client.status()
    # pair again, then unpair on the node (another process edits the state file)
    config = tmp_path / "agent.toml"
    config.write_text(f'cache_dir = "{tmp_path / "cache"}"\n')
    cached = _cached_file(WeightCache(tmp_path / "cache", 0), fingerprint)
    async with AgentClient(agent.api_url, identity=client.identity) as c:
        await c.pair(agent.show_pin(), "again")
        assert (await c.status())["masters"][0]["name"] == "again"
        from agent.main import main
        assert main(["--config", str(config), "--state-dir", str(agent.state.folder), "unpair", "again"]) == 0
        with pytest.raises(AgentError, match="not paired"):
            await c.status()
    assert not cached.exists()


async def test_a_pinned_client_refuses_another_key(paired, make_agent):
    agent, client = paired
    other = await make_agent()
    async with AgentClient(other.api_url, identity=client.identity, pinned=client.pinned) as c:
        with pytest.raises(KeyMismatch, match="not the key pinned"):
            await c.status()
        with pytest.raises(KeyMismatch):
            await c.info()
    assert other.supervisor.state == P.STATE_STOPPED


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
    async with master_http(client) as h:
        r = await h.post(P.PATH_RPC_START, json=body)
        assert r.status_code == 400
        assert r.json()["field"] == field and field in r.json()["error"]
    assert agent.supervisor.state == P.STATE_STOPPED


async def test_malformed_requests_are_4xx(paired):
    agent, client = paired
    auth = {}
    async with master_http(client) as h:
        r = await h.post(P.PATH_RPC_START, content=b"{not json", headers=auth)
        assert r.status_code == 400 and "JSON" in r.json()["error"]
        r = await h.post(P.PATH_RPC_START, content=b"[1,2]", headers=auth)
        assert r.status_code == 400 and "object" in r.json()["error"]
        r = await h.post(P.PATH_PAIR_START, json={"msg": 123456})
        assert r.status_code == 400 and r.json()["field"] == "msg"
        r = await h.post(P.PATH_PAIR_START, content=b"\xff\xfe")
        assert r.status_code == 400
        r = await h.post(P.PATH_PAIR_FINISH, json={"session": "0" * 32, "cert": "x", "mac": "00" * 32})
        assert r.status_code == 400 and r.json()["field"] == "cert"
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


async def test_deep_json_is_a_400_with_one_log_line(paired, caplog):
    """A 40 KB nested array (under the body cap) from a stranger to /pair/start, and from the
    paired master to /rpc/start: 400 in words and one log line, never a 500 or a traceback (#32)."""
    agent, client = paired
    deep = b"[" * 20_000 + b"]" * 20_000
    caplog.set_level("DEBUG", logger="herd.agent")
    async with anon_http(agent.api_url) as h:
        r = await h.post(P.PATH_PAIR_START, content=deep)
        assert r.status_code == 400 and "nested deeper than" in r.json()["error"]
    async with master_http(client) as h:
        r = await h.post(P.PATH_RPC_START, content=b'{"port": ' + deep + b"}")
        assert r.status_code == 400 and "nested deeper than" in r.json()["error"]
        # a string full of brackets is not nesting
        r = await h.post(P.PATH_RPC_START, json={"devices": ["[" * 40]})
        assert r.status_code == 400 and r.json()["field"] == "devices"
    refusals = [rec for rec in caplog.records if "nests deeper" in rec.getMessage()]
    assert len(refusals) == 2 and not any(rec.exc_info for rec in caplog.records)
    assert not any("Traceback" in rec.getMessage() or "RecursionError" in rec.getMessage() for rec in caplog.records)
    assert agent.supervisor.state == P.STATE_STOPPED


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
    async with master_http(client) as h:
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


async def test_start_without_an_installed_worker_is_refused_clearly(make_agent, monkeypatch, tmp_path, master_id):
    # a machine with no engine: empty data dir, nothing on PATH
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("HERD_ENGINE_DIR", raising=False)
    agent = await make_agent()
    assert agent.engine.rpc_server is None
    async with AgentClient(agent.api_url, identity=master_id) as c:
        await c.pair(agent.show_pin())
        with pytest.raises(AgentError, match="no ggml-rpc-server") as info:
            await c.rpc_start()
        assert info.value.status == 409
        assert (await c.status())["rpc"]["state"] == P.STATE_STOPPED
