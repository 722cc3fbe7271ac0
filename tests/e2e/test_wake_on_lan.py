"""Wake-on-LAN on the simulated LAN (#36): a master namespace and a worker namespace on a bridge.

The master pairs with the worker's real herd-agent, which reports the MAC of the interface the
master reaches it on; the master keeps it with the pairing. Then the agent stops — the PC is
asleep as far as the master can tell — and ``herd wake`` in the master's namespace makes the
magic packet for that MAC reach the worker's namespace, as a broadcast on UDP ports 9 and 7. A
sleeping PC's network card, which is what listens for it, cannot be had here: a UDP listener in
the worker's namespace stands in for it. Every packet stays on the bridge the test made.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from cluster.agents import start_agent
from e2e.herd_cli import herd
from lan import Lan

from gui.cluster.nodes.records import PairingStore

pytestmark = [pytest.mark.netns]

API, RPC, ECHO = 50050, 50052, 50053

# The stand-in for the sleeping PC's network card: listens on 0.0.0.0 ports 9 and 7 with
# SO_BROADCAST and prints, per datagram, the port, the destination address (IP_PKTINFO) and the
# payload, then exits after one datagram on each port.
LISTENER = r"""
import json, select, socket, sys
IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)  # Linux's number; Python names it from 3.13 on
socks = {}
for port in (9, 7):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    s.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
    s.bind(("0.0.0.0", port))
    socks[s] = port
print("listening", flush=True)
while socks:
    ready, _, _ = select.select(list(socks), [], [], 60)
    if not ready:
        sys.exit("no wake packet within 60 s")
    for s in ready:
        data, anc, _flags, source = s.recvmsg(2048, socket.CMSG_SPACE(12))
        dest = next(socket.inet_ntoa(d[8:12]) for level, kind, d in anc if kind == IP_PKTINFO)
        print(json.dumps({"port": socks.pop(s), "to": dest, "from": source[0], "payload": data.hex()}),
              flush=True)
        s.close()
"""


@pytest.fixture
def lan():
    with Lan(["m", "w"]) as lan:
        yield lan


def test_herd_wake_sends_the_magic_packet_to_the_sleeping_node(tmp_path, lan):
    env = dict(os.environ)
    env["HERD_CONFIG_DIR"] = str(tmp_path / "master-config")
    m, w = lan["m"], lan["w"]
    agent = start_agent(w.popen, tmp_path, "sleepy", bind=w.ip, api_port=API, rpc_port=RPC, echo_port=ECHO)
    r = herd(["pair", f"{w.ip}:{API}", "--pin", agent.pin()], env, wrap=m.cmd)
    assert r.returncode == 0, r.stderr
    mac = w.run(["cat", f"/sys/class/net/{w.dev}/address"], check=True).stdout.strip()
    store = PairingStore(tmp_path / "master-config" / "pairings.json")
    target = store.wake_target(agent.node_id)
    assert target is not None, "the master did not keep the node's MAC at pairing"
    assert (target.mac, target.broadcast) == (mac, f"{lan.subnet}.255")

    agent.proc.terminate()  # asleep: nothing answers at its address any more
    agent.proc.wait(timeout=10)
    listener = w.popen([sys.executable, "-c", LISTENER], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    assert listener.stdout.readline().strip() == "listening", listener.stderr.read()

    r = herd(["wake", "sleepy"], env, wrap=m.cmd)
    assert r.returncode == 0, r.stderr
    assert f"({mac}) to {lan.subnet}.255" in r.stdout

    out, err = listener.communicate(timeout=60)
    assert listener.returncode == 0, err
    received = {d["port"]: d for d in map(json.loads, out.splitlines())}
    magic = (b"\xff" * 6 + bytes.fromhex(mac.replace(":", "")) * 16).hex()
    for port in (9, 7):
        assert received[port] == {"port": port, "to": f"{lan.subnet}.255", "from": m.ip, "payload": magic}


# The stand-in for a PC asleep whose network card may wake it: on the magic packet for its MAC
# (argv[1]) it "wakes up" by becoming the herd-agent (argv[2:]), the same process, so the LAN's
# clean-up stops it. Anything else that arrives is ignored.
SLEEPING_PC = r"""
import os, socket, sys
mac = bytes.fromhex(sys.argv[1].replace(":", ""))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
s.bind(("0.0.0.0", 9))
print("asleep", flush=True)
while s.recv(2048) != b"\xff" * 6 + mac * 16:
    pass
s.close()
print("woken", flush=True)
os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
"""


def test_herd_wake_waits_until_the_node_answers(tmp_path, lan):
    env = dict(os.environ)
    env["HERD_CONFIG_DIR"] = str(tmp_path / "master-config")
    m, w = lan["m"], lan["w"]
    agent = start_agent(w.popen, tmp_path, "sleepy", bind=w.ip, api_port=API, rpc_port=RPC, echo_port=ECHO)
    assert herd(["pair", f"{w.ip}:{API}", "--pin", agent.pin()], env, wrap=m.cmd).returncode == 0
    mac = w.run(["cat", f"/sys/class/net/{w.dev}/address"], check=True).stdout.strip()
    agent.proc.terminate()
    agent.proc.wait(timeout=10)

    r = herd(["wake", "sleepy", "--wait", "2"], env, wrap=m.cmd)  # nothing wakes: it says so
    assert r.returncode == 1
    assert r.stderr.startswith("herd wake: sleepy did not answer within 2 s: check that Wake-on-LAN is allowed")

    agent_argv = ["-m", "agent.main", "--config", agent.config, "--state-dir", agent.state_dir, "--name", "sleepy",
                  "--bind", w.ip, "--api-port", API, "--rpc-port", RPC, "--echo-port", ECHO,
                  "--mdns-interfaces", w.ip, "run"]
    pc = w.popen([sys.executable, "-c", SLEEPING_PC, mac, *agent_argv], stdout=subprocess.PIPE,
                 stderr=subprocess.STDOUT, text=True)
    assert pc.stdout.readline().strip() == "asleep"
    r = herd(["wake", "sleepy", "--wait", "60"], env, wrap=m.cmd)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"waiting up to 60 s for it to answer at {w.ip}:{API}" in r.stdout
    assert r.stdout.splitlines()[-1].startswith("sleepy is awake (answered after ")
    assert pc.stdout.readline().strip() == "woken"

