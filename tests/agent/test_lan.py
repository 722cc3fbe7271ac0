"""herd-agent on a simulated LAN (network namespaces, real multicast): discovery from a master
namespace, and the RPC relay admitting the paired master's key while refusing another host —
also when that host takes over the master's address; and a master PC that vanishes without a
word (power cut, Wi-Fi gone) letting go of the worker."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import free_port
from lan import Lan

MASTER_SCRIPT = str(Path(__file__).with_name("master_script.py"))
pytestmark = [pytest.mark.netns, pytest.mark.engine]

API, RPC, ECHO = 50050, 50052, 50053  # each namespace has its own ports: use the defaults


@pytest.fixture
def lan():
    with Lan(["m", "a", "b"]) as lan:
        yield lan


def start_worker(lan, host, tmp_path, agent_process, mdns_ip=None):
    state = tmp_path / host.name
    state.mkdir()
    argv = agent_process.argv(state, name=f"worker-{host.name}", bind="0.0.0.0", api_port=API,
                              rpc_port=RPC, echo_port=ECHO, mdns_ip=mdns_ip or host.ip)
    return agent_process.start(host.popen, argv, state).wait_ready()


def master(host, *args: str, timeout: float = 60) -> str:
    # the script runs by path: the project's root goes on its path whatever is installed
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = host.run([sys.executable, MASTER_SCRIPT, *args], timeout=timeout, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_master_discovers_two_workers(lan, tmp_path, engine, agent_process):
    a = start_worker(lan, lan["a"], tmp_path, agent_process)
    # b advertises on every interface it has (the default): inside its namespace that is the LAN
    b = start_worker(lan, lan["b"], tmp_path, agent_process, mdns_ip="all")
    found = json.loads(master(lan["m"], "browse", lan["m"].ip, "2", "10"))
    by_id = {adv["node_id"]: adv for adv in found["adverts"]}
    assert set(by_id) == {a.node_id, b.node_id}
    assert by_id[a.node_id]["addresses"] == [lan["a"].ip]
    assert by_id[b.node_id]["addresses"] == [lan["b"].ip]
    assert by_id[a.node_id]["api_port"] == API and by_id[a.node_id]["rpc_port"] == RPC
    assert found["elapsed"] < 3.0


def test_relay_admits_the_paired_master_only(lan, tmp_path, engine, agent_process):
    a = start_worker(lan, lan["a"], tmp_path, agent_process)
    pin = lan["a"].run([sys.executable, "-m", "agent.main", "--state-dir", str(a.state_dir), "pin"]).stdout.strip()
    keys = str(tmp_path / "master-keys")
    fp = master(lan["m"], "pair", f"https://{lan['a'].ip}:{API}", pin, keys)
    assert len(fp) == 64
    assert master(lan["m"], "probe", lan["a"].ip, str(RPC), keys) == "ok 7.0.0"
    # plain TCP from another host, and from the master's own host without its key
    for host in (lan["b"], lan["m"]):
        verdict = master(host, "probe", lan["a"].ip, str(RPC))
        assert verdict.startswith("refused"), verdict
    # and the paired master still gets in afterwards
    assert master(lan["m"], "probe", lan["a"].ip, str(RPC), keys) == "ok 7.0.0"


def test_a_device_that_takes_over_the_masters_address_gets_no_rpc_answer(lan, tmp_path, engine,
                                                                          agent_process):
    """The master leaves and the router gives its address to another device: that device is
    refused (the relay admits keys, not addresses)."""
    a = start_worker(lan, lan["a"], tmp_path, agent_process)
    pin = lan["a"].run([sys.executable, "-m", "agent.main", "--state-dir", str(a.state_dir), "pin"]).stdout.strip()
    keys = str(tmp_path / "master-keys")
    master(lan["m"], "pair", f"https://{lan['a'].ip}:{API}", pin, keys)
    assert master(lan["m"], "probe", lan["a"].ip, str(RPC), keys) == "ok 7.0.0"
    m, b = lan["m"], lan["b"]
    m.link(False)
    subprocess.run(["ip", "-n", b.ns, "addr", "del", f"{b.ip}/24", "dev", b.dev], check=True)
    subprocess.run(["ip", "-n", b.ns, "addr", "add", f"{m.ip}/24", "dev", b.dev], check=True)
    assert b.run(["ip", "-4", "addr", "show", b.dev]).stdout.count(m.ip) == 1
    verdict = master(b, "probe", lan["a"].ip, str(RPC))
    assert verdict.startswith("refused"), verdict


async def test_a_master_that_vanishes_lets_go_of_the_worker(make_agent, tmp_path, engine, monkeypatch):
    """A master whose PC loses power sends no FIN. TCP keepalive ends its RPC connection, and
    its lease then goes stale, so the worker is free for another master (before, the dead
    connection and the lease stayed for good)."""
    from agent import relay
    monkeypatch.setattr(relay, "KEEPALIVE_IDLE", 1)  # instead of 20 s, 5 s and 4 probes
    monkeypatch.setattr(relay, "KEEPALIVE_INTERVAL", 1)
    monkeypatch.setattr(relay, "KEEPALIVE_PROBES", 2)
    with Lan(["m"]) as lan:
        m = lan["m"]
        # this process is the worker's PC, on the bridge's address; the master runs in m
        agent = await make_agent(bind=lan.bridge_ip, rpc_port=free_port())
        agent.leases.idle = 0.5
        keys = str(tmp_path / "master-keys")
        await asyncio.to_thread(master, m, "pair", agent.api_url, agent.show_pin(), keys)
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        holder = m.popen([sys.executable, MASTER_SCRIPT, "hold", lan.bridge_ip, str(agent.rpc_port), keys],
                         stdout=subprocess.PIPE, text=True, env=env)
        said = await asyncio.to_thread(holder.stdout.readline)
        assert said.startswith("holding"), said
        assert agent.relay.client == m.ip and agent.leases.current() is not None

        async def until(condition, timeout: float) -> None:
            deadline = asyncio.get_running_loop().time() + timeout
            while not condition():
                assert asyncio.get_running_loop().time() < deadline, "timed out"
                await asyncio.sleep(0.1)

        m.link(False)  # the master's PC is gone: no FIN, no RST, nothing
        await until(lambda: agent.relay.client is None, 20)
        await until(lambda: agent.leases.current() is None, 5)
        holder.kill()
