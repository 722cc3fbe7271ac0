"""``herd wake NODE`` when it cannot wake: the errors name what is missing and what to do (#36).
Sending the packet on a network: tests/e2e/test_wake_on_lan.py."""

from __future__ import annotations

import os

import pytest

from cluster.agents import start_agent
from e2e.herd_cli import herd


def test_a_node_never_seen_on_a_network_card_has_no_mac(procs, tmp_path):
    env = {**os.environ, "HERD_CONFIG_DIR": str(tmp_path / "cfg")}
    # on loopback the master reaches the agent through `lo`, which has no MAC to wake by
    agent = start_agent(procs.popen, tmp_path, "alpha", mdns=False)
    r = herd(["pair", agent.api_url.removeprefix("https://"), "--pin", agent.pin()], env)
    assert r.returncode == 0, r.stderr
    r = herd(["wake", "alpha"], env)
    assert r.returncode == 1
    assert r.stderr.strip() == ("herd wake: the MAC address of alpha is not known yet: herd learns it when "
                                "it reads the node while it is awake (open the app or run `herd nodes` "
                                "once it is on)")


def test_an_unknown_node_is_named(tmp_path):
    env = {**os.environ, "HERD_CONFIG_DIR": str(tmp_path / "cfg")}
    r = herd(["wake", "nobody"], env)
    assert r.returncode == 2
    assert r.stderr.strip() == "herd wake: no paired node is called 'nobody' (paired: none yet)"


@pytest.mark.engine
def test_herd_up_names_a_wake_wait_out_of_range(tmp_path, engine, demo_model):
    env = {**os.environ, "HERD_CONFIG_DIR": str(tmp_path / "cfg")}
    r = herd(["up", str(demo_model), "--no-mdns", "--wake-wait", "5000"], env)
    assert r.returncode == 2
    assert r.stderr.strip() == "herd up: --wake-wait: 5000 is out of range (0-3600 seconds)"
