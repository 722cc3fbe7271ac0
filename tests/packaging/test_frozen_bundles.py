"""Smoke tests of the PyInstaller one-folder builds made by packaging/pyinstaller/build.sh.

Freezing takes about a minute per program on two cores, so these are marked ``slow``; CI runs
them. The frozen agent is started with loopback-only options and a temporary state folder, and
must answer ``/api/v1/info`` and stop cleanly on SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "packaging" / "pyinstaller" / "build.sh"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="build.sh is the Linux/macOS build"),
]


def freeze(target: str, tmp: Path) -> Path:
    proc = subprocess.run(["bash", str(BUILD), target, "--dist", str(tmp / "dist"),
                           "--work", str(tmp / "work")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    name = "herd-agent" if target == "agent" else "herd"
    exe = tmp / "dist" / name / name
    assert exe.is_file() and os.access(exe, os.X_OK)
    return exe


@pytest.fixture(scope="module")
def frozen_agent(tmp_path_factory) -> Path:
    return freeze("agent", tmp_path_factory.mktemp("freeze-agent"))


def test_frozen_agent_reports_its_version(frozen_agent):
    from agent import __version__

    out = subprocess.run([str(frozen_agent), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"herd-agent {__version__}"


def test_frozen_agent_has_the_service_commands(frozen_agent):
    """Sub-commands are registered by module name: the spec must have frozen those modules."""
    out = subprocess.run([str(frozen_agent), "firewall", "add", "--dry-run", "--rpc-port", "7102"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "localport=7102" in out.stdout


def test_frozen_agent_serves_info(frozen_agent, tmp_path, procs):
    api, rpc, echo = free_port(), free_port(), free_port()
    state = tmp_path / "state"
    proc = procs.popen([frozen_agent, "run", "--bind", "127.0.0.1", "--api-port", api,
                        "--rpc-port", rpc, "--echo-port", echo, "--no-mdns",
                        "--state-dir", state, "--config", tmp_path / "agent.toml",
                        "--name", "frozen-smoke"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{api}/api/v1/info"
    deadline = time.monotonic() + 60
    info = None
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"frozen agent exited early ({proc.returncode}): {proc.stdout.read()}"
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                info = json.load(resp)
            break
        except OSError:
            time.sleep(0.2)
    assert info is not None, "no answer from the frozen agent's /api/v1/info within 60 s"
    assert info["name"] == "frozen-smoke"
    assert info["ports"] == {"api": api, "rpc": rpc, "echo": echo}
    # it used the state folder it was given
    node = json.loads((state / "agent-state.json").read_text())
    assert info["id"] == node["node_id"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0


@pytest.fixture(scope="module")
def frozen_app(tmp_path_factory) -> Path:
    return freeze("herd", tmp_path_factory.mktemp("freeze-app"))


def _app_env() -> dict:
    return dict(os.environ, QT_QPA_PLATFORM="offscreen")


def test_frozen_app_reports_its_version(frozen_app):
    from agent import __version__

    out = subprocess.run([str(frozen_app), "--version"], capture_output=True, text=True, timeout=60,
                         env=_app_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"llama-herd {__version__}"


def test_frozen_app_runs_a_headless_command(frozen_app, tmp_path):
    """`herd demo-model` needs numpy and gguf inside the bundle and a command module registered
    by name; the file it writes must be a GGUF the unfrozen reader accepts."""
    import gguf

    model = tmp_path / "tiny.gguf"
    out = subprocess.run([str(frozen_app), "demo-model", str(model), "--layers", "2"],
                         capture_output=True, text=True, timeout=120, env=_app_env())
    assert out.returncode == 0, out.stderr
    reader = gguf.GGUFReader(str(model))
    assert int(reader.fields["llama.block_count"].parts[-1][0]) == 2
