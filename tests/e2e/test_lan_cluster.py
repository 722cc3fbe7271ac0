"""The whole flow on a simulated LAN: a master namespace and two worker namespaces with real
herd-agents advertising over real mDNS. The master finds them with ``herd nodes`` (mDNS only),
pairs, and runs ``herd up`` with a non-default split; llama-server's placement report equals the
plan; a chat completion goes through the endpoint; after SIGINT nothing herd started is left.
Needs root (network namespaces): skipped with the reason otherwise, failed in CI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import httpx
import pytest
from cluster.agents import start_agent
from conftest import free_port
from e2e.herd_cli import HERD, HerdUp, gone, herd, rpc_children
from lan import Lan

from agent.client import AgentClient
from gui.cluster.chat.client import chat
from gui.cluster.llama import server_process as L
from gui.cluster.llama.server_command import ServerOptions, ServerSpec
from gui.cluster.llama.server_start import serving
from gui.cluster.nodes.discovery import Discovery
from gui.cluster.nodes.records import TokenStore, master_identity

pytestmark = [pytest.mark.engine, pytest.mark.netns, pytest.mark.slow]

API, RPC, ECHO = 50050, 50052, 50053  # each namespace has its own ports: the defaults are free


@pytest.fixture
def lan():
    with Lan(["m", "a", "b"]) as lan:
        yield lan


async def test_lan_cluster_flow(engine, demo_model, tmp_path, lan):
    env = dict(os.environ)
    env["HERD_CONFIG_DIR"] = str(tmp_path / "master-config")
    m = lan["m"]
    agents = {name: start_agent(lan[name].popen, tmp_path, name, bind=lan[name].ip,
                                api_port=API, rpc_port=RPC, echo_port=ECHO)
              for name in ("a", "b")}

    # Discovery over mDNS alone (no --add): both workers, by id, at their namespace addresses.
    r = herd(["nodes", "--json", "--timeout", "3"], env, wrap=m.cmd)
    assert r.returncode == 0, r.stderr
    seen = {n["id"]: n for n in json.loads(r.stdout)}
    for name, agent in agents.items():
        n = seen[agent.node_id]
        assert (n["name"], n["host"], n["via_mdns"], n["rpc_port"]) == (name, lan[name].ip, True, RPC)

    for name, agent in agents.items():
        r = herd(["pair", f"{lan[name].ip}:{API}", "--pin", agent.pin()], env, wrap=m.cmd)
        assert r.returncode == 0, r.stderr
    tokens = TokenStore(tmp_path / "master-config" / "pairings.json")
    assert set(tokens.all()) == {a.node_id for a in agents.values()}

    # The endpoint listens on the master's LAN address so this test process can reach it.
    up = HerdUp(m.popen(HERD + ["up", demo_model, "--split", "a=5,b=2,host=2", "--ctx", "512",
                                "--host", m.ip, "--port", "8080", "--threads", "1", "--timeout", "3",
                                "--verify-layers"],
                        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    up.wait_for("Serving", 180)
    a_ep, b_ep = f"{lan['a'].ip}:{RPC}", f"{lan['b'].ip}:{RPC}"
    assert up.placement() == {"host": [0, 1], a_ep: [2, 3, 4, 5, 6], b_ep: [7, 8]}
    assert any(ln.startswith("Placement matches the plan.") for ln in up.lines)
    # --verify-layers: llama-server at -lv 5 names every layer's device.
    assert "Checked layer by layer (llama-server's per-layer lines):" in up.lines
    assert any(ln.startswith("Starting ") and " -lv 5" in ln for ln in up.lines)
    assert up.endpoint() == f"http://{m.ip}:8080"
    servers = up.server_pids()
    workers = rpc_children(agents["a"].proc.pid) + rpc_children(agents["b"].proc.pid)
    assert len(servers) == 1 and len(workers) == 2

    async with httpx.AsyncClient() as client:
        done = await chat(client, up.endpoint(), [{"role": "user", "content": "Hello, LAN."}],
                          max_tokens=16)
    assert done.timings["predicted_n"] == 16 and done.text

    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(timeout=30) == 0, "\n".join(up.lines)
    assert gone(servers) and gone(workers), "a process herd started is still running"
    for name, agent in agents.items():
        async with AgentClient(agent.api_url, identity=master_identity(tokens.path.parent), pinned=tokens.get(agent.node_id)) as c:
            assert (await c.status())["rpc"]["state"] == "stopped"


async def test_lan_discovery_pulled_cable(tmp_path, lan):
    """Browsing the simulated LAN from its bridge address: both agents are found over mDNS; a
    worker whose cable is pulled (no goodbye possible) is marked unreachable within 10 s, and
    reachable again once plugged back in."""
    agents = {name: start_agent(lan[name].popen, tmp_path, name, bind=lan[name].ip,
                                api_port=API, rpc_port=RPC, echo_port=ECHO)
              for name in ("a", "b")}
    ids = {a.node_id for a in agents.values()}
    async with Discovery([lan.bridge_ip], tokens=TokenStore(tmp_path / "t.json")) as disc:
        assert await disc.wait_until(lambda n: ids <= set(n), 10), disc.nodes
        b = disc.nodes[agents["b"].node_id]
        assert (b.host, b.via_mdns, b.reachable) == (lan["b"].ip, True, True)
        lan["b"].link(False)
        try:
            assert await disc.wait_until(lambda n: not n[b.id].reachable, 10)
            assert disc.nodes[agents["a"].node_id].reachable
        finally:
            lan["b"].link(True)
        assert await disc.wait_until(lambda n: n[b.id].reachable, 15)


async def test_llama_server_connecting_without_the_masters_link_is_refused_and_explained(
        engine, demo_model, tmp_path, lan):
    """The agent's relay admits only a paired master's key over TLS. A llama-server pointed at
    the worker directly (plain RPC, as before the encrypted link) — here even from the paired
    master's own namespace — is cut off at once, and the launcher says why in words."""
    env = dict(os.environ)
    env["HERD_CONFIG_DIR"] = str(tmp_path / "master-config")
    m, a_host = lan["m"], lan["a"]
    a = start_agent(a_host.popen, tmp_path, "a", bind=a_host.ip, api_port=API, rpc_port=RPC, echo_port=ECHO)
    r = herd(["pair", f"{a_host.ip}:{API}", "--pin", a.pin()], env, wrap=m.cmd)
    assert r.returncode == 0, r.stderr
    # The paired master (in its namespace) starts the worker.
    start = ("import asyncio, sys; from agent.client import AgentClient\n"
             "from gui.cluster.nodes.records import PairingStore, master_identity\n"
             "async def go():\n"
             "    store = PairingStore()\n"
             "    async with AgentClient(sys.argv[1], identity=master_identity(), pinned=store.get(sys.argv[2])) as c:\n"
             "        await c.rpc_start(threads=1)\n"
             "asyncio.run(go())\n")
    r = m.run([sys.executable, "-c", start, a.api_url, a.node_id], env=env)
    assert r.returncode == 0, r.stderr
    spec = ServerSpec(model=demo_model, rpc=[f"{a_host.ip}:{RPC}"], ngl=9, options=ServerOptions(ctx=256, host="127.0.0.1", port=free_port()))
    with pytest.raises(L.LaunchError, match="only a paired master's key through"):
        async with serving(engine.llama_server, spec, timeout=60):
            pass
