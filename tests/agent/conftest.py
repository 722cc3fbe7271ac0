"""Fixtures for agent tests: an in-process agent on loopback, a paired client for it, and
helpers to run ``herd-agent`` as a real process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import free_port

from agent.client import AgentClient
from agent.daemon import Agent
from agent.identity import load_or_create
from agent.settings import Settings, load_state


@pytest.fixture
def rpc_env(tmp_path) -> dict:
    """Environment for RPC workers: their tensor cache goes to the test's temp folder."""
    env = dict(os.environ)
    env["LLAMA_CACHE"] = str(tmp_path / "llama-cache")
    return env


@pytest.fixture
async def make_agent(tmp_path, rpc_env):
    """``await make_agent(**settings)`` → a started in-process :class:`Agent` on 127.0.0.1
    (mDNS off unless asked). Every agent made is closed after the test."""
    made: list[Agent] = []

    async def _make(**overrides) -> Agent:
        n = len(made)
        fields = {"name": f"test-agent-{n}", "bind": "127.0.0.1", "api_port": 0, "echo_port": 0,
                  "rpc_port": free_port(), "mdns": False}
        fields.update(overrides)
        state = load_state(tmp_path / f"state-{n}")
        agent = Agent(Settings(**fields), state, env=rpc_env)
        await agent.start()
        made.append(agent)
        return agent

    yield _make
    for agent in made:
        await agent.close()


@pytest.fixture
def master_id(tmp_path):
    """A master's identity (key and certificate) in the test's temp folder."""
    return load_or_create(tmp_path / "master", "master", "test master")


@pytest.fixture
async def paired(make_agent, master_id):
    """``(agent, client)``: a started agent and a client that has paired with it (PAKE with the
    PIN the agent shows, then mutual TLS with the pinned keys)."""
    agent = await make_agent()
    client = AgentClient(agent.api_url, identity=master_id)
    await client.pair(agent.show_pin(), "test-master")
    yield agent, client
    await client.aclose()




# --- agents as real processes ------------------------------------------------------------

READY = re.compile(r"herd-agent ready api=(\S+) rpc=(\d+) echo=(\d+) id=(\S+)")


@dataclass
class AgentProcess:
    """A started ``herd-agent run``; ``lines`` collects its output (stdout and stderr)."""

    proc: subprocess.Popen
    state_dir: Path
    lines: list[str] = field(default_factory=list)
    ready_at: float | None = None
    api_url: str = ""
    rpc_port: int = 0
    echo_port: int = 0
    node_id: str = ""

    def wait_ready(self, timeout: float = 30.0) -> "AgentProcess":
        deadline = time.monotonic() + timeout
        while self.ready_at is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("herd-agent did not become ready:\n" + "\n".join(self.lines[-30:]))
            time.sleep(0.02)
        return self

    def wait_exit(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)


def agent_argv(state_dir: Path, *, name: str, bind: str, api_port: int, rpc_port: int, echo_port: int,
               mdns_ip: str | None) -> list[str]:
    argv = [sys.executable, "-m", "agent.main", "--config", str(state_dir / "agent.toml"),
            "--state-dir", str(state_dir), "--name", name, "--bind", bind, "--api-port", str(api_port),
            "--rpc-port", str(rpc_port), "--echo-port", str(echo_port)]
    if mdns_ip == "all":  # every interface: only inside a test namespace (see the NETWORK rule)
        pass
    else:
        argv += ["--mdns-interfaces", mdns_ip] if mdns_ip else ["--no-mdns"]
    return argv + ["run"]


def start(popen, argv: list[str], state_dir: Path) -> AgentProcess:
    """Start with ``popen`` (``procs.popen`` or ``host.popen``); a thread reads its output."""
    proc = popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    ap = AgentProcess(proc, state_dir)

    def pump() -> None:
        for line in proc.stdout:
            ap.lines.append(line.rstrip("\n"))
            m = READY.search(line)
            if m and ap.ready_at is None:
                ap.api_url, ap.rpc_port, ap.echo_port, ap.node_id = (
                    m.group(1), int(m.group(2)), int(m.group(3)), m.group(4))
                ap.ready_at = time.monotonic()

    threading.Thread(target=pump, daemon=True).start()
    return ap


@pytest.fixture
def agent_process():
    """Helpers to run ``herd-agent`` as a real process: ``agent_process.argv(...)`` builds its
    command line, ``agent_process.start(popen, argv, state_dir)`` starts it and reads its output."""
    return SimpleNamespace(argv=agent_argv, start=start)



@pytest.fixture
async def forwarder(paired):
    """``await forwarder()`` → the ``host, port`` of a master-side TLS forwarder
    (:class:`gui.cluster.nodes.tunnel.Forwarder`) to the paired agent's RPC relay, with the paired
    client's keys: what llama-server connects to on a real master."""
    from gui.cluster.nodes.tunnel import Forwarder
    agent, client = paired
    made = []

    async def _make():
        f = await Forwarder("127.0.0.1", agent.rpc_port, client.identity, client.pinned).start()
        made.append(f)
        host, port = f.endpoint.rsplit(":", 1)
        return host, int(port)

    yield _make
    for f in made:
        await f.close()

