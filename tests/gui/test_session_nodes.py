"""The session's node calls go to discovery by name, not by a string (#33): adding a node by
address and pairing it with its PIN, also when asked for before discovery has started, and a
clear refusal in words when discovery never starts."""

from __future__ import annotations

import pytest

from gui.session import ClusterSession


@pytest.fixture
def session(bridge, tmp_path, monkeypatch):
    """A session on loopback with its own config (pinned keys), not started, closed afterwards."""
    monkeypatch.setenv("HERD_CONFIG_DIR", str(tmp_path / "config"))
    s = ClusterSession(bridge, interfaces=["127.0.0.1"], browse=False)
    yield s
    s.close()


def test_a_node_added_and_paired_as_the_window_opens_waits_for_discovery(qtbot, session, agents):
    """The address and the PIN are asked for before discovery runs (the window opening): both
    wait for it, then reach the real agent."""
    agent = agents.agents[0]
    added = session.add_address(agent.address)  # before start(): discovery is not there yet
    assert session.discovery is None
    with qtbot.waitSignal(added.finished, timeout=30000) as got:
        session.start([])
    node = got.args[0]
    assert f"{node.host}:{node.api_port}" == agent.address and not node.paired
    with qtbot.waitSignal(session.pair(node.id, agent.pin).finished, timeout=30000):
        pass
    assert session.discovery.nodes[node.id].paired


def test_pairing_without_discovery_says_so_in_words(qtbot, session):
    """Discovery never started: the PIN is refused with a sentence, not Python's words about
    a missing attribute."""
    call = session.pair("some-node", "123456")
    with qtbot.waitSignal(call.failed, timeout=30000) as got:
        pass
    message = str(got.args[0])
    assert "Looking for nodes has not started yet" in message
    assert "NoneType" not in message and "attribute" not in message
