"""The whole flow on loopback, everywhere (no root needed): two real herd-agents on 127.0.0.1 with
distinct ports, added by address; ``herd nodes``, ``herd pair``, ``herd up`` with a non-default
split; llama-server's own placement report equals the plan; a chat completion through the
endpoint; after SIGINT nothing herd started is left running."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import httpx
import pytest
from cluster.agents import start_agent
from conftest import free_port
from e2e.herd_cli import HERD, HerdUp, gone, herd, rpc_children

from agent.client import AgentClient
from gui.cluster.chat.client import chat
from gui.cluster.nodes.records import TokenStore, master_identity

pytestmark = [pytest.mark.engine, pytest.mark.slow]


@pytest.fixture
def herd_env(tmp_path):
    env = dict(os.environ)
    env["HERD_CONFIG_DIR"] = str(tmp_path / "master-config")
    return env


async def test_loopback_cluster_flow(engine, demo_model, procs, tmp_path, herd_env):
    alpha = start_agent(procs.popen, tmp_path, "alpha", mdns=False)
    beta = start_agent(procs.popen, tmp_path, "beta", mdns=False)

    r = herd(["nodes", "--no-mdns", "--add", alpha.api_url, "--add", beta.api_url, "--json"], herd_env)
    assert r.returncode == 0, r.stderr
    listed = {n["id"]: n for n in json.loads(r.stdout)}
    assert set(listed) == {alpha.node_id, beta.node_id}
    assert listed[alpha.node_id]["name"] == "alpha" and not listed[alpha.node_id]["paired"]

    for agent in (alpha, beta):
        r = herd(["pair", agent.api_url.removeprefix("https://"), "--pin", agent.pin()], herd_env)
        assert r.returncode == 0, r.stderr
        assert f"paired with {agent.name} ({agent.node_id})" in r.stdout
    tokens = TokenStore(tmp_path / "master-config" / "pairings.json")
    assert set(tokens.all()) == {alpha.node_id, beta.node_id}

    # Not the default (by free memory, which would put nearly everything on the workers evenly):
    # host keeps slot 0, alpha 3 slots, beta 5 (with the output layer).
    port = free_port()
    up = HerdUp(procs.popen(HERD + ["up", demo_model, "--no-mdns", "--split", "alpha=3,beta=5",
                                    "--ctx", "512", "--port", str(port), "--threads", "1",
                                    "--stats", "0.2"],
                            env=herd_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    up.wait_for("Serving", 120)
    a_ep, b_ep = f"127.0.0.1:{alpha.rpc_port}", f"127.0.0.1:{beta.rpc_port}"
    assert up.placement() == {"host": [0], a_ep: [1, 2, 3], b_ep: [4, 5, 6, 7, 8]}
    assert any(ln.startswith("Placement matches the plan.") for ln in up.lines)
    # Start-up progress by the byte: each worker's slice, complete once llama-server serves (#16).
    loaded = [ln for ln in up.lines if ln.startswith("weights [")]
    assert loaded and "100.0%" in loaded[-1] and "alpha: " in loaded[-1] and "beta: " in loaded[-1], loaded
    # By default (-lv 4) the placement is read off each device's weights.
    assert "Checked from the weights llama-server reports per device:" in up.lines
    assert any(ln.strip().startswith(f"{a_ep} (RPC0) holds slots 1-3 as planned") for ln in up.lines)
    assert any(ln.strip().startswith(f"{b_ep} (RPC1) holds slots 4-8 as planned") for ln in up.lines)
    assert up.endpoint() == f"http://127.0.0.1:{port}"
    servers = up.server_pids()
    assert len(servers) == 1
    workers = rpc_children(alpha.proc.pid) + rpc_children(beta.proc.pid)
    assert len(workers) == 2

    async with httpx.AsyncClient() as client:
        done = await chat(client, up.endpoint(), [{"role": "user", "content": "Hello, herd."}],
                          max_tokens=200)
    assert done.timings["predicted_n"] == 200 and done.text
    # --stats prints the decode rate of the interval in which the reply finished.
    up.wait_for("stats: decode", 10)
    stats = next(ln for ln in up.lines if ln.startswith("stats: decode"))
    assert float(stats.split()[2]) == pytest.approx(done.predicted_per_second, rel=0.03)
    assert "alpha rtt" in stats and "beta rtt" in stats

    # Export the running cluster as a profile (with start scripts).
    profile = tmp_path / "cluster.json"
    r = herd(["export", "-o", profile, "--scripts", tmp_path / "scripts"], herd_env)
    assert r.returncode == 0, r.stderr
    saved = json.loads(profile.read_text())
    assert set(saved["nodes"]) == {alpha.node_id, beta.node_id}
    assert [(a["device"]["node_name"], a["count"]) for a in saved["plan"]["assignments"]] == [
        ("alpha", 3), ("beta", 5)]
    assert saved["plan"]["host_layers"] == 1 and saved["server"]["port"] == port
    assert (tmp_path / "scripts" / "start-master.sh").is_file()

    await _stop(up, servers, workers)
    for agent in (alpha, beta):
        async with AgentClient(agent.api_url, identity=master_identity(tokens.path.parent), pinned=tokens.get(agent.node_id)) as c:
            assert (await c.status())["rpc"]["state"] == "stopped"
    r = herd(["export", "-o", tmp_path / "again.json"], herd_env)
    assert r.returncode == 1 and "no cluster is running" in r.stderr

    # Launch the same cluster again from the profile (on another port).
    port2 = free_port()
    again = HerdUp(procs.popen(HERD + ["up", profile, "--no-mdns", "--port", str(port2)],
                               env=herd_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    again.wait_for("Serving", 120)
    assert again.placement() == {"host": [0], a_ep: [1, 2, 3], b_ep: [4, 5, 6, 7, 8]}
    assert again.endpoint() == f"http://127.0.0.1:{port2}"
    # A service manager stops it with SIGTERM: the same clean stop.
    await _stop(again, again.server_pids(), rpc_children(alpha.proc.pid) + rpc_children(beta.proc.pid),
                signal.SIGTERM)


async def _stop(up: HerdUp, servers: list[int], workers: list[int], sig=signal.SIGINT) -> None:
    assert servers and workers
    up.proc.send_signal(sig)
    assert up.proc.wait(timeout=30) == 0, "\n".join(up.lines)
    assert gone(servers) and gone(workers), "a process herd started is still running"
    assert any("Stopped: llama-server and the workers herd started." in ln for ln in up.lines)
