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
import subprocess
import sys

import pytest

from cluster.agents import start_agent
from conftest import free_port
from e2e.test_wake_on_lan import SLEEPING_PC

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


def test_start_wakes_the_sleeping_node_of_the_split_and_launches(qtbot, make_window, tmp_path, demo_model):
    """Fails on the code before #36's launch part: Start refused at once ("Not reachable or not
    paired: sleepy.") and offered to start without it."""
    win = make_window(browse=False)
    api, rpc, echo = free_port(), free_port(), free_port()
    agent = start_agent(subprocess.Popen, tmp_path, "sleepy", api_port=api, rpc_port=rpc, echo_port=echo, mdns=False)
    try:
        win.add_node(f"127.0.0.1:{api}")
        qtbot.waitUntil(lambda: agent.node_id in win.node_map, timeout=20000)
        win.pair_node(agent.node_id, agent.pin())
        qtbot.waitUntil(lambda: agent.node_id in win.node_status, timeout=15000)
        win.session.discovery.tokens.set_wake(agent.node_id, WakeTarget(mac=MAC, broadcast="127.0.0.1",
                                                                        api=f"127.0.0.1:{api}"))
        assert win.open_model(str(demo_model))
        qtbot.waitUntil(lambda: win.editor.plan() is not None
                        and agent.node_id in {d.node_id for d in win.editor.plan().devices()}, timeout=10000)
        win.editor.ctx.setValue(512)
    finally:
        agent.proc.terminate()  # asleep
        agent.proc.wait(timeout=10)
    qtbot.waitUntil(lambda: not win.node_map[agent.node_id].reachable, timeout=20000)
    # the PC that wakes into the same agent on its magic packet (the LAN test's stand-in)
    pc = subprocess.Popen([sys.executable, "-c", SLEEPING_PC.replace('"0.0.0.0", 9', '"127.0.0.1", 9'), MAC,
                           "-m", "agent.main", "--config", str(agent.config), "--state-dir", str(agent.state_dir),
                           "--name", "sleepy", "--bind", "127.0.0.1", "--api-port", str(api), "--rpc-port",
                           str(rpc), "--echo-port", str(echo), "--no-mdns", "run"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert pc.stdout.readline().strip() == "asleep"
        seen = []
        win.session.wakeProgress.connect(lambda name, waited: seen.append(win.launch.status.text()))
        click(qtbot, win.launch.start_button)
        qtbot.waitUntil(lambda: win.launch.state in ("ready", "failed"), timeout=120000)
        assert win.launch.state == "ready", win.launch.status.text()
        assert seen and seen[0] == "Waking sleepy… 0 s", seen
        assert pc.stdout.readline().strip() == "woken"
        assert [d.node_id for d in win.editor.plan().devices() if d.node_id] == [agent.node_id]
        with qtbot.waitSignal(win.launch_flow.stop().finished, timeout=30000):
            pass
    finally:
        pc.terminate()
        pc.wait(timeout=15)
