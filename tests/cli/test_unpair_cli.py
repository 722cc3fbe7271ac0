"""``herd key``, the KEY column of ``herd nodes`` and ``herd unpair NODE`` against a real agent on
loopback: after unpairing, the node has forgotten this master and this master the node."""

from __future__ import annotations

import json
import os

from cluster.agents import start_agent
from e2e.herd_cli import herd

from agent.identity import display_fingerprint, load_or_create


def test_herd_key_nodes_and_unpair(procs, tmp_path):
    env = {**os.environ, "HERD_CONFIG_DIR": str(tmp_path / "cfg")}
    agent = start_agent(procs.popen, tmp_path, "alpha", mdns=False)
    address = agent.api_url.removeprefix("https://")
    r = herd(["pair", address, "--pin", agent.pin()], env)
    assert r.returncode == 0, r.stderr
    r = herd(["key"], env)
    master_fp = load_or_create(tmp_path / "cfg", "master", "").fingerprint
    assert r.stdout.strip() == display_fingerprint(master_fp, 16)
    masters = json.loads((agent.state_dir / "agent-state.json").read_text())["masters"]
    assert [m["fingerprint"] for m in masters] == [master_fp]  # what the node pinned
    r = herd(["nodes", "--no-mdns"], env)
    node_fp = load_or_create(agent.state_dir, "agent", "").fingerprint
    assert display_fingerprint(node_fp, 4) in r.stdout, r.stdout  # the card's short form

    r = herd(["unpair", "alpha"], env)
    assert r.returncode == 0 and "unpaired alpha" in r.stdout, r.stdout + r.stderr
    assert json.loads((agent.state_dir / "agent-state.json").read_text())["masters"] == []
    r = herd(["nodes", "--no-mdns", "--json"], env)
    assert [n["paired"] for n in json.loads(r.stdout)] == [False]
    r = herd(["unpair", "alpha"], env)
    assert r.returncode == 2 and "no paired node" in r.stderr
