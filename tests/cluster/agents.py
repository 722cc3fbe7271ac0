"""Starting real ``herd-agent`` processes for tests of the master's core and CLI."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from conftest import ProcessJar, free_port

_READY = re.compile(r"herd-agent ready api=(\S+) rpc=(\d+) echo=(\d+) id=(\S+) name=(.*)")


@dataclass
class RunningAgent:
    """A herd-agent the test started."""

    proc: subprocess.Popen
    api_url: str
    rpc_port: int
    echo_port: int
    node_id: str
    name: str
    state_dir: Path
    config: Path
    lines: list[str]

    def pin(self, wrap=None) -> str:
        """The PIN the agent shows (``herd-agent pin`` on the worker itself)."""
        argv = [sys.executable, "-m", "agent.main", "--config", str(self.config),
                "--state-dir", str(self.state_dir), "pin"]
        out = subprocess.run(wrap(argv) if wrap else argv, capture_output=True, text=True,
                             check=True, timeout=30, stdin=subprocess.DEVNULL)
        return out.stdout.strip()


def start_agent(popen, tmp: Path, name: str, bind: str = "127.0.0.1", *, mdns: bool = True,
                api_port: int | None = None, rpc_port: int | None = None,
                echo_port: int | None = None, extra: list[str] = (), timeout: float = 30.0) -> RunningAgent:
    """Start ``herd-agent run`` with ``popen`` (``procs.popen`` or ``host.popen``) and wait for
    its ready line. Ports default to free loopback ports (pass them for a namespace)."""
    state = tmp / f"agent-{name}"
    state.mkdir(parents=True, exist_ok=True)
    config = state / "agent.toml"
    argv = [sys.executable, "-m", "agent.main", "--config", str(config), "--state-dir", str(state),
            "--name", name, "--bind", bind,
            "--api-port", str(api_port or free_port()), "--rpc-port", str(rpc_port or free_port()),
            "--echo-port", str(echo_port or free_port())]
    argv += ["--mdns-interfaces", bind] if mdns else ["--no-mdns"]
    argv += [*extra, "run"]
    proc = popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    found: dict = {}
    ready = threading.Event()

    def pump() -> None:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            m = _READY.search(line)
            if m and not ready.is_set():
                found["m"] = m
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not ready.wait(0.1):
        if time.monotonic() > deadline:
            break
    if "m" not in found:
        raise RuntimeError(f"herd-agent {name} did not become ready:\n" + "\n".join(lines[-30:]))
    m = found["m"]
    return RunningAgent(proc, m.group(1), int(m.group(2)), int(m.group(3)), m.group(4),
                        m.group(5).strip(), state, config, lines)


@contextlib.contextmanager
def paired_agent(tmp: Path, name: str = "paired"):
    """A real herd-agent on loopback (no mDNS, its own RPC cache), paired by PAKE.

    Yields ``(agent, keys)`` and stops the agent afterwards, ``keys`` being a
    :class:`PairedKeys` (the master's identity and the agent's pinned certificate); for
    module-scoped fixtures, where the function-scoped ``procs`` fixture cannot be used.
    """
    jar = ProcessJar()
    env = dict(os.environ, LLAMA_CACHE=str(tmp / "cache"))
    try:
        agent = start_agent(lambda argv, **kw: jar.popen(argv, env=env, **kw), tmp, name, mdns=False)
        yield agent, pair_keys(agent, tmp / "master")
    finally:
        jar.close()


@dataclass
class PairedKeys:
    """What a master holds after pairing: its identity and the agent's pinned certificate."""

    identity: object
    pinned: str

    def client_context(self):
        """An ``ssl`` context for raw HTTPS calls with these keys (mutual TLS, pinned)."""
        from agent.identity import client_context
        return client_context(self.identity, self.pinned)

    def cert_files(self) -> tuple[str, str]:
        """(certificate file, key file) of the master, for clients that take files."""
        return str(self.identity.cert_path), str(self.identity.key_path)


def pair_keys(agent: RunningAgent, folder: Path, wrap=None) -> PairedKeys:
    """Pair with ``agent`` by PAKE (the PIN from ``herd-agent pin``) from a fresh master identity
    in ``folder``; returns the keys."""
    import asyncio

    from agent.client import AgentClient
    from agent.identity import load_or_create

    me = load_or_create(folder, "master", "test master")

    async def go() -> str:
        async with AgentClient(agent.api_url, identity=me, timeout=10) as c:
            return await c.pair(agent.pin(wrap), "test-master")
    return PairedKeys(me, asyncio.run(go()))


async def pair_all(disc, agents: list[RunningAgent]) -> tuple[dict, list]:
    """Add each agent to ``disc`` (a :class:`gui.cluster.nodes.discovery.Discovery`) by address, pair
    it with its PIN, and read its devices; returns ``({node id: node}, [Device, …])`` in the
    agents' order."""
    from gui.cluster.planning.devices import node_devices

    nodes, devices = {}, []
    for agent in agents:
        node = await disc.add_address(agent.api_url)
        await disc.pair(node, agent.pin())
        node = disc.nodes[node.id]
        nodes[node.id] = node
        async with disc.client(node) as c:
            devices.extend(node_devices(node, await c.status()))
    return nodes, devices


async def start_worker(client) -> None:
    """Start a node's RPC worker through its agent (``client``) and wait until it serves."""
    import asyncio

    from agent.protocol import WorkerState

    await client.rpc_start()
    for _ in range(100):
        if (await client.status()).rpc.state == WorkerState.READY:
            return
        await asyncio.sleep(0.1)  # polling the agent's own report of its worker
    raise AssertionError(f"the worker did not start: {(await client.status()).rpc}")


@contextlib.asynccontextmanager
async def one_paired_node(procs, tmp: Path, name: str = "a"):
    """One real herd-agent on loopback (no mDNS), added by address and paired by PIN: yields
    ``(agent, node, discovery)`` and stops the discovery afterwards (``procs`` the agent)."""
    from gui.cluster.nodes.discovery import Discovery
    from gui.cluster.nodes.records import TokenStore

    agent = start_agent(procs.popen, tmp, name, mdns=False)
    disc = Discovery(browse=False, tokens=TokenStore(tmp / "tokens.json"))
    try:
        nodes, _ = await pair_all(disc, [agent])
        yield agent, next(iter(nodes.values())), disc
    finally:
        await disc.stop()
