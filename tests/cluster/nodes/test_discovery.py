"""Discovery with real herd-agent processes and real zeroconf, on loopback only: browse, TXT
updates, goodbye, nodes added by address, unreachable detection, pairing and its token file."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import time

import pytest
from cluster.agents import start_agent
from conftest import free_port
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

from agent import protocol as P
from agent.client import PAIR_RETRY_MAX_S, AgentError
from gui.cluster.nodes.discovery import ADDED, REMOVED, UPDATED, Discovery, parse_address
from gui.cluster.nodes.records import TokenStore

LOOPBACK = ["127.0.0.1"]


@pytest.mark.parametrize("text, want", [
    ("10.0.0.5", ("10.0.0.5", P.DEFAULT_API_PORT)),
    ("10.0.0.5:6000", ("10.0.0.5", 6000)),
    ("http://pc.local:6000/", ("pc.local", 6000)),
    ("[fe80::1]:6000", ("fe80::1", 6000)),
    ("fe80::1", ("fe80::1", P.DEFAULT_API_PORT)),
])
def test_parse_address(text, want):
    assert parse_address(text) == want


@pytest.mark.parametrize("bad", ["", "host:0", "host:99999", "host:abc", "a b", "[::1"])
def test_parse_address_rejects_with_the_input_named(bad):
    with pytest.raises(ValueError, match="port|address|'\\['"):
        parse_address(bad)


def test_pairing_store_is_private_atomic_and_refuses_a_corrupt_file(tmp_path):
    from agent.identity import fingerprint_of_pem, load_or_create
    c1 = load_or_create(tmp_path / "k", "a1", "a1").cert_pem.decode()
    c2 = load_or_create(tmp_path / "k", "a2", "a2").cert_pem.decode()
    store = TokenStore(tmp_path / "cfg" / "pairings.json")
    assert store.get("n1") is None
    store.put("n1", c1, name="alpha")
    store.put("n2", c2)
    assert store.all() == {"n1": c1, "n2": c2}
    assert store.fingerprint("n1") == fingerprint_of_pem(c1)
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
    assert [p.name for p in store.path.parent.iterdir()] == ["pairings.json"]  # no temp files left
    store.forget("n1")
    assert store.all() == {"n2": c2}
    store.path.write_text("{not json")
    with pytest.raises(ValueError, match="pairings.json: not a llama-herd pairing file"):
        store.get("n2")


def test_an_old_token_file_loads_and_its_nodes_must_pair_again(tmp_path, monkeypatch):
    """Version 1 held bearer tokens: they are not used, and the nodes are listed as "pair again"."""
    import json
    monkeypatch.setenv("HERD_CONFIG_DIR", str(tmp_path))
    (tmp_path / "tokens.json").write_text(json.dumps({"version": 1, "tokens": {
        "n1": {"token": "t" * 43, "fingerprint": "", "name": "alpha", "paired_at": 1.0}}}))
    store = TokenStore()
    assert store.get("n1") is None and store.all() == {}
    assert store.legacy() == {"n1": "alpha"}


async def _events(disc: Discovery) -> list:
    got: list = []
    disc.subscribe(got.append)
    return got


async def test_browse_add_txt_update_and_goodbye(procs, tmp_path, engine):
    agent = start_agent(procs.popen, tmp_path, "alpha")
    tokens = TokenStore(tmp_path / "tokens.json")
    async with Discovery(LOOPBACK, tokens=tokens) as disc:
        events = await _events(disc)
        assert await disc.wait_until(lambda n: agent.node_id in n, 10), "agent not browsed"
        node = disc.nodes[agent.node_id]
        # unpaired: listed with what the node says in public, which is not its worker's state (#25)
        assert (node.name, node.host, node.via_mdns, node.state) == ("alpha", "127.0.0.1", True, "")
        assert node.api_url == agent.api_url and node.rpc_port == agent.rpc_port
        assert node.engine == "11434" and node.proto == "7.0.0"
        assert [e.kind for e in events if e.node.id == agent.node_id][0] == ADDED

        # Paired, the node is described by its authenticated API: its worker's state too.
        await disc.pair(node, agent.pin())
        assert tokens.get(agent.node_id) and disc.nodes[agent.node_id].paired
        assert disc.nodes[agent.node_id].state == "stopped"
        async with disc.client(node) as c:
            await c.rpc_start(threads=1)
            while (await c.status()).rpc.state != "ready":
                await asyncio.sleep(0.1)
        # a browse that sees the record anew asks the node again (its own API, not the record)
        async with Discovery(LOOPBACK, tokens=tokens) as again:
            assert await again.wait_until(lambda n: n.get(agent.node_id) and n[agent.node_id].state == "ready", 10)

        # A clean exit says goodbye: the node is removed.
        agent.proc.send_signal(signal.SIGTERM)
        assert await disc.wait_until(lambda n: agent.node_id not in n, 5), "no goodbye seen"
        assert events[-1].kind == REMOVED and events[-1].node.id == agent.node_id
    agent.proc.wait(timeout=10)


async def test_manual_node_marked_unreachable_within_10s_without_goodbye(procs, tmp_path):
    agent = start_agent(procs.popen, tmp_path, "beta", mdns=False)
    async with Discovery(browse=False, tokens=TokenStore(tmp_path / "t.json")) as disc:
        events = await _events(disc)
        node = await disc.add_address(agent.api_url)
        assert node.id == agent.node_id and node.manual and not node.via_mdns
        assert node.rpc_port == agent.rpc_port and node.echo_port == agent.echo_port
        assert await disc.wait_until(lambda n: n[agent.node_id].reachable, 5)
        agent.proc.kill()  # no goodbye, no TCP answer any more
        agent.proc.wait(timeout=5)
        t0 = time.monotonic()
        assert await disc.wait_until(lambda n: not n[agent.node_id].reachable, 10)
        took = time.monotonic() - t0
        assert took < 10
        assert events[-1].kind == UPDATED and not events[-1].node.reachable
        # It stays listed (added by hand), just unreachable.
        assert agent.node_id in disc.nodes


async def test_add_address_with_nothing_there_is_a_clear_error(tmp_path):
    async with Discovery(browse=False, tokens=TokenStore(tmp_path / "t.json")) as disc:
        port = free_port()
        with pytest.raises(AgentError, match=f"cannot reach agent at https://127.0.0.1:{port}"):
            await disc.add_address(f"127.0.0.1:{port}", timeout=2)
        assert disc.nodes == {}


async def test_wrong_pin_stores_nothing(procs, tmp_path):
    agent = start_agent(procs.popen, tmp_path, "gamma", mdns=False)
    tokens = TokenStore(tmp_path / "t.json")
    async with Discovery(browse=False, tokens=tokens) as disc:
        node = await disc.add_address(agent.api_url)
        right = agent.pin()
        wrong = "000000" if right != "000000" else "111111"
        with pytest.raises(AgentError, match="wrong PIN") as refused:
            await disc.pair(node, wrong)
        assert refused.value.status == 403
        assert not tokens.path.exists() and not disc.nodes[node.id].paired
        # Right after a mistyped PIN, the address backs off a second: the client waits that out,
        # as a person would before typing again, so the next wrong PIN is refused for the PIN...
        for _ in range(2):
            with pytest.raises(AgentError, match="wrong PIN") as refused:
                await disc.pair(node, wrong)
            assert refused.value.status == 403
        # ...but after three the address must wait 4 s, longer than the client waits by itself:
        # that is said, even with the right PIN, and nothing is stored
        with pytest.raises(AgentError, match="429") as refused:
            await disc.pair(node, right)
        assert refused.value.retry_after > PAIR_RETRY_MAX_S
        assert not tokens.path.exists() and not disc.nodes[node.id].paired


async def test_garbage_txt_is_ignored_and_browsing_goes_on(procs, tmp_path, caplog):
    """Rogue advertisers of the service type (no id, bad ports, binary junk) add nothing and
    break nothing; a real agent advertised afterwards is still found."""
    caplog.set_level("DEBUG", logger="gui.cluster.nodes.discovery")
    async with Discovery(LOOPBACK, tokens=TokenStore(tmp_path / "t.json")) as disc:
        rogue = AsyncZeroconf(interfaces=LOOPBACK)
        infos = [
            AsyncServiceInfo(P.SERVICE_TYPE, f"rogue{i}-{os.getpid()}.{P.SERVICE_TYPE}",
                             addresses=[bytes([127, 0, 0, 1])], port=free_port(), properties=props)
            for i, props in enumerate([
                {},
                {"id": "not-a-uuid", "api": "50050"},
                {"id": "3fad9d0b-e7b9-4536-8c45-ae3f35189aeb", "api": "99999"},
                {b"id": b"\xff\xfe\x00", b"api": b"\x00\x01"},
                # Well-formed, but no agent answers there.
                {"id": "0b0c5d6e-1111-4222-8333-944455556666", "api": str(free_port())},
            ])]
        try:
            for info in infos:
                await rogue.async_register_service(info)
            agent = start_agent(procs.popen, tmp_path, "delta")
            assert await disc.wait_until(lambda n: agent.node_id in n, 10)
            # Every rogue record was resolved and ignored (not merely missed).
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and len(_ignored(caplog)) < len(infos):
                await asyncio.sleep(0.05)
            assert _ignored(caplog) == {info.name for info in infos}
            assert not any(n.name.startswith("rogue") for n in disc.nodes.values())
            assert set(disc.nodes) & {"3fad9d0b-e7b9-4536-8c45-ae3f35189aeb",
                                      "0b0c5d6e-1111-4222-8333-944455556666"} == set()
        finally:
            for info in infos:
                await rogue.async_unregister_service(info)
            await rogue.async_close()


def _ignored(caplog) -> set[str]:
    return {r.args[0] for r in caplog.records
            if r.name == "gui.cluster.nodes.discovery" and r.msg.startswith("ignored mDNS record")}
