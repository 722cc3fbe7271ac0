"""Both programs start without a Python traceback on a LAN without IPv6 (#37 item 8).

The simulated LAN's hosts have IPv6 link-local addresses only: no IPv6 route leaves them, and
the loopback (``::1``) can send no IPv6 multicast at all. Before, ``herd-agent`` (advertising on
every interface, its default) and ``herd nodes`` (browsing on every interface, as the app does)
and the app's discovery (browsing on every interface) each opened a zeroconf socket on ``::1``,
whose first send failed with "Network is unreachable" and a traceback on stderr. Now each leaves
out what cannot send, and the master still finds the worker over IPv4. Needs root (network namespaces): skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from lan import Lan

pytestmark = [pytest.mark.netns]

# The app's discovery as the app runs it: gui/session.py's Discovery on every interface, with
# gui/app.py's logging (warnings to stderr). `herd nodes` logs nothing, so it would show nothing.
MASTER = """
import asyncio, json, logging, sys
from pathlib import Path
from gui.cluster.nodes.discovery import Discovery
from gui.cluster.nodes.records import TokenStore

logging.basicConfig(level=logging.WARNING)

async def main():
    async with Discovery(tokens=TokenStore(Path(sys.argv[1]) / "tokens.json")) as disc:
        await disc.wait_until(lambda nodes: any(n.reachable for n in nodes.values()), 20)
        print(json.dumps([n.to_json() for n in disc.nodes.values()]))

asyncio.run(main())
"""

ROOT = Path(__file__).resolve().parents[2]
API, RPC, ECHO = 50050, 50052, 50053  # each namespace has its own ports: the defaults are free


def start_agent_on_every_interface(host, state) -> tuple[subprocess.Popen, list[str]]:
    """``herd-agent run`` as a user starts it (mDNS on every interface); returns it and its
    output lines (stdout and stderr) once it says it is ready."""
    state.mkdir()
    argv = [sys.executable, "-m", "agent.main", "--config", str(state / "agent.toml"), "--state-dir",
            str(state), "--name", "worker-a", "--api-port", str(API), "--rpc-port", str(RPC),
            "--echo-port", str(ECHO), "run"]
    proc = host.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("herd-agent ready"):
                ready.set()
        ready.set()  # it exited: the assertion below shows its output

    threading.Thread(target=pump, daemon=True).start()
    assert ready.wait(30) and proc.poll() is None, "\n".join(lines)
    return proc, lines


def test_agent_and_master_start_without_a_traceback_and_meet_over_ipv4(tmp_path):
    with Lan(["m", "a"]) as lan:
        m, a = lan["m"], lan["a"]
        assert "inet6" not in m.run(["ip", "-6", "route", "show", "default"]).stdout  # no IPv6 route out
        agent, agent_lines = start_agent_on_every_interface(a, tmp_path / "agent")
        env = {**os.environ, "HERD_CONFIG_DIR": str(tmp_path / "master"),
               "PYTHONPATH": str(ROOT)}  # the script runs from a string: this tree on its path
        found = m.run([sys.executable, "-c", MASTER, str(tmp_path / "master")], env=env, timeout=120)
        assert found.returncode == 0, found.stderr
        nodes = json.loads(found.stdout)
        assert [(n["name"], n["host"]) for n in nodes] == [("worker-a", a.ip)], found.stdout
        assert agent.poll() is None, "\n".join(agent_lines)
        for program, output in (("the app's discovery", found.stderr), ("herd-agent", "\n".join(agent_lines))):
            assert "Traceback" not in output, f"{program} printed a traceback:\n{output}"
            assert "Network is unreachable" not in output, f"{program}:\n{output}"
