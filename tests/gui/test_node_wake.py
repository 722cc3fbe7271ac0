"""The node card's *Wake* button (#36): a paired node that stops answering and whose MAC this
master keeps gets a Wake button; a click sends its magic packet, which a UDP listener receives.

Real demo agent on loopback and the real window. Stand-in: loopback has no MAC address and no
broadcast address, so the agent reports none there; the test keeps one with the pairing (as
discovery does on a LAN, see tests/e2e/test_wake_on_lan.py) whose "broadcast" address is
127.0.0.1, where the listener stands in for the sleeping PC's network card.
"""

from __future__ import annotations

import select
import socket

import pytest

from gui.cluster.nodes.wake import WAKE_PORTS, WakeTarget
from person import add_node_by_address, click, pair_by_card

pytestmark = pytest.mark.engine

MAC = "02:00:5e:10:00:01"


@pytest.fixture
def listeners():
    """UDP sockets on 127.0.0.1 ports 9 and 7: what a magic packet reaches."""
    socks = []
    for port in WAKE_PORTS:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", port))
        s.setblocking(False)
        socks.append(s)
    yield socks
    for s in socks:
        s.close()


def test_wake_button_sends_the_magic_packet_of_a_sleeping_paired_node(qtbot, make_window, agents, listeners):
    win = make_window(browse=False)
    a = agents.agents[0]
    add_node_by_address(qtbot, win, a.address)
    qtbot.waitUntil(lambda: any(f"{n.host}:{n.api_port}" == a.address for n in win.node_map.values()),
                    timeout=20000)
    nid = next(i for i, n in win.node_map.items() if f"{n.host}:{n.api_port}" == a.address)
    pair_by_card(qtbot, win, nid, a.pin)
    card = win.nodes.cards[nid]
    qtbot.waitUntil(lambda: win.node_map[nid].paired, timeout=15000)
    win.session.discovery.tokens.set_wake(nid, WakeTarget(mac=MAC, broadcast="127.0.0.1", api=a.address))
    assert not card.wake_button.isVisible()  # awake: nothing to wake

    a.proc.terminate()  # asleep: it stops answering
    a.proc.wait(timeout=10)
    qtbot.waitUntil(lambda: card.state.text() == "lost", timeout=20000)
    qtbot.waitUntil(card.wake_button.isVisible, timeout=5000)
    click(qtbot, card.wake_button)

    magic = b"\xff" * 6 + bytes.fromhex(MAC.replace(":", "")) * 16
    received = {}

    def arrived() -> bool:
        for s in select.select(listeners, [], [], 0)[0]:
            received[s.getsockname()[1]] = s.recv(2048)
        return len(received) == len(WAKE_PORTS)

    qtbot.waitUntil(arrived, timeout=10000)
    assert received == {port: magic for port in WAKE_PORTS}
    qtbot.waitUntil(lambda: win.nodes.message.text().startswith(f"Sent {card.name} a Wake-on-LAN packet ({MAC})"),
                    timeout=5000)
