"""The second round of attacks from a device on the LAN (#25), on the simulated LAN: an attacker
namespace ``x`` (with as many addresses as the attack needs) beside the masters and the worker.
Each test is one finding of the attack run, and failed before its fix:

1. 540 keep-alive and trickling connections from 20 addresses do not lock the paired master out
   of its worker's API: ``herd nodes`` answers throughout.
2. An attacker with 50 addresses that burns pairing attempts the moment a PIN shows does not
   keep a second master from pairing with that PIN.
3. A flood of connections reset mid-body and of malformed requests leaves a few log lines, no
   traceback.
4. Forged mDNS records (the node's id with other ports and name; the node's id at the rogue's
   address) neither move, rename nor break a paired node.
5. A worker process started for one master (cache off) is never handed to another master.
6. The echo's per-source limit holds when the attacker forges more sources than it remembers.
7. A program on the master that is not the llama-server herd started gets nothing from the
   master's forwarder (a local account, not a LAN device: the attacker runs on the master).

Needs root (network namespaces) and the engine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cluster.agents import start_agent
from e2e.herd_cli import HERD, HerdUp, herd
from lan import Lan

pytestmark = [pytest.mark.engine, pytest.mark.netns, pytest.mark.slow]

API, RPC, ECHO = 50050, 50052, 50053
ROOT = Path(__file__).resolve().parents[2]
ATTACKER = str(Path(__file__).with_name("attacker.py"))
ROGUE = str(Path(__file__).with_name("rogue_agent.py"))


def _env(folder: Path, **extra) -> dict:
    # PYTHONPATH: scripts run by path import the project from this checkout
    return {**os.environ, "HERD_CONFIG_DIR": str(folder), "PYTHONPATH": str(ROOT), **extra}


def _python(host, code: str, *args, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    return host.run([sys.executable, "-c", code, *map(str, args)], env=env, timeout=timeout)


class Attack:
    """The attacker program running on ``host``; :attr:`last` is its latest JSON report."""

    def __init__(self, host, args: list, env: dict) -> None:
        self.proc = host.popen([sys.executable, ATTACKER, *map(str, args)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.last: dict = {}
        self.output: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.output.append(line.rstrip("\n"))
            if line.startswith("{"):
                self.last = json.loads(line)

    def wait_for(self, cond, timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout
        while not cond(self.last):
            assert self.proc.poll() is None, f"the attacker stopped: {self.output[-20:]}"
            assert time.monotonic() < deadline, f"{what}: {self.last}"
            time.sleep(0.05)
        return self.last

    def stop(self) -> dict:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        return self.last


def _pair(master, env: dict, agent, a_host) -> None:
    r = herd(["pair", f"{a_host.ip}:{API}", "--pin", agent.pin()], env, wrap=master.cmd)
    assert r.returncode == 0, r.stdout + r.stderr


def _listed(master, env: dict, *args: str) -> list[dict]:
    r = herd(["nodes", "--json", *args], env, wrap=master.cmd)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


# --- 1. admission that favours the owner --------------------------------------------------------

async def test_540_keep_alive_connections_from_20_addresses_do_not_lock_the_master_out(engine, tmp_path):
    with Lan(["m", "a", "x"]) as lan:
        m, a_host, x = lan["m"], lan["a"], lan["x"]
        a = start_agent(a_host.popen, tmp_path, "a", bind=a_host.ip, api_port=API, rpc_port=RPC,
                        echo_port=ECHO, mdns=False)
        env = _env(tmp_path / "master")
        _pair(m, env, a, a_host)
        attack = Attack(x, ["keepalive", a_host.ip, API, ",".join(x.add_addresses(20)), 27, 10], env)
        try:
            # The flood holds (almost) every stranger's place the agent has (512), and asks for more.
            attack.wait_for(lambda s: s.get("open", 0) >= 500 and s.get("connects", 0) >= 540, 120,
                            "the attacker could not open its connections")
            for _ in range(3):
                nodes = _listed(m, env, "--no-mdns")
                node = next((n for n in nodes if n["id"] == a.node_id), None)
                assert node is not None and node["reachable"] and node["paired"], (nodes, attack.last)
                assert node["state"] == "stopped" and node["rpc_port"] == RPC, node
                assert attack.last["open"] >= 450, attack.last  # the flood went on meanwhile
        finally:
            attack.stop()


# --- 2. pairing that an attacker cannot deny ----------------------------------------------------

async def test_a_pin_burning_attacker_with_50_addresses_cannot_deny_a_pairing(engine, tmp_path):
    from agent.pairing import GUESSES_PER_PIN, PinFile
    with Lan(["m", "n", "a", "x"]) as lan:
        m, n, a_host, x = lan["m"], lan["n"], lan["a"], lan["x"]
        a = start_agent(a_host.popen, tmp_path, "a", bind=a_host.ip, api_port=API, rpc_port=RPC,
                        echo_port=ECHO, mdns=False)
        _pair(m, _env(tmp_path / "master-1"), a, a_host)  # the first master, before the attack
        env = _env(tmp_path / "master-2")
        attack = Attack(x, ["pinburn", a.api_url, ",".join(x.add_addresses(50))], env
                        | {"ATTACKER_DIR": str(tmp_path / "attacker")})
        try:
            attack.wait_for(lambda s: s.get("no_pin", 0) >= 200, 60, "the attacker is not polling")
            pin = a.pin()  # herd-agent pin on the worker: the attacker pounces at once
            # 20 attempts: all that one PIN took before #25
            attack.wait_for(lambda s: s.get("started", 0) >= 20, 30, "no attempt got through")
            # The owner types the PIN on the second master while the flood goes on.
            r = herd(["pair", f"{a_host.ip}:{API}", "--pin", pin], env, wrap=n.cmd)
            report = attack.last
            assert r.returncode == 0, r.stdout + r.stderr + json.dumps(report)
        finally:
            report = attack.stop()
        assert report["paired"] == 0 and report["started"] >= 20, report
        state = json.loads((a.state_dir / "agent-state.json").read_text())
        assert len(state["masters"]) == 2
        assert PinFile(a.state_dir).current() is None  # used up by the pairing
        assert report["started"] < GUESSES_PER_PIN


# --- 3. no traceback for a stranger's mistake ---------------------------------------------------

async def test_a_flood_of_resets_and_malformed_requests_leaves_a_bounded_log(engine, tmp_path):
    with Lan(["a", "x"]) as lan:
        a_host, x = lan["a"], lan["x"]
        a = start_agent(a_host.popen, tmp_path, "a", bind=a_host.ip, api_port=API, rpc_port=RPC,
                        echo_port=ECHO, mdns=False)
        before = len(a.lines)
        attack = Attack(x, ["resets", a_host.ip, API, 5], _env(tmp_path))
        assert attack.proc.wait(timeout=60) == 0, attack.output
        report = attack.last
        assert report["resets"] >= 200 and report["malformed"] >= 50, report
        # the agent still answers, and every record it wrote has come out of its pipe
        r = herd(["nodes", "--json", "--no-mdns", "--add", f"{a_host.ip}:{API}"], _env(tmp_path / "m"),
                 wrap=x.cmd)
        assert r.returncode == 0 and a.node_id in r.stdout, r.stdout + r.stderr
        new = a.lines[before:]
        assert not any("Traceback" in ln for ln in new), "\n".join(new[:60])
        assert len(new) <= 20, f"{len(new)} log lines for {report}:\n" + "\n".join(new[:40])


# --- 4. hints are hints -----------------------------------------------------------------------

ADVERTISE = r"""
import asyncio, socket, sys
from zeroconf import IPVersion
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf
from agent import protocol as P
me, node_id, real_ip, api = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
async def go():
    zc = AsyncZeroconf(interfaces=[me], ip_version=IPVersion.V4Only)
    # the node's id and real address, with other ports and another name
    moved = P.build_txt(node_id=node_id, version="9", api_port=api, rpc_port=50099, echo_port=50098,
                        state="ready")
    await zc.async_register_service(AsyncServiceInfo(
        P.SERVICE_TYPE, f"evil-twin.{P.SERVICE_TYPE}", port=api, properties=moved,
        addresses=[socket.inet_aton(real_ip)], server="evil-twin.local."))
    # the node's id at the rogue's own address (where rogue_agent.py relays the public calls)
    here = P.build_txt(node_id=node_id, version="9", api_port=api, rpc_port=api + 2, echo_port=api + 3,
                       state="stopped")
    await zc.async_register_service(AsyncServiceInfo(
        P.SERVICE_TYPE, f"gamingpc.{P.SERVICE_TYPE}", port=api, properties=here,
        addresses=[socket.inet_aton(me)], server="gamingpc.local."))
    print("advertised", flush=True)
    await asyncio.sleep(3600)
asyncio.run(go())
"""


async def test_forged_mdns_records_neither_move_rename_nor_break_a_paired_node(engine, tmp_path):
    with Lan(["m", "a", "x"]) as lan:
        m, a_host, x = lan["m"], lan["a"], lan["x"]
        a = start_agent(a_host.popen, tmp_path, "a", bind=a_host.ip, api_port=API, rpc_port=RPC,
                        echo_port=ECHO)
        env = _env(tmp_path / "master")
        _pair(m, env, a, a_host)
        (tmp_path / "master" / "nodes.json").unlink()  # found by mDNS only from here on
        rogue = x.popen([sys.executable, ROGUE, x.ip, str(API), a.api_url, "relay", tmp_path / "rogue"],
                        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert json.loads(rogue.stdout.readline())["kind"] == "listening"
        adverts = x.popen([sys.executable, "-c", ADVERTISE, x.ip, a.node_id, a_host.ip, API], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert adverts.stdout.readline().strip() == "advertised"
        # Each run browses afresh, so all three records resolve at once: the race of #25.
        for _ in range(3):
            nodes = [nd for nd in _listed(m, env, "--interface", m.ip, "--timeout", "3") if nd["id"] == a.node_id]
            assert len(nodes) == 1, nodes
            node = nodes[0]
            assert (node["host"], node["name"], node["rpc_port"], node["echo_port"]) == (a_host.ip, "a", RPC, ECHO), node
            assert node["reachable"] and node["paired"] and node["state"] == "stopped", node
            assert f"https://{x.ip}:{API} claims to be node {a.node_id}" in node["impostor"], node
        # herd plan takes the node's RPC endpoint from the node itself, not the forged record
        r = herd(["nodes", "--interface", m.ip, "--timeout", "3"], env, wrap=m.cmd)
        assert f"{a_host.ip}:{API}" in r.stdout and "50099" not in r.stdout, r.stdout


# --- 5. one master's bytes never reach another -------------------------------------------------

USE_WORKER = r"""
import asyncio, sys
from agent.client import AgentClient, AgentError
from agent import rpc_protocol
from gui.cluster.nodes.records import PairingStore, master_identity
from gui.cluster.nodes.tunnel import Forwarder
url, node_id, host, rpc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
async def go():
    pinned = PairingStore().get(node_id)
    async with AgentClient(url, identity=master_identity(), pinned=pinned) as c:
        # what ReadyWorker asks for: this master's worker, without the weight cache; refused (409)
        # while another master's lease on the worker is fresh
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            try:
                await c.rpc_start(threads=1, cache=False)
                break
            except AgentError as exc:
                if exc.status != 409 or asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.1)
        while (await c.status())["rpc"]["state"] != "ready":
            await asyncio.sleep(0.1)
        f = await Forwarder(host, rpc, master_identity(), pinned).start()
        fhost, fport = f.endpoint.split(":")
        reader, writer = await asyncio.open_connection(fhost, int(fport))
        proto = await rpc_protocol.hello_async(reader, writer, 10)
        writer.close()
        await f.close()
        print((await c.status())["rpc"]["pid"], proto, flush=True)
asyncio.run(go())
"""


async def test_a_worker_that_ran_for_one_master_is_never_handed_to_another(engine, tmp_path):
    with Lan(["m", "n", "a"]) as lan:
        m, n, a_host = lan["m"], lan["n"], lan["a"]
        (tmp_path / "agent-a").mkdir()
        (tmp_path / "agent-a" / "agent.toml").write_text("lease_idle_s = 1\ncache = false\n")
        a = start_agent(a_host.popen, tmp_path, "a", bind=a_host.ip, api_port=API, rpc_port=RPC,
                        echo_port=ECHO, mdns=False)
        env_m, env_n = _env(tmp_path / "master-1"), _env(tmp_path / "master-2")  # n: the other master
        _pair(m, env_m, a, a_host)
        _pair(n, env_n, a, a_host)
        r = _python(m, USE_WORKER, a.api_url, a.node_id, a_host.ip, RPC, env=env_m)
        assert r.returncode == 0, r.stderr
        first_pid = int(r.stdout.split()[0])
        # The second master takes the worker once the first one's lease went stale (1 s).
        r = _python(n, USE_WORKER, a.api_url, a.node_id, a_host.ip, RPC, env=env_n)
        assert r.returncode == 0, r.stderr
        second_pid = int(r.stdout.split()[0])
        assert second_pid != first_pid, "the second master got the first master's worker process"


# --- 6. the echo's limit holds ---------------------------------------------------------------

COUNT_REPLIES = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(0.2)
print("listening", flush=True)
end = time.monotonic() + float(sys.argv[3])
n = 0
while time.monotonic() < end:
    try:
        data, _ = s.recvfrom(2048)
    except socket.timeout:
        continue
    n += data.startswith(b"herd-echo!")
print(n, flush=True)
"""


async def test_the_echo_limit_per_source_holds_whatever_the_number_of_sources(engine, tmp_path):
    from agent.echo import BURST, RATE
    with Lan(["a", "v", "x"]) as lan:
        a_host, v, x = lan["a"], lan["v"], lan["x"]
        start_agent(a_host.popen, tmp_path, "a", bind=a_host.ip, api_port=API, rpc_port=RPC,
                    echo_port=ECHO, mdns=False)
        # The worker takes datagrams from forged sources outside the LAN (as with no reverse-path
        # filter, the default); it has no route back, so its replies to them leave nothing.
        a_host.run(["sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", f"net.ipv4.conf.{a_host.dev}.rp_filter=0"])
        seconds = 2.0
        victim = v.popen([sys.executable, "-c", COUNT_REPLIES, v.ip, 40000, seconds + 3],
                         stdout=subprocess.PIPE, text=True)
        assert victim.stdout.readline().strip() == "listening"
        attack = Attack(x, ["echo-flush", a_host.ip, ECHO, v.ip, 40000, seconds], _env(tmp_path))
        assert attack.proc.wait(timeout=60) == 0, attack.output
        replies = int(victim.stdout.readline())
        victim.wait(timeout=10)
        assert attack.last["as_victim"] >= 250, attack.last  # the victim's budget was asked for often
        # One source's budget: the burst, and what the rate refilled while the attack lasted
        # (sending it took a little longer than `seconds`).
        assert replies <= BURST + RATE * (seconds + 0.5), (replies, attack.last)
        assert replies >= BURST  # and the echo did answer


# --- 7. the forwarder serves only what herd started -------------------------------------------

async def test_another_program_on_the_master_gets_nothing_from_the_forwarder(engine, demo_model, tmp_path):
    with Lan(["m", "a"]) as lan:
        m, a_host = lan["m"], lan["a"]
        a = start_agent(a_host.popen, tmp_path, "a", bind=a_host.ip, api_port=API, rpc_port=RPC,
                        echo_port=ECHO, mdns=False)
        env = _env(tmp_path / "master")
        _pair(m, env, a, a_host)
        up = HerdUp(m.popen(HERD + ["up", demo_model, "--split", "a=7,host=2", "--ctx", "512",
                                    "--host", "127.0.0.1", "--port", "8080", "--threads", "1",
                                    "--no-mdns"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        try:
            up.wait_for("Serving", 180)
            import psutil
            (server,) = up.server_pids()
            argv = psutil.Process(server).cmdline()
            forwarder = argv[argv.index("--rpc") + 1]
            host, port = forwarder.split(":")
            assert host == "127.0.0.1"
            # Another program on the master (not started by herd) connects to the forwarder.
            r = m.run([sys.executable, ATTACKER, "local-rpc", port], env=env, timeout=60)
            assert r.returncode == 0, r.stderr
            seen = json.loads(r.stdout.strip().splitlines()[-1])
            assert seen["closed"] and seen["bytes"] == 0 and seen["seconds"] < 2, seen
            # herd's own llama-server still serves through it
            chat = ("import httpx\n"
                    "r = httpx.post('http://127.0.0.1:8080/v1/chat/completions', timeout=120, json={\n"
                    "    'messages': [{'role': 'user', 'content': 'Hi'}], 'max_tokens': 4})\n"
                    "r.raise_for_status(); print(r.json()['usage']['completion_tokens'])\n")
            r = _python(m, chat, env=env)
            assert r.returncode == 0 and r.stdout.strip() == "4", r.stderr
        finally:
            up.proc.send_signal(signal.SIGINT)
            up.proc.wait(timeout=60)
